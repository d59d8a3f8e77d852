"""System One: exact request bytes and the reading of its answers."""

from __future__ import annotations

import json
import time

import httpx
import pytest
import respx

from factrail.core.model import Message, ToolResult, ToolUse
from factrail.core.plan import JudgeRequest, Plan, build_plan
from factrail.core.redact import redact_value
from factrail.core.text import compact_json
from factrail.judges import JudgeConfigError, JudgeRound, SystemOneJudge, make_judge
from tests.options import plan_options

URL = "https://judge.example/v1/systemone"
KEY = "jk-" + "Q4r5" * 6


def plan_for(n: int = 2) -> tuple[list[JudgeRequest], Plan]:
    msgs = [Message("user", "make the tests pass")]
    for k in range(1, n + 1):
        msgs.append(Message("assistant", f"step {k}", tool_uses=[ToolUse(f"u{k}", "Grep", {})]))
        msgs.append(Message("user", tool_results=[ToolResult(f"u{k}", "hit " * 30)]))
    msgs += [Message("assistant", "done"), Message("user", "ok"), Message("assistant", "bye")]
    plan = build_plan(msgs, plan_options(preserve_recent=2), {}, set())
    return plan.requests, plan


def answers(**values: object) -> dict[str, object]:
    return {"answers": {name: {"noul": v} for name, v in values.items()}}


async def ask(respx_mock: respx.MockRouter, response: httpx.Response) -> tuple[JudgeRound, Plan]:
    requests, plan = plan_for()
    route = respx_mock.post(URL).mock(return_value=response)
    async with httpx.AsyncClient() as client:
        judge = SystemOneJudge(client=client, url=URL, api_key=KEY)
        result = await judge.ask(requests, deadline=time.monotonic() + 30)
    assert route.call_count == 1
    return result, plan


async def test_exact_request_bytes(respx_mock: respx.MockRouter) -> None:
    requests, _ = plan_for()
    route = respx_mock.post(URL).mock(return_value=httpx.Response(200, json=answers()))
    async with httpx.AsyncClient() as client:
        judge = SystemOneJudge(client=client, url=URL, api_key=KEY, model="jev-test")
        await judge.ask(requests, deadline=time.monotonic() + 30)
    sent = route.calls[0].request
    state, _ = redact_value(requests[0].state, known=(KEY,))
    expected = {"model": "jev-test", "state": state, "questions": requests[0].questions}
    assert sent.content == compact_json(expected).encode()
    assert list(json.loads(sent.content)) == ["model", "state", "questions"]
    assert str(sent.url) == URL
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["authorization"] == f"Bearer {KEY}"


async def test_all_answers_read(respx_mock: respx.MockRouter) -> None:
    values = {"call_t1": 0.9, "result_t1": 0.2, "call_t2": 0, "result_t2": 1}
    result, _ = await ask(
        respx_mock,
        httpx.Response(200, json={**answers(**values), "usage": {"tokens": 7}, "model": "jev-9"}),
    )
    assert result.answers == values and result.errors == []
    assert result.usage == {"tokens": 7} and result.model == "jev-9"
    assert result.requests == 1


@pytest.mark.parametrize("bad", [1.7, -0.1, "0.5", None, True])
async def test_an_invalid_answer_is_missing_and_the_rest_is_used(
    respx_mock: respx.MockRouter, bad: object
) -> None:
    reply = answers(call_t1=0.9, result_t1=bad, call_t2=0.9, result_t2=0.9, extra=3)
    result, plan = await ask(respx_mock, httpx.Response(200, json=reply))
    assert [(e.kind, e.question) for e in result.errors] == [("missing-answer", "result_t1")]
    assert str(result.errors[0]) == "judge gave no finite answer for result_t1"
    decided = plan.decide(result.answers)
    assert decided.actions == {"u1": "drop_result", "u2": "keep"}
    assert [d.reason for d in decided.decisions] == ["rules", "kept"]


async def test_a_missing_answer_entry(respx_mock: respx.MockRouter) -> None:
    reply = {"answers": {"call_t1": {"noul": 0.1}, "result_t1": {}, "call_t2": 3}}
    result, _ = await ask(respx_mock, httpx.Response(200, json=reply))
    assert result.answers == {"call_t1": 0.1}
    assert [e.question for e in result.errors] == [
        "result_t1", "call_t2", "result_t2",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("response", "detail"),
    [
        (httpx.Response(200, text="not json{"), "body is not JSON"),
        (httpx.Response(200, json=[1, 2]), "body is not a JSON object"),
        (httpx.Response(200, json={"answers": []}), "no `answers` object"),
        (httpx.Response(200, json={"result": 1}), "no `answers` object"),
    ],
)
async def test_malformed_bodies(
    respx_mock: respx.MockRouter, response: httpx.Response, detail: str
) -> None:
    result, plan = await ask(respx_mock, response)
    assert [str(e) for e in result.errors] == [f"malformed judge response: {detail}"]
    assert result.answers == {}
    assert plan.decide(result.answers).rules == 2


def test_keyless_needs_a_declared_local_endpoint() -> None:
    client = httpx.AsyncClient()
    with pytest.raises(JudgeConfigError):
        SystemOneJudge(client=client, url="http://127.0.0.1:8090/v1/systemone")
    with pytest.raises(JudgeConfigError):
        make_judge("systemone", client=client, api_key="")
    judge = make_judge("systemone", client=client, local=True, url="http://127.0.0.1:8090/x")
    assert (judge.kind, judge.endpoint, judge.model, judge.local) == (
        "systemone", "http://127.0.0.1:8090/x", "jev-latest", True,
    )  # fmt: skip
    default = make_judge("systemone", client=client, api_key=KEY)
    assert default.endpoint == "https://api.typesafe.ai/v1/systemone"


async def test_empty_round_sends_nothing(respx_mock: respx.MockRouter) -> None:
    async with httpx.AsyncClient() as client:
        result = await SystemOneJudge(client=client, api_key=KEY).ask([], deadline=0.0)
    assert (result.answers, result.errors, result.requests) == ({}, [], 0)
