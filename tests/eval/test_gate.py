"""The gate: baseline checks, the erase floor, the rivals' floor, and baseline files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factrail.eval.gate import (
    Baseline,
    SimFigures,
    SimPrices,
    check_gate,
    load_baseline,
    write_baseline,
)


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


def simulated(
    billed: float = 0.78, rate: float = 1.0, share: float = 0.93, above: int = 0, erase: float = 0.9
) -> dict[str, Any]:
    """An eval result with the rails (and the erase rule) simulated at one window length."""
    out = result()
    out["sim_strategies"] = {
        "rails": {
            "0.8": {"rate": rate, "billed_ratio": billed, "cache_share": share, "above": above}
        },
        "erase": {"0.8": {"rate": 0.7, "billed_ratio": erase, "cache_share": 0.8, "above": 4}},
    }
    out["sim_prices"] = {"profile": "anthropic", "cache_ttl_s": None, "model": ""}
    return out


BILLED = Baseline(0.9374, 0.7455, sim=(("0.8", SimFigures(1.0, 0.78, 0.93, 0)),))


def test_the_bill_passes_at_its_baseline() -> None:
    report = check_gate(simulated(), BILLED)
    assert report.passed
    sim_lines = [line for line in report.lines if "0.8 windows" in line]
    assert sim_lines == [
        "PASS facts kept at use 1.0000 vs baseline 1.0000 at 0.8 windows",
        "PASS billed 0.7800 of everything vs baseline 0.7800 at 0.8 windows",
        "PASS cache share 0.9300 vs baseline 0.9300 at 0.8 windows",
        "PASS 0 session(s) billed above everything vs baseline 0 at 0.8 windows",
        "PASS rails bill 0.7800 ≤ erase rule 0.9000 at 0.8 windows",
    ]


def test_each_regression_of_the_bill_fails() -> None:
    assert check_gate(simulated(billed=0.785), BILLED).passed  # within the tolerance
    cases = {
        "billed": simulated(billed=0.786),
        "facts kept at use": simulated(rate=0.99),
        "cache share": simulated(share=0.92),
        "session(s) billed above": simulated(above=1),
        "rails bill": simulated(billed=0.784, erase=0.783),
    }
    for what, run in cases.items():
        report = check_gate(run, BILLED)
        assert not report.passed, what
        failed = [line for line in report.lines if line.startswith("FAIL")]
        assert len(failed) == 1 and what in failed[0], (what, failed)


def test_a_gated_bill_needs_the_simulation_under_the_same_prices() -> None:
    report = check_gate(result(), BILLED)
    assert not report.passed
    assert "FAIL the baseline gates the simulated bill: run the rails with --sim" in report.lines
    other = simulated()
    other["sim_prices"]["profile"] = "openai"
    report = check_gate(other, BILLED)
    assert not report.passed and any("simulated under" in line for line in report.lines)
    moved = simulated()
    moved["sim_strategies"]["rails"] = {"1": moved["sim_strategies"]["rails"]["0.8"]}
    assert "FAIL no simulation of the rails at 0.8 windows" in check_gate(moved, BILLED).lines
    # without a `sim` baseline the bill is not gated, simulated or not
    assert check_gate(simulated(billed=2.0), BASE).passed


def test_write_and_load_a_baseline_with_the_bill(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    written = write_baseline(path, simulated(), note="with the bill")
    assert written.sim == (("0.8", SimFigures(1.0, 0.78, 0.93, 0)),)
    assert written.sim_prices == SimPrices()
    assert load_baseline(path) == written
    assert check_gate(simulated(), load_baseline(path)).passed


def test_the_committed_baselines_gate_the_bill() -> None:
    root = Path(__file__).resolve().parents[2] / "eval"
    for name in ("baseline.json", "baseline-v2.json", "baseline-dev.json"):
        baseline = load_baseline(root / name)
        assert [w for w, _ in baseline.sim] == ["0.8", "1", "1.2", "1.5"], name
        assert baseline.sim_prices == SimPrices("anthropic", None, ""), name
