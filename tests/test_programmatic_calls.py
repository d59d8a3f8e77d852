"""Calls the model's own code made (programmatic tool calling): outside its context.

Anthropic marks them with a `caller` of type `code_execution_…` on the `tool_use`, the Responses
API with `caller: {"type": "program"}` on the call and its output. The code reads their results
and only its output enters the model's context (and a Responses program is replayed from what
was sent): factrail neither counts them nor reduces them, and the fence still sees the calls.
"""

from __future__ import annotations

import copy
from typing import Any

from factrail.core.formats import anthropic, responses
from factrail.policy.provenance import evidence
from factrail.policy.taint import body_refs
from tests.test_provider_compaction import FENCED, log, step, steps

CODE = {"type": "code_execution_20260120", "tool_id": "srvtoolu_1"}


def from_code(first: int, count: int, size: int) -> list[dict[str, Any]]:
    """`count` rounds of calls the model's code made, each answered by the client."""
    out: list[dict[str, Any]] = []
    for i in range(first, first + count):
        use = {"type": "tool_use", "id": f"toolu_{i:03d}", "name": "query",
               "input": {"sql": f"select * from t{i}"}, "caller": CODE}  # fmt: skip
        out.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i:03d}", "content": log(i, size)}
        out.append({"role": "user", "content": [result]})
    return out


def test_calls_the_models_code_made_are_not_engine_calls() -> None:
    wire = [{"role": "user", "content": "Sum the sales."}, *from_code(0, 2, 500), *steps(2, 1, 500)]
    doc = anthropic.parse(wire)
    assert [u.tool_use_id for m in doc.messages for u in m.tool_uses] == ["toolu_002"]
    assert [r.tool_use_id for m in doc.messages for r in m.tool_results] == ["toolu_002"]
    assert len(doc.messages) == len(wire)
    assert doc.emit(doc.messages) is wire


def test_a_responses_programs_calls_are_not_engine_calls() -> None:
    program = {"type": "program", "id": "prg_1", "call_id": "p1", "code": "await f()",
               "fingerprint": "ZnA="}  # fmt: skip
    caller = {"type": "program", "caller_id": "p1"}
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "Sum the sales."},
        program,
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "f",
            "arguments": "{}",
            "caller": caller,
        },
        {"type": "function_call_output", "call_id": "c1", "output": log(1, 500), "caller": caller},
        {
            "type": "program_output",
            "id": "po_1",
            "call_id": "p1",
            "result": "42",
            "status": "completed",
        },
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "ok"},
    ]
    doc = responses.parse(items)
    assert [u.tool_use_id for m in doc.messages for u in m.tool_uses] == ["c2"]
    assert [r.tool_use_id for m in doc.messages for r in m.tool_results] == ["c2"]
    assert responses.asks_compaction([*items, {"type": "compaction_trigger"}])
    assert not responses.asks_compaction(items) and not responses.asks_compaction("hi")


async def test_results_the_models_code_read_are_neither_counted_nor_reduced() -> None:
    wire = [{"role": "user", "content": "Audit every table."}, *from_code(0, 40, 4000)]
    wire += steps(40, 2, 200)
    wire.append({"role": "user", "content": "Keep going."})
    snapshot = copy.deepcopy(wire)
    c, _ = step()
    result = await c.compact("s", anthropic.parse(wire))
    assert result.outcome == "passthrough" and result.document is None
    assert result.tokens_before < 16000 * 5 / 6  # 40 results of 4,000 chars, none counted
    assert wire == snapshot


def test_the_fence_reads_calls_the_models_code_made_from_the_wire() -> None:
    wire = [{"role": "user", "content": "Mail the report."}, *from_code(0, 1, 100)]
    wire[1]["content"][0]["name"] = FENCED
    body = {"model": "claude-opus-5", "messages": wire}
    seen = evidence(body, anthropic.parse(wire).messages, ())
    assert seen.refs is not None and FENCED in {ref.tool for ref in seen.refs}
    assert [ref.tool for ref in body_refs(body)] == [FENCED]
