"""History the provider's own compaction replaced: not counted, never reduced, still fenced.

Anthropic drops every block before a `compaction` block that holds a summary; the Responses API
prunes the calls and outputs before its latest `compaction` item (its window keeps the user
messages before the item, which the model reads). A client that keeps appending (the SDK's tool
runner, a stateless Responses loop) still sends that history, and factrail must not count it
against the trigger nor spend its rails on what the provider never reads.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from factrail.core.formats import anthropic, parse_any, responses
from factrail.judges.rules import RulesJudge
from factrail.policy.provenance import Evidence
from factrail.session import SessionCompactor
from factrail.stores.memory_state import MemoryStateStore
from tests.options import engine_options

FENCED = "mcp__email-gateway__ask_email"


def log(i: int, size: int) -> str:
    lines = [f"line {j} of output {i} with request id req-{i:04d}{j:04d}" for j in range(200)]
    return "\n".join(lines)[:size]


def steps(first: int, count: int, size: int) -> list[dict[str, Any]]:
    """`count` Anthropic tool-use rounds, ids from `first`."""
    out: list[dict[str, Any]] = []
    for i in range(first, first + count):
        use = {"type": "tool_use", "id": f"toolu_{i:03d}", "name": "Bash",
               "input": {"command": f"curl -sv http://svc{i}.internal/health"}}  # fmt: skip
        out.append({"role": "assistant", "content": [{"type": "text", "text": f"Step {i}."}, use]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i:03d}", "content": log(i, size)}
        out.append({"role": "user", "content": [result]})
    return out


def compacted_by_provider(
    before: int, after: int, *, size: int = 4000, summary: str | None = "Summary of the work."
) -> list[dict[str, Any]]:
    """A transcript whose provider compacted after `before` rounds: the answer that carries the
    compaction block opens with it, then `after` more rounds."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing deploy."}]
    messages += steps(0, before, size)
    block = {"type": "compaction", "content": summary, "encrypted_content": "b3BhcXVl"}
    first, *rest = steps(before, after, size) if after else [None]
    opening = {"role": "assistant", "content": [block, *(first["content"] if first else [])]}
    messages.append(opening)
    messages += rest
    messages.append({"role": "user", "content": "Keep going."})
    return messages


def step(trigger: int = 16000) -> tuple[SessionCompactor, MemoryStateStore]:
    store = MemoryStateStore()
    options = engine_options(
        trigger_tokens=trigger, trigger_percent=0.0, rearm_tokens=0, price_profile="none"
    )
    return SessionCompactor(options, state=store, outputs=None, judge=RulesJudge()), store


