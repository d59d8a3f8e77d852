"""The eval gate: fact rate and reduction against a baseline, the rails against every rival, and
the simulated bill.

`eval/baseline.json` holds `{"rate", "reduction", "tolerance", "strategies_floor", "note"}` and,
optionally, `"sim"`: per window length, the rails' figures of `eval --sim` (`rate`, facts kept at
use; `billed_ratio`, billed over sending everything; `cache_share`; `above`, sessions billed above
everything). The gate fails when the rails' fact rate or pooled reduction falls below baseline −
tolerance, when the rails keep fewer facts than the erase rule under the same decisions, or (with
`strategies_floor`) fewer than any other rival; `none` is exempt: it keeps every fact by
definition and reduces nothing. With a `sim` baseline it also fails when the result has no
simulation, when at any of its windows the rails keep fewer facts at use or a smaller cache share
than baseline − tolerance, bill more than baseline + tolerance, leave more sessions above
everything, or bill more than the erase rule (when the erase rule was simulated too): the bill is
half of what factrail promises, so a change that raises it must say so in a new baseline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DEFAULT_TOLERANCE = 0.005


@dataclass(frozen=True, slots=True)
class SimFigures:
    """The rails' figures of `eval --sim` at one window length."""

    rate: float
    """Facts kept at use."""
    billed_ratio: float
    """Billed input over sending everything, under the simulation's prices."""
    cache_share: float
    """Share of the input that was a byte-identical prefix of the previous request."""
    above: int
    """Sessions billed above sending them everything."""

    @classmethod
    def of(cls, figures: Mapping[str, Any]) -> SimFigures:
        """From one window of `eval --sim`'s totals (or of a baseline file)."""
        return cls(
            rate=float(figures["rate"]),
            billed_ratio=float(figures["billed_ratio"]),
            cache_share=float(figures["cache_share"]),
            above=int(figures["above"]),
        )

    def as_json(self) -> dict[str, Any]:
        """As a baseline file holds them."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class SimPrices:
    """What a simulation billed under: a bill is comparable only under the same prices."""

    profile: str = "anthropic"
    cache_ttl_s: float | None = None
    model: str = ""

    @classmethod
    def of(cls, prices: Mapping[str, Any]) -> SimPrices:
        """From `eval --sim`'s `sim_prices` (or a baseline file's)."""
        ttl = prices.get("cache_ttl_s")
        return cls(
            profile=str(prices.get("profile", "anthropic")),
            cache_ttl_s=None if ttl is None else float(ttl),
            model=str(prices.get("model", "")),
        )

    def as_json(self) -> dict[str, Any]:
        """As `eval --sim` reports them (`sim_prices`)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Baseline:
    """What the gate compares against."""

    rate: float
    reduction: float
    tolerance: float = DEFAULT_TOLERANCE
    strategies_floor: bool = True
    note: str = ""
    sim: tuple[tuple[str, SimFigures], ...] = ()
    """The rails' simulated figures per window length (`"0.8"`, …); empty: the bill is not gated."""
    sim_prices: SimPrices = SimPrices()
    """The prices `sim` was billed under."""


@dataclass(frozen=True, slots=True)
class GateReport:
    """One line per check, then `GATE PASS` or `GATE FAIL`."""

    lines: list[str]
    passed: bool


