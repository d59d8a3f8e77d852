"""The eval gate: fact rate and reduction against a baseline, and the rails against every rival.

`eval/baseline.json` holds `{"rate", "reduction", "tolerance", "strategies_floor", "note"}`. The
gate fails when the rails' fact rate or pooled reduction falls below baseline − tolerance, when
the rails keep fewer facts than the erase rule under the same decisions, or (with
`strategies_floor`) fewer than any other rival. `none` is exempt: it keeps every fact by
definition and reduces nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_TOLERANCE = 0.005


@dataclass(frozen=True, slots=True)
class Baseline:
    """What the gate compares against."""

    rate: float
    reduction: float
    tolerance: float = DEFAULT_TOLERANCE
    strategies_floor: bool = True
    note: str = ""


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
    )


def write_baseline(
    path: Path, result: Mapping[str, Any], tolerance: float = DEFAULT_TOLERANCE, note: str = ""
) -> Baseline:
    """Write the baseline a result would set (pretty JSON plus a newline)."""
    totals = result["totals"]
    baseline = Baseline(float(totals["rate"]), float(totals["reduction"]), tolerance, True, note)
    body = {
        "rate": baseline.rate,
        "reduction": baseline.reduction,
        "tolerance": baseline.tolerance,
        "strategies_floor": baseline.strategies_floor,
        "note": baseline.note,
    }
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
    lines.append("GATE PASS" if passed else "GATE FAIL")
    return GateReport(lines, passed)