def results_of(messages: list[Any]) -> dict[str, Any]:
    return {
        b["tool_use_id"]: b["content"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    }


def test_an_anthropic_compaction_block_opens_the_part_the_provider_reads() -> None:
    wire = compacted_by_provider(5, 2)
    doc = anthropic.parse(wire)
    assert doc.live == 11  # the prompt, five rounds, then the answer holding the block
    assert doc.messages[doc.live].role == "assistant"
    assert [u.tool_use_id for u in doc.messages[doc.live].tool_uses] == ["toolu_005"]
    assert len(doc.messages) == len(wire)  # one engine message per wire message, as before


def test_a_saved_request_keeps_where_the_provider_reads_from() -> None:
    wire = compacted_by_provider(5, 2)
    assert parse_any(json.dumps({"model": "claude-opus-5", "messages": wire})).live == 11


def test_a_failed_compaction_block_drops_nothing() -> None:
    assert anthropic.parse(compacted_by_provider(5, 2, summary=None)).live == 0
    assert anthropic.parse(steps(0, 3, 100)).live == 0


def test_the_latest_compaction_wins() -> None:
    wire = compacted_by_provider(3, 2)
    later = compacted_by_provider(0, 1)[1:]  # another answer that opens with a block
    doc = anthropic.parse([*wire, *later])
    assert doc.live == len(wire)


def stateless_chain(rounds: int, size: int) -> list[dict[str, Any]]:
    """A Responses loop that kept appending: `rounds` calls, the provider's `compaction` item,
    one more call."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix it."}]
    for i in range(rounds):
        items.append({"type": "function_call", "call_id": f"c{i}", "name": "sh", "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": f"c{i}", "output": log(i, size)})
        items.append({"role": "assistant", "content": f"Round {i} done."})
    items.append({"type": "compaction", "id": "cmp_1", "encrypted_content": "b3BhcXVl"})
    items.append({"type": "function_call", "call_id": "c99", "name": "sh", "arguments": "{}"})
    items.append({"type": "function_call_output", "call_id": "c99", "output": "ok"})
    return items


def codex_window(retained: int) -> list[dict[str, Any]]:
    """What the Codex CLI sends after a remote compaction: its instructions and the user
    messages the `/responses/compact` window kept (about `retained` chars), the window's
    `compaction` item, then the new turn."""
    words = "the migration must keep every tenant's audit rows and their checksums "
    prompts = [(words * (retained // len(words) // 4 + 1))[: retained // 4] for _ in range(4)]

    def says(role: str, text: str) -> dict[str, Any]:
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}

    return [
        says("developer", "Be terse."),
        *(says("user", p) for p in prompts),
        {"type": "compaction", "encrypted_content": "b3BhcXVl"},
        says("user", "Go on."),
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"cmd":"ls"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "a.py\nb.py"},
    ]


def test_before_a_responses_compaction_item_the_provider_reads_only_messages() -> None:
    doc = responses.parse(stateless_chain(3, 500))
    assert doc.live == 0
    calls = [u.tool_use_id for m in doc.messages for u in m.tool_uses]
    results = [r.tool_use_id for m in doc.messages for r in m.tool_results]
    assert calls == ["c99"] and results == ["c99"]  # the pruned calls are not in the view
    texts = [m.text for m in doc.messages if m.text]
    assert texts == ["Fix it.", "Round 0 done.", "Round 1 done.", "Round 2 done."]
    assert responses.parse(stateless_chain(3, 500)).emit(doc.messages) == stateless_chain(3, 500)


async def test_the_messages_a_compact_window_keeps_count_against_the_trigger() -> None:
    """Codex keeps up to 20k tokens of user messages through a remote compaction: uncounted,
    the transcript would pass the trigger unseen."""
    c, _ = step()
    doc = responses.parse(codex_window(80_000))
    kept = c.transcript_tokens(doc.messages[:4])  # the four prompts the window kept
    assert kept > 16000
    result = await c.compact("s", doc)
    assert result.tokens_before >= kept  # past the trigger, as the provider counts it


async def test_calls_a_responses_compaction_pruned_are_not_counted() -> None:
    c, _ = step()
    wire = stateless_chain(40, 4000)
    result = await c.compact("s", responses.parse(wire))
    assert result.outcome == "passthrough" and result.document is None
    assert result.tokens_before < 200  # the prompt, forty short notes, one call and its output


async def test_history_the_provider_compacted_is_not_counted_against_the_trigger() -> None:
    wire = compacted_by_provider(40, 2)
    c, _ = step()
    whole = c.transcript_tokens(anthropic.parse(wire).messages)
    assert whole > 16000  # sent whole, the history alone is past the trigger
    result = await c.compact("s", anthropic.parse(wire))
    assert result.outcome == "passthrough" and result.document is None
    assert result.tokens_before < 16000 * 5 / 6
    assert result.estimated_sent == result.tokens_before  # calibrated against what is read


async def test_a_compaction_reduces_only_what_the_provider_reads() -> None:
    wire = compacted_by_provider(20, 30)
    snapshot = copy.deepcopy(wire)
    live = anthropic.parse(wire).live
    c, store = step()
    result = await c.compact("s", anthropic.parse(wire))
    assert result.outcome == "compacted"
    out = result.document
    assert isinstance(out, list) and len(out) == len(wire)
    assert out[:live] == snapshot[:live]  # the summarized history goes as the client sent it
    changed = {k for k, v in results_of(out).items() if v != results_of(snapshot)[k]}
    assert changed and all(int(k.split("_")[1]) >= 20 for k in changed)
    assert result.frozen_through is None or result.frozen_through >= live
    state = store.load("s")
    assert state is not None
    assert state.history[-1]["first_changed_message"] >= live  # wire message index

    again = await c.compact("s", anthropic.parse(copy.deepcopy(snapshot)))
    assert again.outcome == "reapplied" and again.document == out  # byte-stable next turn


async def test_without_a_summary_the_whole_transcript_counts() -> None:
    c, _ = step()
    result = await c.compact("s", anthropic.parse(compacted_by_provider(40, 2, summary=None)))
    assert result.outcome == "compacted"


async def test_a_fenced_call_the_provider_summarized_still_taints() -> None:
    wire = compacted_by_provider(20, 30)
    wire[1]["content"][1]["name"] = FENCED  # before the compaction block
    c, store = step()
    await c.compact("s", anthropic.parse(wire), evidence=Evidence())
    state = store.load("s")
    assert state is not None and state.taint is not None and state.taint["tainted"] is True
