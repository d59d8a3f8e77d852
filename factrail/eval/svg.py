"""Inline SVG plots for the report page: no library, no script, styled by the page's CSS.

Every mark carries a class (`axis`, `grid`, `ref`, `s-factrail`, `s-erase`, `s-whole`) the page
colours for light and dark schemes; every text is escaped here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 720
HEIGHT = 300
LEFT, RIGHT, TOP, BOTTOM = 60, 20, 14, 40


def tokens(value: float) -> str:
    """A token count in a few characters: 950, 12k, 1.2M."""
    v = abs(value)
    if v >= 1e6:
        return f"{value / 1e6:.1f}M".replace(".0M", "M")
    if v >= 1e4:
        return f"{value / 1e3:.0f}k"
    if v >= 1e3:
        return f"{value / 1e3:.1f}k".replace(".0k", "k")
    return f"{value:.0f}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi], about `count` of them."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.floor(lo / step) * step
    out: list[float] = []
    v = first
    while v <= hi + step * 1e-9:
        out.append(round(v, 10))
        v += step
    return out


@dataclass(frozen=True, slots=True)
class Axis:
    """A linear or log₁₀ scale from data to pixels."""

    lo: float
    hi: float
    start: float
    end: float
    log: bool = False

    def __call__(self, value: float) -> float:
        lo, hi, v = self.lo, self.hi, value
        if self.log:
            lo, hi, v = math.log10(lo), math.log10(hi), math.log10(max(value, self.lo))
        share = (v - lo) / (hi - lo) if hi > lo else 0.5
        return self.start + share * (self.end - self.start)

    def ticks(self) -> list[float]:
        """Tick values inside the range: powers of ten (and 2×, 5× when few) on a log scale."""
        if not self.log:
            return [t for t in nice_ticks(self.lo, self.hi) if self.lo <= t <= self.hi]
        out: list[float] = []
        for e in range(math.floor(math.log10(self.lo)), math.ceil(math.log10(self.hi)) + 1):
            out.extend(m * 10**e for m in (1, 2, 5))
        inside = [t for t in out if self.lo <= t <= self.hi]
        return inside if len(inside) <= 8 else [t for t in inside if math.log10(t).is_integer()]


def _frame(x: Axis, y: Axis, fx: Callable[[float], str], fy: Callable[[float], str]) -> list[str]:
    parts: list[str] = []
    for t in y.ticks():
        py = y(t)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{py:.1f}" '
                     f'y2="{py:.1f}"/>')  # fmt: skip
        parts.append(f'<text class="tick" x="{LEFT - 6}" y="{py + 4:.1f}" '
                     f'text-anchor="end">{escape(fy(t))}</text>')  # fmt: skip
    for t in x.ticks():
        px = x(t)
        parts.append(f'<text class="tick" x="{px:.1f}" y="{HEIGHT - BOTTOM + 16}" '
                     f'text-anchor="middle">{escape(fx(t))}</text>')  # fmt: skip
    parts.append(
        f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{HEIGHT - BOTTOM}" '
        f'y2="{HEIGHT - BOTTOM}"/>'
    )
    return parts


def _svg(label: str, parts: Sequence[str], x_title: str, y_title: str) -> str:
    mid_y = TOP + (HEIGHT - TOP - BOTTOM) / 2
    return (
        f'<svg class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(label)}">'
        + "".join(parts)
        + f'<text class="title" x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 6}" '
        f'text-anchor="middle">{escape(x_title)}</text>'
        f'<text class="title" x="14" y="{mid_y}" text-anchor="middle" '
        f'transform="rotate(-90 14 {mid_y})">{escape(y_title)}</text></svg>'
    )


@dataclass(frozen=True, slots=True)
class Point:
    """One session on the ratio plot."""

    name: str
    size: float
    factrail: float
    erase: float


def ratio_plot(points: Sequence[Point]) -> str:
    """Billed over sending everything against the session's peak tokens: factrail's dots, the
    erase rule's rings, a line at 1."""
    sizes = [max(p.size, 1.0) for p in points] or [1.0]
    lo_size, hi_size = min(sizes), max(sizes)
    log = hi_size / lo_size > 20
    pad = 1.15 if log else 1.0
    x_lo = lo_size / pad if log else max(0.0, lo_size - (hi_size - lo_size) * 0.05)
    x_hi = hi_size * pad if log else hi_size + (hi_size - lo_size) * 0.05 + 1
    ratios = [r for p in points for r in (p.factrail, p.erase)] or [1.0]
    y_lo = max(min(math.floor(min(ratios) * 10) / 10 - 0.05, 0.9), 0.0)
    y_hi = max(math.ceil(max(ratios) * 20) / 20, 1.05)
    x = Axis(x_lo, x_hi, LEFT, WIDTH - RIGHT, log)
    y = Axis(y_lo, y_hi, HEIGHT - BOTTOM, TOP)
    parts = _frame(x, y, tokens, lambda v: f"{v:.2f}")
    one = y(1.0)
    parts.append(f'<line class="ref" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{one:.1f}" '
                 f'y2="{one:.1f}"/>')  # fmt: skip
    parts.append(f'<text class="ref-label" x="{WIDTH - RIGHT - 4}" y="{one - 5:.1f}" '
                 'text-anchor="end">sending everything</text>')  # fmt: skip
    for p in points:
        px = x(max(p.size, 1.0))
        tip = f"{p.name}: factrail {p.factrail:.3f}, erase rule {p.erase:.3f}"
        parts.append(
            f"<g><title>{escape(tip)}</title>"
            f'<circle class="s-erase" cx="{px:.1f}" cy="{y(p.erase):.1f}" r="4.5"/>'
            f'<circle class="s-factrail" cx="{px:.1f}" cy="{y(p.factrail):.1f}" r="3.5"/></g>'
        )
    scale = " (log scale)" if log else ""
    return _svg(
        "billed over sending everything, per session",
        parts,
        f"the session's largest request, tokens{scale}",
        "billed ÷ everything",
    )


def _polyline(css: str, xs: Sequence[float], ys: Sequence[float]) -> str:
    coords = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(xs, ys, strict=True))
    return f'<polyline class="{css}" points="{coords}"/>'


def turns_plot(whole: Sequence[int], sent: Sequence[int], trigger: int) -> str:
    """Tokens per request of one session: whole, as factrail sent it, and the trigger."""
    n = max(len(whole), 1)
    top = max([*whole, *sent, trigger, 1])
    x = Axis(1, max(n, 2), LEFT, WIDTH - RIGHT)
    y = Axis(0, top * 1.05, HEIGHT - BOTTOM, TOP)
    parts = _frame(x, y, lambda v: f"{v:.0f}", tokens)
    xs = [x(i + 1) for i in range(len(whole))]
    parts.append(_polyline("s-whole", xs, [y(v) for v in whole]))
    parts.append(_polyline("s-factrail line", xs, [y(v) for v in sent]))
    line = y(trigger)
    parts.append(f'<line class="ref" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{line:.1f}" '
                 f'y2="{line:.1f}"/>')  # fmt: skip
    parts.append(f'<text class="ref-label" x="{LEFT + 6}" y="{line - 5:.1f}">'
                 f'trigger {escape(tokens(trigger))}</text>')  # fmt: skip
    return _svg("tokens per request of the largest session", parts, "request", "tokens sent")
