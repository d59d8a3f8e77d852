"""`write_report`: report.md with its tables and PNG plots."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from factrail.eval.report import (
    FACTS_BY_KIND,
    FACTS_VS_TOKENS,
    REPORT,
    SIM_CURVES,
    kinds_by_strategy,
    render_markdown,
    sim_curves,
    write_report,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _strategy(rate: float, remaining: float, kinds: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [
        {
            "transcript": f"s{i}",
            "cut": 10 + i,
            "facts": sum(k["facts"] for k in row.values()),
            "kept": sum(k["kept"] for k in row.values()),
            "chars_before": 1000,
            "chars_after": int(1000 * remaining),
            "kinds": row,
        }
        for i, row in enumerate(kinds)
    ]
    facts = sum(r["facts"] for r in rows)
    return {
        "totals": {
            "facts": facts,
            "kept": round(facts * rate),
            "rate": rate,
            "reduction": 1 - remaining,
            "tokens_remaining": remaining,
            "worst_cut": rate / 2,
            "rate_unechoed": rate * 0.9,
        },
        "rows": rows,
    }


def fake_result(with_sim: bool = True) -> dict[str, Any]:
    rails_kinds = [
        {"Read": {"facts": 4, "kept": 4}, "pytest": {"facts": 6, "kept": 5}},
        {"grep": {"facts": 2, "kept": 1}},
    ]
    erase_kinds = [
        {"Read": {"facts": 4, "kept": 1}, "pytest": {"facts": 6, "kept": 2}},
        {"grep": {"facts": 2, "kept": 0}},
    ]
    sim = {
        w: {
            "compactions": 3,
            "needed": 40,
            "kept": 37,
            "rate": r,
            "peak_fill": f,
            "cache_share": 0.8,
            "billed_ratio": 0.4,
        }
        for w, r, f in (("0.8", 0.95, 0.6), ("1.0", 0.93, 0.65), ("1.5", 0.91, 0.72))
    }
    return {
        "totals": {"transcripts": 2, "cuts": 2, "facts": 12, "kept": 10, "rate": 0.8333},
        "strategies": {
            "rails": _strategy(0.8333, 0.42, rails_kinds),
            "erase": _strategy(0.25, 0.1, erase_kinds),
            "none": _strategy(1.0, 1.0, rails_kinds),
        },
        "sim": sim if with_sim else None,
    }


def test_writes_report_and_pngs(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    paths = write_report(fake_result(), out, command="factrail eval --synthetic 2 --report rep")
    assert [p.name for p in paths] == [REPORT, FACTS_VS_TOKENS, FACTS_BY_KIND, SIM_CURVES]
    for png in paths[1:]:
        assert png.read_bytes().startswith(PNG_SIGNATURE)
    md = (out / REPORT).read_text(encoding="utf-8")
    for name in (FACTS_VS_TOKENS, FACTS_BY_KIND, SIM_CURVES):
        assert f"]({name})" in md
    assert "factrail eval --synthetic 2 --report rep" in md
    assert "| rails | 12 | 10 | 83.3% | 75.0% | 42.0% | 41.7% |" in md
    assert "| erase | 12 | 3 | 25.0% | 22.5% | 10.0% | 12.5% |" in md
    assert "| rails | 1.5 | 3 | 40 | 37 | 91.0% | 72.0% | 80.0% | 40.0% |" in md
    assert "| pytest | 6 | 83.3% | 33.3% | 83.3% |" in md


def test_report_is_deterministic(tmp_path: Path) -> None:
    a = write_report(fake_result(), tmp_path / "a")
    b = write_report(fake_result(), tmp_path / "b")
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]


def test_without_sim_there_is_no_sim_table_or_curve(tmp_path: Path) -> None:
    paths = write_report(fake_result(with_sim=False), tmp_path)
    assert SIM_CURVES not in [p.name for p in paths]
    md = (tmp_path / REPORT).read_text(encoding="utf-8")
    assert "Simulation" not in md
    assert "Produced by" not in md


def test_plots_skipped_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    paths = write_report(fake_result(), tmp_path)
    assert paths == [tmp_path / REPORT]
    md = paths[0].read_text(encoding="utf-8")
    assert "Plots skipped" in md
    assert ".png" not in md
    assert "| rails |" in md


def test_worst_cuts_list_the_lowest_rails_rows(tmp_path: Path) -> None:
    write_report(fake_result(), tmp_path)
    md = (tmp_path / REPORT).read_text(encoding="utf-8")
    section = md.split("## Rails: the cuts that lost most", 1)[1]
    assert section.index("| s1 |") < section.index("| s0 |")
    assert "| s1 | 11 | 2 | 1 | 50.0% | 42.0% |" in section


def test_kinds_are_summed_per_strategy() -> None:
    strategies = fake_result()["strategies"]
    kinds = kinds_by_strategy(strategies)
    assert kinds["rails"] == {"Read": (4, 4), "pytest": (6, 5), "grep": (2, 1)}
    assert kinds["erase"]["pytest"] == (6, 2)


def test_sim_curves_accept_every_shape() -> None:
    rails = {"compactions": 1, "rate": 0.9, "peak_fill": 0.7}
    erase = {"compactions": 1, "rate": 0.5, "peak_fill": 0.7}
    by_window = sim_curves({"1.5": rails, "0.8": rails})
    assert list(by_window) == ["rails"]
    assert list(by_window["rails"]) == [0.8, 1.5]
    by_strategy = sim_curves({"rails": {"1.0": rails}, "erase": {"1.0": erase}})
    assert by_strategy["erase"][1.0]["rate"] == 0.5
    nested = sim_curves({"1.0": {**rails, "strategies": {"erase": erase}}})
    assert set(nested) == {"rails", "erase"}
    assert sim_curves(None) == {}


def replay_shaped_result() -> dict[str, Any]:
    """The shape `Replay.as_json(with_rows=True)` gives: top-level rows, rails losses by kind."""
    rows = [
        {
            "transcript": "t1",
            "cut": 8,
            "facts": 4,
            "kept": 1,
            "chars_before": 2000,
            "chars_after": 500,
            "lost": [["Bash:pytest", "abc123x"], ["Bash:pytest", "def456y"], ["Read", "x/y_z.py"]],
        },
        {"transcript": "t2", "cut": 5, "facts": 0, "kept": 0, "chars_before": 10, "lost": []},
    ]
    totals = {"facts": 4, "kept": 1, "rate": 0.25, "tokens_remaining": 0.25, "worst_cut": 0.25}
    return {
        "totals": {**totals, "transcripts": 2, "cuts": 2, "visibility": "strict"},
        "strategies": {"rails": {"totals": totals}, "none": {"totals": {**totals, "rate": 1.0}}},
        "rows": rows,
    }


def test_losses_per_kind_from_replay_rows(tmp_path: Path) -> None:
    result = replay_shaped_result()
    paths = write_report(result, tmp_path)
    assert [p.name for p in paths] == [REPORT, FACTS_VS_TOKENS, FACTS_BY_KIND]
    md = (tmp_path / REPORT).read_text(encoding="utf-8")
    assert "| Bash:pytest | 2 | 66.7% |" in md
    assert "| Read | 1 | 33.3% |" in md
    assert "| t1 | 8 | 4 | 1 | 25.0% | 25.0% |" in md
    assert "| t2 |" not in md  # no facts at stake: not a losing cut
    assert "(strict visibility)" in md
    result["totals"]["lost_by_kind"] = {"Grep": 5}
    assert "| Grep | 5 | 100.0% |" in render_markdown(result)


def test_report_of_a_real_replay(tmp_path: Path) -> None:
    from factrail.eval.replay import replay
    from factrail.eval.synthetic import corpus

    result = replay(corpus(0, 1)).as_json(with_rows=True)
    paths = write_report(result, tmp_path)
    assert paths[1].read_bytes().startswith(PNG_SIGNATURE)
    md = paths[0].read_text(encoding="utf-8")
    for name in result["strategies"]:
        assert f"| {name} | " in md
