"""The rival strategies: erase, clear-oldest, mask, middle-out, none (and the rails' contract)."""

from __future__ import annotations

from factrail.core.model import Action, Message, ToolResult, ToolUse, collect_tool_calls
from factrail.eval.strategies import (
    CLEARED,
    MASKED,
    clear_oldest,
    erase,
    erase_text,
    mask,
    middle_out,
    none,
    rails,
    transcript_tokens,
)


def pair(i: int, size: int) -> list[Message]:
    tid = f"t{i}"
    body = "\n".join(f"line {i} {k} value_{k:06d}" for k in range(size))
    return [
        Message("assistant", f"step {i}", tool_uses=[ToolUse(tid, "Bash", {"command": f"c{i}"})]),
        Message("user", tool_results=[ToolResult(tid, body)]),
    ]


def transcript(calls: int = 12, size: int = 40) -> list[Message]:
    ms = [Message("user", "start")]
    for i in range(calls):
        ms += pair(i, size)
    return [*ms, Message("assistant", "done")]


def results(ms: list[Message]) -> list[str]:
    return [r.text for m in ms for r in m.tool_results]


def test_erase_text_threshold_and_note() -> None:
    assert erase_text("x" * 420) == "x" * 420
    out = erase_text("y" * 421)
    assert out == "y" * 300 + (
        "\n[fast-jev-compaction truncated 121 chars of this tool result; re-run the tool if needed]"
    )


def test_erase_drop_call_removes_pair_and_empty_messages() -> None:
    ms = transcript(3)
    actions: dict[str, Action] = {"t0": "drop_call", "t1": "drop_result", "t2": "keep"}
    out = erase(ms, actions)
    ids = [u.tool_use_id for m in out for u in m.tool_uses]
    assert ids == ["t1", "t2"]
    assert len(out) == len(ms) - 1  # t0's result message was left empty; its call keeps text
    assert "fast-jev-compaction truncated" in results(out)[0]
    assert results(out)[1] == results(ms)[2]
    assert results(ms)[0].startswith("line 0")  # input untouched


def test_clear_oldest_keeps_newest_three_and_pins() -> None:
    ms = transcript(12)
    out = clear_oldest(ms, {})
    texts = results(out)
    assert texts[-3:] == results(ms)[-3:]
    assert texts[:9] == [CLEARED] * 9
    assert len(out) == len(ms)


def test_clear_oldest_never_touches_pinned_results() -> None:
    ms = transcript(4)  # 10 messages: everything from index 4 is pinned
    out = clear_oldest(ms, {})
    assert results(out)[0] == CLEARED
    assert results(out)[1:] == results(ms)[1:]


def test_mask_window_of_ten() -> None:
    ms = transcript(15)
    texts = results(mask(ms, {}))
    assert texts[:5] == [MASKED] * 5
    assert texts[5:] == results(ms)[5:]


def test_none_copies() -> None:
    ms = transcript(2)
    out = none(ms, {})
    assert out == ms and out[1] is not ms[1]


def test_middle_out_drops_middle_pairs_under_budget() -> None:
    ms = transcript(12)
    budget = transcript_tokens(ms) // 2
    out = middle_out(budget)(ms, {})
    assert transcript_tokens(out) <= budget
    assert out[0] == ms[0] and out[-6:] == ms[-6:]
    uses = {u.tool_use_id for m in out for u in m.tool_uses}
    res = {r.tool_use_id for m in out for r in m.tool_results}
    assert uses == res  # pairs stay whole
    assert "t0" in uses and "t6" not in uses  # the middle goes first


def test_middle_out_stops_when_only_pins_remain() -> None:
    ms = transcript(3)
    out = middle_out(0)(ms, {})
    assert out[0] == ms[0] and out[-6:] == ms[-6:]


def test_rails_reduce_dropped_results_and_keep_count() -> None:
    ms = transcript(12, size=120)
    actions: dict[str, Action] = {
        c.tool_use_id: "keep" if c.pinned else "drop_result" for c in collect_tool_calls(ms, 6)
    }
    applied = rails(ms, actions)
    assert len(applied.messages) == len(ms)
    assert transcript_tokens(applied.messages) < transcript_tokens(ms)
    assert results(applied.messages)[-1] == results(ms)[-1]
