"""The judge's plan: state fitting, windows, questions, batching and decisions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factrail.core.model import Message, ToolCall, ToolResult, ToolUse
from factrail.core.plan import (
    STATE_CONTEXT,
    CallAnswer,
    CompactOptions,
    PlanError,
    build_plan,
    one_line,
    questions_for,
)
from factrail.core.text import compact_json
from factrail.core.tokens import estimate_tokens
from tests.options import plan_options

RESULT_SENTINEL = "RESULT-SENTINEL-7f3a"
ARG_SENTINEL = "ARGVALUE-SENTINEL-91c"


def transcript(n_calls: int, *, text: str = "looking", result_len: int = 400) -> list[Message]:
    """A prompt, then `n_calls` call/result pairs, then a closing exchange."""
    msgs = [Message("user", "please fix the failing build")]
    for k in range(1, n_calls + 1):
        use = ToolUse(
            f"u{k}",
            "Bash",
            {
                "command": f"cat file{k}.txt {ARG_SENTINEL}",
                "timeout": 30,
                "flags": [ARG_SENTINEL] * 12,
            },
        )
        body = (RESULT_SENTINEL + " line\n") * (result_len // 20 + 1)
        msgs.append(Message("assistant", f"{text} {k} " * 70, tool_uses=[use]))
        msgs.append(Message("user", tool_results=[ToolResult(f"u{k}", body[:result_len])]))
    msgs += [Message("assistant", "done"), Message("user", "thanks"), Message("assistant", "ok")]
    return msgs


def opts(**kw: Any) -> CompactOptions:
    return plan_options(preserve_recent=3, **kw)


def sent(plan_requests: Any) -> str:
    return "".join(compact_json(r.state) + compact_json(r.questions) for r in plan_requests)


def test_two_questions_per_unpinned_call_with_exact_sentences() -> None:
    plan = build_plan(transcript(3), opts(), {}, set())
    assert len(plan.requests) == 1
    req = plan.requests[0]
    assert list(req.questions) == [
        "call_t1", "result_t1", "call_t2", "result_t2", "call_t3", "result_t3",
    ]  # fmt: skip
    assert req.questions["call_t1"] == {
        "type": "noul",
        "instructions": "Tool call t1 (Bash) should stay in the history: knowing this call was "
        "made, with its input, still matters for what the assistant does next",
    }
    assert req.questions["result_t2"]["instructions"] == (
        "The full output of tool call t2 (Bash, 400 chars) should stay in the history verbatim: "
        "the assistant still needs its contents and re-running the tool would not do"
    )
    assert req.calls == [("t1", "u1"), ("t2", "u2"), ("t3", "u3")]
    assert plan.stage == "full"
    assert req.state["context"] == STATE_CONTEXT
    assert req.state["goal"] == "please fix the failing build\nthanks"


def test_state_shows_sizes_never_result_content() -> None:
    plan = build_plan(transcript(2), opts(), {}, set())
    entry = plan.requests[0].state["history"][1]
    assert entry["tool_calls"][0]["result"] == "ok, 400 chars (omitted)"
    assert entry["tool_calls"][0]["input"].startswith('{"command":"cat file1.txt')
    assert RESULT_SENTINEL not in sent(plan.requests)
    # results-only user messages are left out of the history
    assert all(e["text"].strip() or "tool_calls" in e for e in plan.requests[0].state["history"])


def test_error_results_are_noted_as_errors() -> None:
    msgs = transcript(1)
    msgs[2].tool_results[0].is_error = True
    plan = build_plan(msgs, opts(), {}, set())
    assert plan.requests[0].state["history"][1]["tool_calls"][0]["result"].startswith("error, ")


def test_pinned_reduced_and_known_calls_are_not_asked() -> None:
    msgs = transcript(4)
    known = {"u2": CallAnswer(0.9, 0.9)}
    plan = build_plan(msgs, plan_options(preserve_recent=5), known, {"u1"})
    # messages 7,8 (u4's call/result) are within the newest 5 of 10 messages → pinned
    asked = [tid for r in plan.requests for _, tid in r.calls]
    assert asked == ["u3"]
    d = {x.tool_use_id: x for x in plan.decide({"call_t3": 0.9, "result_t3": 0.1}).decisions}
    assert (d["u1"].action, d["u1"].reason) == ("drop_result", "reduced")
    assert (d["u2"].action, d["u2"].reason) == ("keep", "kept")
    assert (d["u3"].action, d["u3"].reason) == ("drop_result", "result_dropped")
    assert (d["u4"].action, d["u4"].reason) == ("keep", "pinned")


def test_nothing_to_ask_makes_no_requests() -> None:
    msgs = transcript(2)
    plan = build_plan(msgs, opts(), {}, {"u1", "u2"})
    assert plan.requests == []
    assert plan.decide({}).actions == {"u1": "drop_result", "u2": "drop_result"}


def test_invalid_remembered_answers_are_asked_again() -> None:
    plan = build_plan(transcript(1), opts(), {"u1": CallAnswer(1.7, 0.2)}, set())
    assert [tid for r in plan.requests for _, tid in r.calls] == ["u1"]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ((0.9, 0.9), ("keep", "kept")),
        ((0.9, 0.1), ("drop_result", "result_dropped")),
        ((0.1, 0.1), ("drop_call", "call_dropped")),
        ((0.5, 0.5), ("keep", "kept")),
    ],
)
def test_threshold_decides(answer: tuple[float, float], expected: tuple[str, str]) -> None:
    plan = build_plan(transcript(1), opts(), {}, set())
    out = plan.decide({"call_t1": answer[0], "result_t1": answer[1]})
    d = out.decisions[0]
    assert (d.action, d.reason) == expected
    assert out.new_answers == {"u1": CallAnswer(*answer)}


def test_rules_path_ignores_remembered_answers_but_records_them() -> None:
    known = {"u1": CallAnswer(0.9, 0.9)}
    plan = build_plan(transcript(2), opts(), known, set())
    out = plan.decide(None)
    assert out.actions == {"u1": "drop_result", "u2": "drop_result"}
    assert out.decisions[0].answer == CallAnswer(0.9, 0.9)
    assert out.rules == 2 and out.new_answers == {}
    # an empty (failed) round still uses what is remembered
    assert plan.decide({}).actions == {"u1": "keep", "u2": "drop_result"}


def test_partial_answers_are_used_and_only_unanswered_calls_fall_to_rules() -> None:
    plan = build_plan(transcript(4), opts(), {}, set())
    answers = {
        "call_t1": 0.1, "result_t1": 0.1,                 # judged: drop_call
        "call_t2": 0.9,                                   # result answer missing
        "call_t3": 0.9, "result_t3": 1.7,                 # out of range
        "call_t4": float("nan"), "result_t4": 0.9,        # not finite
    }  # fmt: skip
    out = plan.decide(answers)
    assert out.actions == {
        "u1": "drop_call", "u2": "drop_result", "u3": "drop_result", "u4": "drop_result",
    }  # fmt: skip
    assert [d.reason for d in out.decisions] == ["call_dropped", "rules", "rules", "rules"]
    assert out.new_answers == {"u1": CallAnswer(0.1, 0.1)}
    assert (out.calls_dropped, out.rules, out.kept) == (1, 3, 0)


def test_booleans_are_not_probabilities() -> None:
    plan = build_plan(transcript(1), opts(), {}, set())
    assert plan.decide({"call_t1": True, "result_t1": True}).decisions[0].reason == "rules"


def test_threshold_must_lie_in_the_unit_interval() -> None:
    assert plan_options(keep_threshold=1.0).keep_threshold == 1.0
    for bad in (1.5, -2.0, float("nan")):
        with pytest.raises(ValueError):
            plan_options(keep_threshold=bad)


def test_small_request_budget_splits_batches_and_no_room_fails() -> None:
    one = build_plan(transcript(6), opts(), {}, set())
    tokens = one.requests[0].state_tokens
    pair = estimate_tokens(compact_json(questions_for(one.calls[0])))
    split = build_plan(
        transcript(6), opts(max_request_tokens=tokens + 20 + 2 * pair + 2), {}, set()
    )
    assert [len(r.calls) for r in split.requests] == [2, 2, 2]
    with pytest.raises(PlanError):
        build_plan(transcript(6), opts(max_request_tokens=tokens + 20 + 3), {}, set())


def test_stages_shrink_in_order() -> None:
    msgs = transcript(12, result_len=3000)
    full = build_plan(msgs, opts(), {}, set())
    assert full.stage == "full"
    seen: list[str] = []
    for limit in range(6000, 40, -20):
        plan = build_plan(msgs, opts(max_state_tokens=limit), {}, set())
        if plan.stage not in seen:
            seen.append(plan.stage)
        assert plan.state_tokens <= limit
    assert [s.split(":")[0] for s in seen[:7]] == [
        "full", "inputs<=200", "inputs<=60", "texts-abridged", "old-messages-collapsed",
        "old-calls-compacted", "windows",
    ]  # fmt: skip


@pytest.mark.parametrize("egress", ["full", "metadata"])
def test_no_result_content_and_metadata_leaks_no_argument_at_any_stage(egress: str) -> None:
    msgs = transcript(12, result_len=3000)
    stages = set()
    for limit in range(6000, 60, -20):
        plan = build_plan(msgs, opts(max_state_tokens=limit, egress=egress), {}, set())
        stages.add(plan.stage.split(" ")[0].split(":")[0])
        text = sent(plan.requests)
        assert RESULT_SENTINEL not in text
        if egress == "metadata":
            assert ARG_SENTINEL not in text and "file1.txt" not in text
    wanted = {"texts-abridged", "old-messages-collapsed", "old-calls-compacted", "windows"}
    assert wanted | {"full"} <= stages


def test_metadata_input_is_only_the_shape() -> None:
    plan = build_plan(transcript(1), opts(egress="metadata"), {}, set())
    call = plan.requests[0].state["history"][1]["tool_calls"][0]
    raw = compact_json(transcript(1)[1].tool_uses[0].input)
    assert call["input"] == compact_json(
        {"kind": "object", "keys": ["command", "flags", "timeout"], "chars": len(raw)}
    )


def call(inp: dict[str, Any], *, error: bool = False) -> ToolCall:
    return ToolCall("t1", "u1", "Read", inp, 1, 2, 10, error, False)


def test_one_line_form_has_no_doubled_key_and_sorted_metadata_keys() -> None:
    c = call({"path": "src/a  b.py", "limit": 5, "opts": {"x": 1}})
    assert one_line(c, "full") == 't1 Read path=src/a b.py limit=5 opts={"x":1} → ok 10ch'
    assert one_line(c, "metadata") == "t1 Read keys=limit,opts,path → ok 10ch"
    assert one_line(call({}, error=True), "full") == "t1 Read → error 10ch"
    long = one_line(call({"command": "x" * 500}), "full")
    assert len(long.split(" → ")[0]) == len("t1 Read ") + 60


def test_collapsing_never_lengthens_a_message() -> None:
    msgs = transcript(12, result_len=3000)
    msgs[3] = Message("assistant", "ok", tool_uses=msgs[3].tool_uses)
    for limit in range(200, 2000, 50):
        plan = build_plan(msgs, opts(max_state_tokens=limit), {}, set())
        for r in plan.requests:
            for e in r.state["history"]:
                if e["i"] == 3:
                    assert e["text"] == "ok"


def test_windows_cover_every_candidate_and_fit() -> None:
    msgs = transcript(20, result_len=3000)
    plan = build_plan(msgs, opts(max_state_tokens=700), {}, set())
    assert plan.stage.startswith("windows:")
    asked = [tid for r in plan.requests for _, tid in r.calls]
    candidates = [c.tool_use_id for c in plan.calls if not c.pinned]
    assert sorted(asked + sorted(plan.floor)) == sorted(candidates)
    assert len(set(asked)) == len(asked)
    assert all(r.state_tokens <= 700 for r in plan.requests)
    for r in plan.requests:
        assert estimate_tokens(compact_json(r.state)) <= r.state_tokens


def test_floor_calls_fall_to_rules_in_judged_mode() -> None:
    msgs = transcript(4, result_len=3000)
    plan = build_plan(msgs, opts(max_state_tokens=80), {}, set())
    assert plan.floor and "floor:" in plan.stage
    out = plan.decide({})
    for d in out.decisions:
        if d.tool_use_id in plan.floor:
            assert (d.action, d.reason) == ("drop_result", "rules")


texts = st.text(alphabet=st.sampled_from("ab \n{}é9"), max_size=900)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(texts, st.integers(0, 5000), st.booleans()), min_size=1, max_size=14),
    st.integers(60, 4000),
    st.sampled_from(["full", "metadata"]),
)
def test_any_transcript_plans_within_limits(
    pairs: list[tuple[str, int, bool]], limit: int, egress: str
) -> None:
    msgs = [Message("user", "start")]
    for k, (text, size, err) in enumerate(pairs):
        use = ToolUse(f"u{k}", "Grep", {"pattern": ARG_SENTINEL + text[:50]})
        msgs.append(Message("assistant", text, tool_uses=[use]))
        body = (RESULT_SENTINEL * (size // len(RESULT_SENTINEL) + 1))[:size]
        msgs.append(Message("user", tool_results=[ToolResult(f"u{k}", body, err)]))
    msgs.append(Message("user", "end"))
    options = plan_options(preserve_recent=2, max_state_tokens=limit, egress=egress)  # type: ignore[arg-type]
    plan = build_plan(msgs, options, {}, set())
    asked = [tid for r in plan.requests for _, tid in r.calls]
    candidates = [c.tool_use_id for c in plan.calls if not c.pinned]
    assert sorted(asked + list(plan.floor)) == sorted(candidates)
    assert all(r.state_tokens <= limit for r in plan.requests)
    text = sent(plan.requests)
    assert RESULT_SENTINEL not in text
    if egress == "metadata":
        assert ARG_SENTINEL not in text
    assert len(plan.decide(None).decisions) == len(plan.calls)


@pytest.mark.corpus
def test_real_sessions_plan_within_limits(corpus_dir: Path) -> None:
    from factrail.core.formats import openai_chat

    for path in sorted(corpus_dir.glob("*.json")):
        msgs = openai_chat.parse(json.loads(path.read_text())["messages"]).messages
        for limit in (25_000, 6_000):
            plan = build_plan(msgs, plan_options(max_state_tokens=limit), {}, set())
            asked = [tid for r in plan.requests for _, tid in r.calls]
            candidates = [c.tool_use_id for c in plan.calls if not c.pinned]
            assert sorted(asked + list(plan.floor)) == sorted(candidates), path.name
            assert all(r.state_tokens <= limit for r in plan.requests), path.name
