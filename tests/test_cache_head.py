"""Before the first compaction the frozen zone is the head of the transcript that no compaction
can change: the messages before the first result (or the first arguments long enough to be
briefed). Once a compaction is in sight (past `MARK_SHARE` of the trigger) the step reports it,
so that the gateway's cache breakpoint there is written while the transcript grows and the
first compaction re-reads it from the provider's cache instead of writing it again."""

from __future__ import annotations

import json
from typing import Any

from factrail.core.formats import anthropic
from factrail.core.model import transcript_tokens
from factrail.session import zone
from tests.test_cost_aware import make


def conversation(calls: int, *, first_tool: str = "Bash", first_input: Any = None) -> list[Any]:
    """An Anthropic transcript: a prompt and a long instructions message (as Claude Code sends
    them), then `calls` tool calls with 4,000-char outputs."""
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "Fix the failing deploy."}]},
        {"role": "user", "content": [{"type": "text", "text": "Project notes. " * 400}]},
    ]
    for i in range(calls):
        tool = first_tool if i == 0 else "Bash"
        arguments = first_input if i == 0 and first_input is not None else {"command": f"ls {i}"}
        use = {"type": "tool_use", "id": f"toolu_{i:03d}", "name": tool, "input": arguments}
        messages.append(
            {"role": "assistant", "content": [{"type": "text", "text": f"Step {i}."}, use]}
        )
        output = "\n".join(f"line {j} of output {i}, id req-{i:04d}{j:04d}" for j in range(120))
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i:03d}", "content": output}
        messages.append({"role": "user", "content": [result]})
    return messages


def tokens_of(wire: list[Any]) -> int:
    return transcript_tokens(anthropic.parse(wire).messages)


async def frozen_at(wire: list[Any], share: float) -> int | None:
    """The frozen zone a passthrough turn reports when the transcript is `share` of T."""
    result = await make(int(tokens_of(wire) / share)).compact("s", anthropic.parse(wire))
    assert result.outcome == "passthrough"
    return result.frozen_through


async def test_far_from_the_trigger_no_frozen_zone_is_reported() -> None:
    assert await frozen_at(conversation(12), zone.MARK_SHARE - 0.05) is None


async def test_past_half_the_trigger_the_head_before_the_first_result_is_frozen() -> None:
    wire = conversation(12)
    head = await frozen_at(wire, zone.MARK_SHARE + 0.1)
    assert head == 2  # the prompt, the notes and the first call: its result is the next message
    assert wire[head]["role"] == "assistant" and wire[head + 1]["content"][0]["type"] == (
        "tool_result"
    )


async def test_arguments_long_enough_to_be_briefed_end_the_head_before_their_call() -> None:
    wire = conversation(12, first_input={"command": "echo " + "x" * 400})
    assert await frozen_at(wire, zone.MARK_SHARE + 0.1) == 1


async def test_a_verbatim_call_belongs_to_the_head() -> None:
    """A skill load is never reduced: the head runs on to the next call's result."""
    wire = conversation(12, first_tool="Skill", first_input={"skill": "deploy"})
    assert await frozen_at(wire, zone.MARK_SHARE + 0.1) == 4


async def test_the_first_compaction_leaves_the_head_as_the_client_sent_it() -> None:
    """What makes the breakpoint worth its slot: the compaction's first change comes after it,
    and from then on the frozen zone runs to the last settled result."""
    wire = conversation(12)
    head = await frozen_at(wire, zone.MARK_SHARE + 0.1)
    assert head is not None
    compacted = await make(int(tokens_of(wire) / 0.9), "none").compact("s", anthropic.parse(wire))
    assert compacted.outcome == "compacted"
    sent = compacted.document
    assert json.dumps(sent[: head + 1]) == json.dumps(wire[: head + 1])
    assert sent[head + 1] != wire[head + 1]  # the first result is where the change starts
    assert compacted.frozen_through is not None and compacted.frozen_through > head
