"""Small line charts as inline SVG, drawn on the server (no chart library, no script).

Presentation is by class only (the stylesheet colours `series-*`, `rule-*` and `mark`), so the
Content-Security-Policy needs no inline style."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

WIDTH, HEIGHT = 720, 240
LEFT, RIGHT, TOP, BOTTOM = 56, 88, 12, 26
"""Margins; the rules' labels sit in the right one, clear of the lines."""
RULE_LABEL_GAP = 13
"""The least vertical distance between two rules' labels, so close rules keep readable labels."""


@dataclass(frozen=True, slots=True)
class Series:
    """One line: its class (`series-<name>`) and its points `(x, y)`, x ascending."""

    name: str
    points: Sequence[tuple[float, float]]


@dataclass(frozen=True, slots=True)
class Rule:
    """A labelled horizontal line (`rule-<name>`) at `y`."""

    name: str
    y: float


def line_chart(
    series: Sequence[Series],
    rules: Sequence[Rule] = (),
    marks: Sequence[float] = (),
    *,
    label: str,
) -> Markup:
    """An SVG of `series` over shared axes, with `rules` across it and a dashed vertical `mark`
    at each x of `marks`; empty markup when no series has a point."""
    xs = [x for s in series for x, _ in s.points]
    if not xs:
        return Markup("")
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x1 = x0 + 1
    top = max([y for s in series for _, y in s.points] + [r.y for r in rules] + [1.0])
    ticks = _ticks(top * 1.05)
    y_max = ticks[-1]

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * (WIDTH - LEFT - RIGHT)

    def sy(y: float) -> float:
        return HEIGHT - BOTTOM - y / y_max * (HEIGHT - TOP - BOTTOM)

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img"'
        f' aria-label="{escape(label)}">'
    ]
    for t in ticks:
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{sy(t):.1f}"'
            f' y2="{sy(t):.1f}"/><text class="axis" x="{LEFT - 6}" y="{sy(t) + 4:.1f}"'
            f' text-anchor="end">{_short(t)}</text>'
        )
    for x in _x_ticks(x0, x1):
        parts.append(
            f'<text class="axis" x="{sx(x):.1f}" y="{HEIGHT - 8}" text-anchor="middle">{x:g}</text>'
        )
    for m in marks:
        parts.append(
            f'<line class="mark" x1="{sx(m):.1f}" x2="{sx(m):.1f}" y1="{TOP}"'
            f' y2="{HEIGHT - BOTTOM}"/>'
        )
    for r in rules:
        y = sy(r.y)
        parts.append(
            f'<line class="rule rule-{escape(r.name)}" x1="{LEFT}" x2="{WIDTH - RIGHT}"'
            f' y1="{y:.1f}" y2="{y:.1f}"/>'
        )
    for r, y in label_places([(r, sy(r.y)) for r in rules]):
        parts.append(
            f'<text class="rule-label rule-{escape(r.name)}" x="{WIDTH - RIGHT + 6}"'
            f' y="{y + 4:.1f}">{escape(r.name)} {_short(r.y)}</text>'
        )
    for s in series:
        if not s.points:
            continue
        points = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s.points)
        parts.append(f'<polyline class="series series-{escape(s.name)}" points="{points}"/>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _ticks(top: float) -> list[float]:
    """Round values from 0 to at least `top`, four or five steps."""
    raw = top / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    count = math.ceil(top / step)
    return [i * step for i in range(count + 1)]


def _x_ticks(x0: float, x1: float) -> list[float]:
    """A few whole x values across `x0`..`x1`."""
    span = x1 - x0
    step = max(1, math.ceil(span / 6))
    first = math.ceil(x0)
    return [float(x) for x in range(first, math.floor(x1) + 1, step)]


def _short(value: float) -> str:
    """`120k`, `1.2M`, `900`."""
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.3g}"


def label_places(rules: Sequence[tuple[Rule, float]]) -> list[tuple[Rule, float]]:
    """Each rule with the height of its label: its own, pushed down (then, past the bottom,
    up) so no two labels are closer than `RULE_LABEL_GAP`."""
    placed: list[tuple[Rule, float]] = []
    for rule, y in sorted(rules, key=lambda item: item[1]):
        low = placed[-1][1] + RULE_LABEL_GAP if placed else TOP
        placed.append((rule, max(y, low)))
    overflow = (placed[-1][1] - (HEIGHT - BOTTOM)) if placed else 0.0
    if overflow > 0:
        placed = [(rule, y - overflow) for rule, y in placed]
    return placed
