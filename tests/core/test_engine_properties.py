"""Properties of apply() over generated transcripts."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factrail.core.apply import Reduction, apply
from factrail.core.model import Action, Message, ToolResult, ToolUse
from factrail.core.render import Selection

LINES = st.sampled_from(
    [
        "ok",
        "PASSED tests/test_api.py::test_login",
        "error: connection refused on port 5432",
        "GET /api/v1/items 200 HTTP/1.1 12ms",
        "commit 9f3c2ab1 updated src/main_loop.rs",
        "wrote /srv/app/build/out.json (4096 bytes)",
        "Traceback (most recent call last):",
        "    at handler (/srv/app/index.js:42:7)",
        "[factrail omitted 1234 chars of this output; full output in the transcript]",
        "coverage 87% of 1,204 lines",
        "   ",
        "def f(x):\\n    return x",
        "ünïcode ✗ FAIL 日本",
    ]
)
TEXT = st.lists(LINES, min_size=0, max_size=400).map("\n".join)
TOOLS = st.sampled_from(["Bash", "Read", "Grep", "WebFetch", "mcp__x__y"])
INPUTS = st.fixed_dictionaries(
    {"command": st.sampled_from(["cat a.py", "pytest -q", "curl x", "x" * 300, "ls -la"])}
)
ACTIONS: st.SearchStrategy[Action] = st.sampled_from(["keep", "drop_result", "drop_call"])


@st.composite
def transcripts(draw: st.DrawFn) -> tuple[list[Message], dict[str, Action]]:
    messages = [Message("user", draw(st.text(max_size=30)))]
    actions: dict[str, Action] = {}
    for i in range(draw(st.integers(0, 8))):
        n = draw(st.integers(1, 2))
        ids = [f"id{i}_{k}" for k in range(n)]
        uses = [ToolUse(t, draw(TOOLS), draw(INPUTS)) for t in ids]
        messages.append(Message("assistant", draw(st.text(max_size=30)), uses))
        results = [ToolResult(t, draw(TEXT), draw(st.booleans())) for t in ids]
        messages.append(Message("user", "", tool_results=results))
        for t in ids:
            actions[t] = draw(ACTIONS)
        if draw(st.booleans()):
            messages.append(Message("user", draw(st.text(max_size=30))))
    return messages, actions


REDUCTIONS = st.builds(Reduction, st.floats(0.0, 0.95), st.sampled_from([0.0, 0.0, 0.5, 0.97]))
SELECTIONS = st.builds(Selection, st.booleans(), st.booleans(), st.booleans())


def _snapshot(messages: list[Message]) -> list[Message]:
    return [m.copy() for m in messages]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), REDUCTIONS, SELECTIONS)
def test_structure_and_prose_never_change(
    case: tuple[list[Message], dict[str, Action]], reduction: Reduction, selection: Selection
) -> None:
    messages, actions = case
    original = _snapshot(messages)
    got = apply(messages, actions, reduction=reduction, selection=selection)
    assert messages == original
    assert len(got.messages) == len(messages) == len(got.touched)
    total_in = total_out = 0
    for old, new in zip(messages, got.messages, strict=True):
        assert (new.role, new.text) == (old.role, old.text)
        assert [u.tool_use_id for u in new.tool_uses] == [u.tool_use_id for u in old.tool_uses]
        assert [r.tool_use_id for r in new.tool_results] == [
            r.tool_use_id for r in old.tool_results
        ]
        for r_old, r_new in zip(old.tool_results, new.tool_results, strict=True):
            assert len(r_new.text) <= len(r_old.text)
            assert r_new.is_error == r_old.is_error
            if actions.get(r_old.tool_use_id) == "keep":
                assert r_new.text == r_old.text
            total_in += len(r_old.text)
            total_out += len(r_new.text)
    assert total_out <= total_in
    assert got.tokens_after <= got.tokens_before
    assert 0 <= got.tier <= 4


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), REDUCTIONS, SELECTIONS)
def test_apply_on_its_own_output_changes_nothing_further(
    case: tuple[list[Message], dict[str, Action]], reduction: Reduction, selection: Selection
) -> None:
    messages, actions = case
    first = apply(messages, actions, reduction=reduction, selection=selection)
    again = apply(
        first.messages,
        actions,
        reduction=Reduction(0.0, 0.0),
        selection=selection,
        final=set(first.changed),
    )
    assert again.changed == {}
    assert again.briefed == {}
    assert again.messages == first.messages
