"""Token value, message contexts, lazy cover and pooling (engine spec §2.7–§2.8)."""

from __future__ import annotations

from factrail.core.model import Message, ToolResult, ToolUse
from factrail.core.value import (
    INTERCEPT,
    Candidate,
    ValueContext,
    lazy_cover,
    message_contexts,
    pool,
    token_values,
    value_parts,
)

TEXT = "build ok\nartifact build/app_v2.bin size 4096\nrequest id req-0042af done\n" * 3
CTX = ValueContext(input="", user="", dist=3, reused=frozenset())


def test_model_constants() -> None:
    assert INTERCEPT == -2.884622
    values = token_values(TEXT, CTX)
    assert set(values) == {"build/app_v2.bin", "req-0042af"}
    assert all(0 < v < 1 for v in values.values())


def test_naming_a_token_in_the_input_or_prompt_or_reusing_it_raises_its_value() -> None:
    base = token_values(TEXT, CTX)["req-0042af"]
    for ctx in (
        ValueContext(input='{"id":"req-0042af"}', user="", dist=3, reused=frozenset()),
        ValueContext(input="", user="what happened to req-0042af?", dist=3, reused=frozenset()),
        ValueContext(input="", user="", dist=3, reused=frozenset({"req-0042af"})),
    ):
        assert token_values(TEXT, ctx)["req-0042af"] > base


def test_message_contexts_reuse_input_user_and_distance() -> None:
    messages = [
        Message("user", "fix the build"),
        Message("assistant", "", [ToolUse("a", "Bash", {"command": "make"})]),
        Message("user", "", tool_results=[ToolResult("a", "built out/app_v9.bin")]),
        Message(
            "assistant", "I will check out/app_v9.bin", [ToolUse("b", "Bash", {"command": "ls"})]
        ),
        Message("user", "", tool_results=[ToolResult("b", "listing")]),
        Message("user", "now ship it"),
    ]
    ctx = message_contexts(messages)
    assert ctx["a"].input == '{"command":"make"}' and ctx["b"].input == '{"command":"ls"}'
    assert ctx["a"].dist == 2 and ctx["b"].dist == 1
    assert ctx["a"].user == ctx["b"].user == "now ship it"
    assert ctx["a"].reused == frozenset({"out/app_v9.bin"})


def test_lazy_cover_prefers_value_per_char_and_counts_a_token_once() -> None:
    values = {"t1": 1.0, "t2": 1.0, "t3": 0.1}
    cands = [
        Candidate(frozenset({"t1", "t2"}), 11, values),
        Candidate(frozenset({"t1"}), 4, values),
        Candidate(frozenset({"t3"}), 1, values),
        Candidate(frozenset({"t2"}), 4, values),
    ]
    assert lazy_cover(cands, set(), 100) == [1, 3, 2]
    assert lazy_cover(cands, {"t1"}, 5) == [3]
    assert lazy_cover(cands, set(), 0) == []


def _observation(tag: str) -> str:
    lines = [f"row {i} took {i} ms {tag}-{i:05d}x" for i in range(300)]
    return "\n".join(lines)


def test_pooled_spend_never_exceeds_per_stub_greedy_spend() -> None:
    parts = []
    for tag in ("alpha", "beta", "gamma"):
        middle = _observation(tag)
        values = token_values(middle, CTX)
        parts.append(value_parts(middle, 600, values))
    greedy_spend = sum(p.spend() for p in parts)
    assert greedy_spend > 0
    picks = pool(parts, side=[])
    pooled_spend = sum(len(p.units[k]) + 1 for p, ks in zip(parts, picks, strict=True) for k in ks)
    assert 0 < pooled_spend <= greedy_spend
    # A token already visible elsewhere (side) is not worth keeping again.
    shown = "\n".join(parts[0].units)
    picks = pool(parts, side=[shown])
    assert picks[0] == []


def test_value_parts_keeps_error_lines_and_stays_under_the_regex_cap() -> None:
    middle = _observation("x") + "\nTraceback: boom\n"
    parts = value_parts(middle, 400, token_values(middle, CTX))
    kept = parts.lines()
    assert "Traceback: boom" in kept
    assert sum(len(u) + 1 for u in kept) <= 400
