"""The gate: baseline checks, the erase floor, the rivals' floor, and baseline files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factrail.eval.gate import Baseline, check_gate, load_baseline, write_baseline


def result(rate: float = 0.97, reduction: float = 0.75, **rivals: float) -> dict[str, Any]:
    strategies: dict[str, Any] = {
        name: {"totals": {"rate": r, "tokens_remaining": 0.5}} for name, r in rivals.items()
    }
    strategies["none"] = {"totals": {"rate": 1.0, "tokens_remaining": 1.0}}
    return {
        "totals": {"rate": rate, "reduction": reduction, "rate_erase": 0.69},
        "strategies": strategies,
    }


BASE = Baseline(rate=0.9374, reduction=0.7455)


def test_pass_lines() -> None:
    report = check_gate(result(mask=0.9), BASE)
    assert report.passed
    assert report.lines[0] == "PASS fact rate 0.9700 vs baseline 0.9374 (tolerance 0.005)"
    assert report.lines[1] == "PASS reduction 0.7500 vs baseline 0.7455 (tolerance 0.005)"
    assert report.lines[2] == "PASS rails 0.9700 ≥ erase rule 0.6900 under the same decisions"
    assert report.lines[3].startswith("PASS rails 0.9700 ≥ mask 0.9000")
    assert report.lines[4].startswith("SKIP rails vs none")
    assert report.lines[-1] == "GATE PASS"


def test_tolerance_is_absolute() -> None:
    assert check_gate(result(rate=0.9325), BASE).passed
    report = check_gate(result(rate=0.9323), BASE)
    assert not report.passed
    assert report.lines[0].startswith("FAIL fact rate")
    assert report.lines[-1] == "GATE FAIL"


def test_reduction_and_erase_failures() -> None:
    assert check_gate(result(reduction=0.70), BASE).lines[1].startswith("FAIL reduction")
    low = result(rate=0.95)
    low["totals"]["rate_erase"] = 0.96
    report = check_gate(low, BASE)
    assert report.lines[2].startswith("FAIL rails") and not report.passed


def test_rival_floor_fails_and_can_be_switched_off() -> None:
    beaten = result(rate=0.95, middle_out=0.96)
    report = check_gate(beaten, BASE)
    assert not report.passed
    assert any(line.startswith("FAIL rails 0.9500 ≥ middle_out") for line in report.lines)
    lenient = Baseline(0.9374, 0.7455, strategies_floor=False)
    assert check_gate(beaten, lenient).passed


def test_write_and_load_baseline(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    written = write_baseline(path, result(), tolerance=0.01, note="synthetic 40 seed 0")
    text = path.read_text()
    assert text.endswith("}\n") and '"strategies_floor": true' in text
    assert load_baseline(path) == written == Baseline(0.97, 0.75, 0.01, True, "synthetic 40 seed 0")
    path.write_text('{"rate": 0.5, "reduction": 0.5}')
    assert load_baseline(path) == Baseline(0.5, 0.5)
