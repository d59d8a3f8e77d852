"""Replay at cuts: rounding, rows, totals, deciders; and corpus loading (`corpora`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from factrail.core.model import Action, Message, ToolResult, ToolUse
from factrail.eval.corpora import claude_projects, load_corpus_dir, sample_key, session_name
from factrail.eval.replay import cut_index, replay, rules_decider, tool_kind
from factrail.eval.strategies import NAMES
from factrail.eval.synthetic import corpus
from factrail.policy.taint import TaintFence

# --- cuts ---------------------------------------------------------------------------------------


def test_cut_rounds_half_away_from_zero() -> None:
    assert cut_index(5, 0.5) == 3  # 2.5 → 3 (banker's round would give 2)
    assert cut_index(7, 0.5) == 4  # 3.5 → 4
    assert cut_index(10, 0.75) == 8  # 7.5 → 8
    assert cut_index(9, 0.5) == 5  # 4.5 → 5


def test_cut_skips_too_short_or_too_long() -> None:
    assert cut_index(3, 0.5) == 2
    assert cut_index(2, 0.5) is None  # 1 < 2
    assert cut_index(4, 1.0) is None  # 4 ≥ len


# --- replay -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small() -> list[tuple[str, list[Message]]]:
    return corpus(0, 2)


def test_rules_decider_reduces_unpinned_only(small: list[tuple[str, list[Message]]]) -> None:
    messages = small[0][1][:40]
    actions = rules_decider(messages)
    assert actions["toolu_0000_000"] == "drop_result"
    last = [r.tool_use_id for m in messages for r in m.tool_results][-1]
    assert actions[last] == "keep"


def test_replay_rows_and_totals(small: list[tuple[str, list[Message]]]) -> None:
    result = replay(small)
    assert len(result.rows) == 4
    row = result.rows[0]
    assert row.transcript == "synthetic-0" and row.cut == cut_index(len(small[0][1]), 0.5)
    assert set(row.strategies) == set(NAMES)
    assert row.strategies["none"].kept == row.facts
    assert row.strategies["none"].chars_after == row.chars_before
    assert row.chars_after < row.chars_before and row.tokens_after < row.tokens_before
    totals = result.totals
    for key in ("transcripts", "cuts", "facts", "kept", "rate", "kept_erase", "rate_erase",
                "reduction", "reduction_erase", "tokens_remaining", "echoed", "reduction_min",
                "reduction_tokens", "worst_cut"):  # fmt: skip
        assert key in totals
    assert totals["transcripts"] == 2 and totals["cuts"] == 4
    assert totals["facts"] == sum(r.facts for r in result.rows)
    assert totals["tokens_remaining"] == pytest.approx(1 - totals["reduction"])
    out = result.as_json()
    assert set(out) == {"totals", "strategies"}
    assert out["strategies"]["none"]["totals"]["reduction"] == 0.0
    assert out["strategies"]["rails"]["totals"]["rate"] == totals["rate"]
    json.dumps(result.as_json(with_rows=True))


def test_erase_and_rails_share_decisions(small: list[tuple[str, list[Message]]]) -> None:
    seen: list[int] = []

    def keep_all(prefix: Sequence[Message]) -> dict[str, Action]:
        seen.append(len(prefix))
        return {}

    result = replay(small[:1], decider=keep_all, strategies=("rails", "erase"))
    assert seen == [r.cut for r in result.rows]
    for row in result.rows:
        assert row.kept == row.kept_erase == row.facts
        assert row.chars_after_erase == row.chars_before
    assert set(result.strategies) == {"rails", "erase"}


def test_oracle_decider_runs(small: list[tuple[str, list[Message]]]) -> None:
    result = replay(small[:1], decider="oracle", strategies=("rails", "erase"))
    assert result.totals["rate"] >= result.totals["rate_erase"]


def test_unknown_strategy_rejected() -> None:
    with pytest.raises(ValueError):
        replay([], strategies=("bogus",))


def test_tool_kind() -> None:
    assert tool_kind("Bash", {"command": "./scripts/deploy.sh api"}) == "Bash:deploy.sh"
    assert tool_kind("Grep", {"pattern": "x"}) == "Grep"


def test_lost_facts_are_itemised() -> None:
    ms = [
        Message("user", "go"),
        Message("assistant", tool_uses=[ToolUse("a", "Grep", {"pattern": "x"})]),
        Message("user", tool_results=[ToolResult("a", "hit\n" * 400 + "src/zeta_mod.rs")]),
        *[Message("user", f"pad {i}") for i in range(8)],
        Message("assistant", "open src/zeta_mod.rs"),
    ]
    result = replay([("t", ms)], cuts=(0.8,), decider=lambda p: {"a": "drop_call"})
    (row,) = result.rows
    assert row.facts == 1 and row.kept_erase == 0
    assert len(row.lost) == row.facts - row.kept == row.lost_rereadable  # Grep is rereadable
    assert all(item == ("Grep", "src/zeta_mod.rs") for item in row.lost)


# --- corpora ------------------------------------------------------------------------------------


def fake_parse(text: str, filename: str) -> Sequence[Message]:
    """A stand-in parser: each JSON line (or each list item) is one call `{"tool", "input"}`."""
    items = (
        [json.loads(x) for x in text.splitlines()]
        if filename.endswith(".jsonl")
        else json.loads(text)
    )
    if isinstance(items, dict):
        items = items["messages"]
    return [
        Message("assistant", filename, tool_uses=[ToolUse(f"u{i}", it["tool"], it["input"])])
        for i, it in enumerate(items)
    ]


def write_session(path: Path, tools: list[tuple[str, dict[str, Any]]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps({"tool": t, "input": i}) for t, i in tools))


def test_corpus_dir_reads_json_and_jsonl_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text(json.dumps([{"tool": "Read", "input": {}}]))
    (tmp_path / "a.json").write_text(json.dumps({"messages": [{"tool": "LS", "input": {}}]}))
    write_session(tmp_path / "c.jsonl", [("Bash", {"command": "ls"})])
    (tmp_path / "notes.txt").write_text("ignored")
    loaded = load_corpus_dir(tmp_path, parse=fake_parse)
    assert [name for name, _ in loaded] == ["a", "b", "c"]
    assert loaded[2][1][0].text == "c.jsonl"


def test_corpus_dir_malformed_json_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(ValueError):
        load_corpus_dir(tmp_path, parse=fake_parse)


FENCE = TaintFence(tools=("mcp__mail__",), skills=("email-search",))


def test_claude_projects_sampling(tmp_path: Path) -> None:
    calls = [("Read", {"file_path": "/x"})] * 3
    write_session(tmp_path / "p1" / "good.jsonl", calls)
    write_session(tmp_path / "p2" / "also.jsonl", calls)
    write_session(tmp_path / "p1" / "subagents" / "sub.jsonl", calls)
    write_session(tmp_path / "p1" / "short.jsonl", calls[:2])
    write_session(tmp_path / "p2" / "mail.jsonl", [*calls, ("mcp__mail__send", {})])
    write_session(tmp_path / "p2" / "skill.jsonl", [*calls, ("Skill", {"skill": "x:email-search"})])
    (tmp_path / "p2" / "broken.jsonl").write_text("{not json")
    out = claude_projects(tmp_path, FENCE, min_calls=3, parse=fake_parse)
    good = sorted(
        [tmp_path / "p1" / "good.jsonl", tmp_path / "p2" / "also.jsonl"],
        key=lambda p: sample_key(0, p),
    )
    assert [name for name, _ in out] == [session_name(p) for p in good]
    assert session_name(good[0]) == "cc-" + hashlib.sha256(str(good[0]).encode()).hexdigest()[:12]
    one = claude_projects(tmp_path, FENCE, min_calls=3, max_sessions=1, parse=fake_parse)
    assert len(one) == 1


def test_sample_key_is_seeded() -> None:
    p = Path("/a/b.jsonl")
    assert sample_key(1, p) == hashlib.sha256((1).to_bytes(8, "little") + b"/a/b.jsonl").digest()
    assert sample_key(1, p) != sample_key(2, p)


DEV = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "dev"


@pytest.mark.corpus
@pytest.mark.skipif(not DEV.is_dir(), reason="no dev corpus")
def test_dev_corpus_loads_with_the_shared_parser(tmp_path: Path) -> None:
    first = sorted(DEV.glob("*.json"))[0]
    (tmp_path / first.name).write_text(first.read_text(encoding="utf-8"), encoding="utf-8")
    ((name, messages),) = load_corpus_dir(tmp_path)
    assert name == first.stem
    assert any(m.tool_results for m in messages)