def load_baseline(path: Path) -> Baseline:
    """Read a baseline file (missing optional keys take their defaults)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return Baseline(
        rate=float(data["rate"]),
        reduction=float(data["reduction"]),
        tolerance=float(data.get("tolerance", DEFAULT_TOLERANCE)),
        strategies_floor=bool(data.get("strategies_floor", True)),
        note=str(data.get("note", "")),
        sim=tuple((str(w), SimFigures.of(f)) for w, f in (data.get("sim") or {}).items()),
        sim_prices=SimPrices.of(data.get("sim_prices") or {}),
    )


def write_baseline(
    path: Path, result: Mapping[str, Any], tolerance: float = DEFAULT_TOLERANCE, note: str = ""
) -> Baseline:
    """Write the baseline a result would set (pretty JSON plus a newline): with the rails'
    simulated figures when the result holds a simulation."""
    totals = result["totals"]
    rails = (result.get("sim_strategies") or {}).get("rails") or {}
    baseline = Baseline(
        float(totals["rate"]),
        float(totals["reduction"]),
        tolerance,
        True,
        note,
        tuple((w, SimFigures.of(f)) for w, f in rails.items()),
        SimPrices.of(result.get("sim_prices") or {}),
    )
    body: dict[str, Any] = {
        "rate": baseline.rate,
        "reduction": baseline.reduction,
        "tolerance": baseline.tolerance,
        "strategies_floor": baseline.strategies_floor,
        "note": baseline.note,
    }
    if baseline.sim:
        body["sim_prices"] = baseline.sim_prices.as_json()
        body["sim"] = {w: f.as_json() for w, f in baseline.sim}
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return baseline


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def check_gate(result: Mapping[str, Any], baseline: Baseline) -> GateReport:
    """Gate an eval result (`{"totals", "strategies"}`, as `Replay.as_json()` gives)."""
    totals = result["totals"]
    rate, reduction = float(totals["rate"]), float(totals["reduction"])
    tol = baseline.tolerance
    checks: list[tuple[bool, str]] = [
        (
            rate >= baseline.rate - tol,
            f"fact rate {rate:.4f} vs baseline {baseline.rate:.4f} (tolerance {tol})",
        ),
        (
            reduction >= baseline.reduction - tol,
            f"reduction {reduction:.4f} vs baseline {baseline.reduction:.4f} (tolerance {tol})",
        ),
    ]
    rate_erase = float(totals["rate_erase"])
    checks.append(
        (
            rate >= rate_erase,
            f"rails {rate:.4f} ≥ erase rule {rate_erase:.4f} under the same decisions",
        )
    )
    lines = [f"{_verdict(ok)} {text}" for ok, text in checks]
    passed = all(ok for ok, _ in checks)
    if baseline.strategies_floor:
        for name, body in result.get("strategies", {}).items():
            if name in ("rails", "erase"):
                continue
            other = float(body["totals"]["rate"])
            if name == "none":
                lines.append(
                    f"SKIP rails vs none ({other:.4f}): none keeps every fact by definition"
                    " and reduces nothing"
                )
                continue
            ok = rate >= other
            passed = passed and ok
            remaining = float(body["totals"]["tokens_remaining"])
            lines.append(
                f"{_verdict(ok)} rails {rate:.4f} ≥ {name} {other:.4f}"
                f" ({remaining:.4f} remaining vs {1 - reduction:.4f})"
            )
    if baseline.sim:
        for ok, text in _sim_checks(result, baseline):
            lines.append(f"{_verdict(ok)} {text}")
            passed = passed and ok
    lines.append("GATE PASS" if passed else "GATE FAIL")
    return GateReport(lines, passed)


def _sim_checks(result: Mapping[str, Any], baseline: Baseline) -> list[tuple[bool, str]]:
    """The simulated bill against the baseline's, window by window."""
    sims = result.get("sim_strategies") or {}
    rails, erase = sims.get("rails") or {}, sims.get("erase") or {}
    if not rails:
        return [(False, "the baseline gates the simulated bill: run the rails with --sim")]
    prices = SimPrices.of(result.get("sim_prices") or {})
    if prices != baseline.sim_prices:
        return [
            (
                False,
                f"the baseline's bill was simulated under {baseline.sim_prices.as_json()},"
                f" this run under {prices.as_json()}",
            )
        ]
    tol = baseline.tolerance
    checks: list[tuple[bool, str]] = []
    for window, base in baseline.sim:
        if window not in rails:
            checks.append((False, f"no simulation of the rails at {window} windows"))
            continue
        got = SimFigures.of(rails[window])
        at = f"at {window} windows"
        checks += [
            (
                got.rate >= base.rate - tol,
                f"facts kept at use {got.rate:.4f} vs baseline {base.rate:.4f} {at}",
            ),
            (
                got.billed_ratio <= base.billed_ratio + tol,
                f"billed {got.billed_ratio:.4f} of everything vs baseline"
                f" {base.billed_ratio:.4f} {at}",
            ),
            (
                got.cache_share >= base.cache_share - tol,
                f"cache share {got.cache_share:.4f} vs baseline {base.cache_share:.4f} {at}",
            ),
            (
                got.above <= base.above,
                f"{got.above} session(s) billed above everything vs baseline {base.above} {at}",
            ),
        ]
        if window in erase:
            other = float(erase[window]["billed_ratio"])
            checks.append(
                (
                    got.billed_ratio <= other,
                    f"rails bill {got.billed_ratio:.4f} ≤ erase rule {other:.4f} {at}",
                )
            )
    return checks
