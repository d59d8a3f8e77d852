"""The failure matrix under one deadline: hangs, retries, Retry-After, partial rounds."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest
import respx

from factrail.core.model import Message, ToolResult, ToolUse
from factrail.core.plan import Plan, build_plan
from factrail.judges import SystemOneJudge, TevJudge
from factrail.judges.retry import RetryPolicy, backoff_delay, retry_after_seconds
from tests.options import plan_options

URL = "https://judge.example/v1/systemone"
TEV = "http://tev.example/v1"
KEY = "jk-" + "M3n4" * 6
FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.002)


def make_plan(n: int = 2, max_request_tokens: int = 30_000) -> Plan:
    msgs = [Message("user", "go")]
    for k in range(1, n + 1):
        msgs.append(Message("assistant", f"s{k}", tool_uses=[ToolUse(f"u{k}", "Bash", {})]))
        msgs.append(Message("user", tool_results=[ToolResult(f"u{k}", "y" * 300)]))
    msgs += [Message("assistant", "done"), Message("user", "ok"), Message("assistant", "bye")]
    return build_plan(
        msgs, plan_options(preserve_recent=2, max_request_tokens=max_request_tokens), {}, set()
    )


def all_answers(plan: Plan, p: float = 0.9) -> dict[str, object]:
    return {"answers": {n: {"noul": p} for r in plan.requests for n in r.questions}}


async def hang(request: httpx.Request) -> httpx.Response:
    await asyncio.sleep(60)
    return httpx.Response(200)


async def test_a_hanging_system_one_hits_the_deadline(respx_mock: respx.MockRouter) -> None:
    plan = make_plan()
    respx_mock.post(URL).mock(side_effect=hang)
    async with httpx.AsyncClient() as client:
        judge = SystemOneJudge(client=client, url=URL, api_key=KEY, policy=FAST)
        result = await judge.ask(plan.requests, deadline=time.monotonic() + 0.2)
    assert [e.kind for e in result.errors] == ["deadline"]
    assert str(result.errors[0]).startswith("judge deadline of ")
    assert result.answers == {}
    assert plan.decide(result.answers).actions == {"u1": "drop_result", "u2": "drop_result"}


async def test_a_hanging_tev_hits_the_deadline_per_question(respx_mock: respx.MockRouter) -> None:
    plan = make_plan()
    respx_mock.post(f"{TEV}/chat/completions").mock(side_effect=hang)
    async with httpx.AsyncClient() as client:
        judge = TevJudge(client=client, base_url=TEV, policy=FAST)
        result = await judge.ask(plan.requests, deadline=time.monotonic() + 0.2)
    assert [e.kind for e in result.errors] == ["deadline"] * 4
    assert {e.question for e in result.errors} == {"call_t1", "result_t1", "call_t2", "result_t2"}
    assert plan.decide(result.answers).rules == 2


async def test_a_passed_deadline_sends_nothing(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL)
    async with httpx.AsyncClient() as client:
        judge = SystemOneJudge(client=client, url=URL, api_key=KEY, policy=FAST)
        result = await judge.ask(make_plan().requests, deadline=time.monotonic() - 1)
    assert not route.called and [e.kind for e in result.errors] == ["deadline"]


async def test_500_then_success_is_retried(respx_mock: respx.MockRouter) -> None:
    plan = make_plan()
    route = respx_mock.post(URL).mock(
        side_effect=[httpx.Response(500, text="boom"), httpx.Response(200, json=all_answers(plan))]
    )
    async with httpx.AsyncClient() as client:
        judge = SystemOneJudge(client=client, url=URL, api_key=KEY, policy=FAST)
        result = await judge.ask(plan.requests, deadline=time.monotonic() + 30)
    assert route.call_count == 2 and result.requests == 2
    assert result.errors == [] and len(result.answers) == 4


async def test_connect_error_then_success_is_retried(respx_mock: respx.MockRouter) -> None:
    plan = make_plan()
    reply = {"choices": [{"message": {"content": "B"}}], "usage": {"total_tokens": 3}}
    respx_mock.post(f"{TEV}/chat/completions").mock(
        side_effect=[httpx.ConnectError("refused")] + [httpx.Response(200, json=reply)] * 4
    )
    async with httpx.AsyncClient() as client:
        judge = TevJudge(client=client, base_url=TEV, policy=FAST, concurrency=1)
        result = await judge.ask(plan.requests, deadline=time.monotonic() + 30)
    assert result.errors == [] and set(result.answers.values()) == {0.0}
    assert result.requests == 5 and result.usage == {"total_tokens": 12}


async def test_persistent_failure_reports_the_last_error(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).mock(side_effect=httpx.ConnectError("refused"))
    async with httpx.AsyncClient() as client:
        judge = SystemOneJudge(client=client, url=URL, api_key=KEY, policy=FAST)
        result = await judge.ask(make_plan().requests, deadline=time.monotonic() + 30)
    assert route.call_count == FAST.attempts
    assert [e.kind for e in result.errors] == ["transport"]
    assert str(result.errors[0]).startswith("transport error: refused")


async def test_client_errors_are_not_retried(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).mock(return_value=httpx.Response(400, text="bad"))
    async with httpx.AsyncClient() as client:
        judge = SystemOneJudge(client=client, url=URL, api_key=KEY, policy=FAST)
        result = await judge.ask(make_plan().requests, deadline=time.monotonic() + 30)
    assert route.call_count == 1 and [e.outcome for e in result.errors] == ["status"]


@pytest.mark.parametrize("after", ["0", format_datetime(datetime(2000, 1, 1, tzinfo=UTC), True)])
async def test_429_with_a_fitting_retry_after_is_retried(
    respx_mock: respx.MockRouter, after: str
) -> None:
    plan = make_plan()
    route = respx_mock.post(URL).mock(
        side_effect=[
            httpx.Response(429, headers={"retry-after": after}),
            httpx.Response(200, json=all_answers(plan)),
        ]
    )
    async with httpx.AsyncClient() as client:
        judge = SystemOneJudge(client=client, url=URL, api_key=KEY, policy=FAST)
        result = await judge.ask(plan.requests, deadline=time.monotonic() + 30)
    assert route.call_count == 2 and len(result.answers) == 4


async def test_429_whose_retry_after_outlives_the_deadline_gives_up(
    respx_mock: respx.MockRouter,
) -> None:
    route = respx_mock.post(URL).mock(
        return_value=httpx.Response(429, headers={"retry-after": "3600"}, text="slow down")
    )
    async with httpx.AsyncClient() as client:
        judge = SystemOneJudge(client=client, url=URL, api_key=KEY, policy=FAST)
        result = await judge.ask(make_plan().requests, deadline=time.monotonic() + 30)
    # had it waited, the round would have ended with a deadline error instead
    assert route.call_count == 1
    assert [str(e) for e in result.errors] == ["judge answered HTTP 429: slow down"]


async def test_answers_of_requests_that_succeed_are_kept(respx_mock: respx.MockRouter) -> None:
    plan = make_plan(4)
    tokens = plan.requests[0].state_tokens
    plan = make_plan(4, max_request_tokens=tokens + 20 + 2 * 125)
    assert len(plan.requests) == 2

    def reply(request: httpx.Request) -> httpx.Response:
        if b'"call_t1"' in request.content:
            return httpx.Response(503, text="down")
        names = [n for r in plan.requests for n in r.questions if n.endswith(("t3", "t4"))]
        return httpx.Response(200, json={"answers": {n: {"noul": 0.9} for n in names}})

    respx_mock.post(URL).mock(side_effect=reply)
    async with httpx.AsyncClient() as client:
        judge = SystemOneJudge(client=client, url=URL, api_key=KEY, policy=FAST)
        result = await judge.ask(plan.requests, deadline=time.monotonic() + 30)
    assert [e.kind for e in result.errors] == ["status"]
    decided = plan.decide(result.answers)
    assert decided.actions == {
        "u1": "drop_result", "u2": "drop_result", "u3": "keep", "u4": "keep",
    }  # fmt: skip


def test_retry_after_parsing() -> None:
    now = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp()
    assert retry_after_seconds("7", now) == 7.0
    assert retry_after_seconds("Tue, 01 Jan 2030 12:00:30 GMT", now) == 30.0
    assert retry_after_seconds("Mon, 31 Dec 2029 12:00:30 GMT", now) == 0.0
    assert retry_after_seconds("soon", now) is None
    assert retry_after_seconds("-3", now) is None
    assert retry_after_seconds(None, now) is None


def test_backoff_grows_with_jitter_and_caps() -> None:
    policy = RetryPolicy(base_delay=0.1, max_delay=1.0)
    assert backoff_delay(0, policy, lambda: 0.0) == pytest.approx(0.05)
    assert backoff_delay(0, policy, lambda: 1.0) == pytest.approx(0.1)
    assert backoff_delay(2, policy, lambda: 1.0) == pytest.approx(0.4)
    assert backoff_delay(9, policy, lambda: 1.0) == pytest.approx(1.0)
