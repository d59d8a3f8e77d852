"""The failure matrix at the compaction step: a failing judge never blocks or erases anything.

Every valid answer here says "keep", so a judged call stays verbatim while a call the judge left
unanswered falls to the rules (`drop_result`): its output is reduced, its full text saved.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from factrail.core.formats import openai_chat
from factrail.core.model import collect_tool_calls
from factrail.gateway.metrics import Metrics
from factrail.judges import SystemOneJudge, TevJudge
from factrail.judges.base import Judge
from factrail.session import SessionCompactor, TurnResult
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.outputs import OutputStore
from tests.options import engine_options

URL = "http://judge.test/v1/systemone"
TEV = "http://tev.test/v1"
MARGIN_S = 2.0
PRESERVE = 6
CALLS = 10
TRIGGER = 6000
"""The transcript (about 7100 tokens) is past the hard line, so the rails reduce every output the
judge did not keep."""


def key() -> str:
    return "jk-" + "Fa1l" * 6


def transcript() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find the flaky test."},
    ]
    for i in range(CALLS):
        cid = f"call_{i}"
        args = json.dumps({"command": f"pytest tests/test_m{i}.py"})
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {i}.",
                "tool_calls": [{"id": cid, "type": "function",
                                "function": {"name": "Bash", "arguments": args}}],
            }
        )  # fmt: skip
        lines = [f"tests/test_m{i}.py::case_{j} PASSED in 0.{j:02d}s" for j in range(40)]
        messages.append({"role": "tool", "tool_call_id": cid, "content": "\n".join(lines)})
    messages.append({"role": "user", "content": "Go on."})
    return messages


def call_of(question: str) -> str:
    """`result_t3` → `call_2` (short ids number the calls from 1, in order)."""
    return f"call_{int(question.rsplit('_t', 1)[1]) - 1}"


def keep_all(body: dict[str, Any], drop: Callable[[str], bool] = lambda _: False) -> Any:
    return {n: {"noul": 0.9} for n in body["questions"] if not drop(n)}


async def hang(request: httpx.Request) -> httpx.Response:
    await asyncio.sleep(60)
    return httpx.Response(200)


def systemone(reply: Callable[[dict[str, Any]], httpx.Response]) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        return reply(json.loads(request.content))

    return handler


@dataclass
class Run:
    result: TurnResult
    seconds: float
    verbatim: set[str]
    """Unpinned calls whose output reached the agent unchanged (judged: keep)."""
    reduced: set[str]
    """Unpinned calls whose output was reduced (the rules)."""


async def compact(judge: Judge, deadline_ms: int, tmp_path: Path) -> Run:
    wire = transcript()
    doc = openai_chat.parse(wire)
    store = OutputStore(tmp_path / "outputs")
    compactor = SessionCompactor(
        engine_options(
            trigger_tokens=TRIGGER,
            trigger_percent=0.0,
            rearm_tokens=0,
            preserve_recent=PRESERVE,
            judge_deadline_ms=deadline_ms,
            price_profile="none",  # no cache to lose: what the judge leaves is always reduced
        ),
        state=MemoryStateStore(),
        outputs=store,
        judge=judge,
    )
    started = time.perf_counter()
    result = await compactor.compact("s", doc)
    seconds = time.perf_counter() - started
    # A judge that keeps every call leaves nothing to reduce: not a compaction at all.
    assert result.outcome in ("compacted", "passthrough")
    out = wire if result.document is None else result.document
    assert (result.outcome == "compacted") == (result.document is not None)
    assert isinstance(out, list) and len(out) == len(wire)
    # Nothing erased: prose, calls and inputs intact; every reduced output saved in full.
    assert [m.get("content") for m in out if m["role"] != "tool"] == [
        m.get("content") for m in wire if m["role"] != "tool"
    ]
    assert [m.get("tool_calls") for m in out] == [m.get("tool_calls") for m in wire]
    original = {m["tool_call_id"]: m["content"] for m in wire if m["role"] == "tool"}
    sent = {m["tool_call_id"]: m["content"] for m in out if m["role"] == "tool"}
    unpinned = {c.tool_use_id for c in collect_tool_calls(doc.messages, PRESERVE) if not c.pinned}
    assert unpinned and all(sent[c] == original[c] for c in set(original) - unpinned)
    reduced = {c for c in unpinned if sent[c] != original[c]}
    for c in reduced:
        assert len(sent[c]) < len(original[c])
        assert store.get(store.output_id("s", c)) == original[c]
    return Run(result, seconds, unpinned - reduced, reduced)


async def ask_systemone(
    respx_mock: respx.MockRouter, side_effect: Any, deadline_ms: int, tmp_path: Path
) -> tuple[Run, respx.Route]:
    route = respx_mock.post(URL).mock(side_effect=side_effect)
    async with httpx.AsyncClient() as client:
        judge = SystemOneJudge(client=client, url=URL, api_key=key())
        run = await compact(judge, deadline_ms, tmp_path)
    assert run.seconds < deadline_ms / 1000 + MARGIN_S
    return run, route


async def test_valid_answers_are_used(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    reply = systemone(lambda b: httpx.Response(200, json={"answers": keep_all(b)}))
    run, route = await ask_systemone(respx_mock, reply, 5000, tmp_path)
    assert route.call_count == 1
    assert run.result.judge_errors == [] and run.result.reason == "ok"
    assert run.reduced == set() and run.verbatim
    assert run.result.outcome == "passthrough" and run.result.compactions == 0


async def test_a_hanging_judge_falls_to_the_rules_at_the_deadline(
    respx_mock: respx.MockRouter, tmp_path: Path
) -> None:
    run, _ = await ask_systemone(respx_mock, hang, 300, tmp_path)
    assert run.result.judge_errors == ["deadline"] and run.result.reason == "ok-rules"
    assert run.verbatim == set() and run.reduced


async def test_a_judge_answering_500_falls_to_the_rules_after_retries(
    respx_mock: respx.MockRouter, tmp_path: Path
) -> None:
    run, route = await ask_systemone(respx_mock, httpx.Response(500, text="boom"), 5000, tmp_path)
    assert route.call_count > 1
    assert run.result.judge_errors == ["status"] and run.result.judge_requests == route.call_count
    assert run.verbatim == set() and run.reduced


async def test_a_429_is_retried_after_its_retry_after(
    respx_mock: respx.MockRouter, tmp_path: Path
) -> None:
    seen: list[float] = []

    def reply(body: dict[str, Any]) -> httpx.Response:
        seen.append(time.monotonic())
        if len(seen) == 1:
            return httpx.Response(429, headers={"retry-after": "1"}, text="slow down")
        return httpx.Response(200, json={"answers": keep_all(body)})

    run, route = await ask_systemone(respx_mock, systemone(reply), 5000, tmp_path)
    assert route.call_count == 2 and seen[1] - seen[0] >= 1.0
    assert run.result.judge_errors == [] and run.reduced == set()


async def test_a_429_whose_retry_after_outlives_the_deadline_falls_to_the_rules(
    respx_mock: respx.MockRouter, tmp_path: Path
) -> None:
    limited = httpx.Response(429, headers={"retry-after": "3600"}, text="slow down")
    run, route = await ask_systemone(respx_mock, limited, 5000, tmp_path)
    assert route.call_count == 1
    assert run.result.judge_errors == ["status"]
    assert run.verbatim == set() and run.reduced


async def test_a_malformed_reply_falls_to_the_rules(
    respx_mock: respx.MockRouter, tmp_path: Path
) -> None:
    broken = httpx.Response(
        200, content=b'{"answers": {', headers={"content-type": "application/json"}
    )
    run, _ = await ask_systemone(respx_mock, broken, 5000, tmp_path)
    assert run.result.judge_errors == ["malformed"]
    assert run.verbatim == set() and run.reduced


@pytest.mark.parametrize(
    ("question", "answer"),
    [("result_t2", None), ("call_t3", 1.7), ("result_t4", float("nan")), ("call_t1", "0.9")],
)
async def test_one_invalid_answer_sends_only_its_call_to_the_rules(
    respx_mock: respx.MockRouter, tmp_path: Path, question: str, answer: Any
) -> None:
    def reply(body: dict[str, Any]) -> httpx.Response:
        answers = keep_all(body, lambda n: n == question)
        if answer is not None:
            answers[question] = {"noul": answer}
        text = json.dumps({"answers": answers})  # NaN goes out as the bare token `NaN`
        return httpx.Response(200, text=text, headers={"content-type": "application/json"})

    run, _ = await ask_systemone(respx_mock, systemone(reply), 5000, tmp_path)
    assert run.result.judge_errors == ["missing-answer"] and run.result.reason == "ok-rules"
    assert run.reduced == {call_of(question)}
    assert len(run.verbatim) >= 2


async def test_tev_uses_the_questions_answered_before_the_deadline(
    respx_mock: respx.MockRouter, tmp_path: Path
) -> None:
    """Per-question Tev calls: the ones about call t1 hang; every other one answers A."""

    async def reply(request: httpx.Request) -> httpx.Response:
        if (
            "Tool call t1 " in request.content.decode()
            or "tool call t1 " in request.content.decode()
        ):
            return await hang(request)
        return httpx.Response(200, json={"choices": [{"message": {"content": "A"}}]})

    respx_mock.post(f"{TEV}/chat/completions").mock(side_effect=reply)
    async with httpx.AsyncClient() as client:
        run = await compact(TevJudge(client=client, base_url=TEV), 300, tmp_path)
    assert run.seconds < 0.3 + MARGIN_S
    assert run.result.judge_errors == ["deadline", "deadline"]
    assert run.reduced == {"call_0"} and len(run.verbatim) >= 2


async def test_retried_failures_are_not_counted_as_ok_judge_requests(
    respx_mock: respx.MockRouter, tmp_path: Path
) -> None:
    run, route = await ask_systemone(respx_mock, httpx.Response(500, text="boom"), 5000, tmp_path)
    assert route.call_count > 1
    metrics = Metrics()
    metrics.record_turn(run.result, run.seconds)
    labels = {"judge": "systemone", "outcome": "ok"}
    assert not metrics.registry.get_sample_value("factrail_judge_requests_total", labels)
    failed = {"judge": "systemone", "outcome": "status"}
    sample = metrics.registry.get_sample_value("factrail_judge_requests_total", failed)
    assert sample == route.call_count
