"""The Tev judge: exact chat bodies per constraint, reply parsing and bounded concurrency."""

from __future__ import annotations

import asyncio
import json
import math
import time
from typing import Any

import httpx
import pytest
import respx

from factrail.core.model import Message, ToolResult, ToolUse
from factrail.core.plan import Plan, build_plan
from factrail.core.redact import redact_value
from factrail.core.tev import SYSTEM, render_decision
from factrail.core.text import compact_json
from factrail.judges import JudgeConfigError, TevJudge, make_judge
from tests.options import plan_options

BASE = "http://h:8000/v1/"
URL = "http://h:8000/v1/chat/completions"
KEY = "jk-" + "T7u8" * 6


def make_plan(n: int = 1) -> Plan:
    msgs = [Message("user", "go")]
    for k in range(1, n + 1):
        msgs.append(Message("assistant", "", tool_uses=[ToolUse(f"u{k}", "Read", {"p": k})]))
        msgs.append(Message("user", tool_results=[ToolResult(f"u{k}", "z" * 90)]))
    msgs += [Message("assistant", "done"), Message("user", "ok"), Message("assistant", "bye")]
    return build_plan(msgs, plan_options(preserve_recent=2), {}, set())


def letter_reply(tops: list[tuple[str, float]], content: str = "A") -> dict[str, Any]:
    top = [{"token": t, "logprob": lp} for t, lp in tops]
    return {
        "model": "tev1-served",
        "choices": [
            {
                "message": {"content": content},
                "logprobs": {"content": [{"token": content, "logprob": 0, "top_logprobs": top}]},
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 1},
    }


async def run(
    respx_mock: respx.MockRouter, reply: Any, plan: Plan | None = None, **kw: Any
) -> tuple[Any, respx.Route]:
    plan = plan or make_plan()
    route = respx_mock.post(URL).mock(
        side_effect=reply if callable(reply) else None,
        return_value=None if callable(reply) else httpx.Response(200, json=reply),
    )
    async with httpx.AsyncClient() as client:
        judge = TevJudge(client=client, base_url=BASE, **kw)
        result = await judge.ask(plan.requests, deadline=time.monotonic() + 30)
    return result, route


def expected_body(plan: Plan, name: str, extra: dict[str, Any], key: str = KEY) -> bytes:
    request = plan.requests[0]
    state, _ = redact_value(request.state, known=(key,))
    body = {
        "model": "tev1",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {
                "role": "user",
                "content": render_decision(state, request.questions[name]["instructions"]),
            },
        ],
        "temperature": 0,
        "max_tokens": 8,
        "logprobs": True,
        "top_logprobs": 5,
        "chat_template_kwargs": {"enable_thinking": False},
        **extra,
    }
    return compact_json(body).encode()


REGEX = {"response_format": {"type": "regex", "pattern": "(A|B)"}}
# Written out on purpose, not imported from `tev.LETTER_SCHEMA`: it pins the wire value.
SCHEMA = {
    "max_tokens": 16,
    "response_format": {
        "type": "json_schema",
        "json_schema": {
            "name": "tev_answer",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {"answer": {"type": "string", "enum": ["A", "B"]}},
                "required": ["answer"],
                "additionalProperties": False,
            },
        },
    },
}


@pytest.mark.parametrize(
    ("kw", "extra"),
    [
        ({}, REGEX),
        ({"constraint": "none"}, {}),
        ({"constraint": "logit_bias"}, {"max_tokens": 1}),
        ({"constraint": "logit_bias", "logit_bias": {"32": 5, "33": 5}},
         {"max_tokens": 1, "logit_bias": {"32": 5, "33": 5}}),
        ({"constraint": "json_schema"}, SCHEMA),
    ],
)  # fmt: skip
async def test_exact_bodies_one_call_per_question(
    respx_mock: respx.MockRouter, kw: dict[str, Any], extra: dict[str, Any]
) -> None:
    plan = make_plan()
    result, route = await run(respx_mock, letter_reply([("A", 0.0)]), plan, api_key=KEY, **kw)
    bodies = sorted(c.request.content for c in route.calls)
    assert bodies == sorted(expected_body(plan, n, extra) for n in ("call_t1", "result_t1"))
    assert all(c.request.headers["authorization"] == f"Bearer {KEY}" for c in route.calls)
    assert result.answers == {"call_t1": 1.0, "result_t1": 1.0}


async def test_logprobs_renormalised_and_usage_summed(respx_mock: respx.MockRouter) -> None:
    reply = letter_reply([("A", math.log(0.3)), ("B", math.log(0.1))])
    result, _ = await run(respx_mock, reply)
    assert result.answers == {"call_t1": pytest.approx(0.75), "result_t1": pytest.approx(0.75)}
    assert result.usage == {"prompt_tokens": 200, "completion_tokens": 2}
    assert result.model == "tev1-served" and result.requests == 2
    assert "authorization" not in (await run(respx_mock, reply))[1].calls[0].request.headers


async def test_letter_fallback(respx_mock: respx.MockRouter) -> None:
    result, _ = await run(respx_mock, {"choices": [{"message": {"content": " B "}}]})
    assert result.answers == {"call_t1": 0.0, "result_t1": 0.0}


async def test_json_schema_reply_is_parsed(respx_mock: respx.MockRouter) -> None:
    reply = {"choices": [{"message": {"content": '{"answer":"A"}'}}]}
    result, _ = await run(respx_mock, reply, constraint="json_schema")
    assert result.answers == {"call_t1": 1.0, "result_t1": 1.0}


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ({"choices": [{"message": {"content": "maybe so"}}]},
         "malformed judge response: answer is neither A nor B: 'maybe so'"),
        ({"choices": []}, "malformed judge response: no choices[0]"),
        ({"id": 1}, "malformed judge response: no choices[0]"),
    ],
)  # fmt: skip
async def test_malformed_replies(
    respx_mock: respx.MockRouter, reply: dict[str, Any], message: str
) -> None:
    result, _ = await run(respx_mock, reply)
    assert result.answers == {}
    assert [str(e) for e in result.errors] == [message, message]
    assert {e.question for e in result.errors} == {"call_t1", "result_t1"}


async def test_one_failed_question_leaves_the_others(respx_mock: respx.MockRouter) -> None:
    plan = make_plan(2)

    def reply(request: httpx.Request) -> httpx.Response:
        user = json.loads(json.loads(request.content)["messages"][1]["content"])
        if user["question"].startswith("The full output of tool call t2"):
            return httpx.Response(200, json={"choices": [{"message": {"content": "?"}}]})
        return httpx.Response(200, json=letter_reply([("A", 0.0)]))

    result, _ = await run(respx_mock, reply, plan)
    assert set(result.answers) == {"call_t1", "result_t1", "call_t2"}
    assert plan.decide(result.answers).actions == {"u1": "keep", "u2": "drop_result"}


async def test_concurrency_is_bounded(respx_mock: respx.MockRouter) -> None:
    live = peak = 0

    async def reply(request: httpx.Request) -> httpx.Response:
        nonlocal live, peak
        live += 1
        peak = max(peak, live)
        await asyncio.sleep(0.01)
        live -= 1
        return httpx.Response(200, json=letter_reply([("B", 0.0)], "B"))

    result, route = await run(respx_mock, reply, make_plan(5), concurrency=3)
    assert route.call_count == 10 and len(result.answers) == 10
    assert peak == 3


def test_urls_and_config() -> None:
    client = httpx.AsyncClient()
    assert (
        TevJudge(client=client, base_url="http://h/v1//").endpoint == "http://h/v1/chat/completions"
    )
    judge = make_judge("tev", client=client, url="http://h/v1", tev_constraint="none")
    assert (judge.kind, judge.model, judge.local) == ("tev", "tev1", False)
    with pytest.raises(JudgeConfigError):
        make_judge("tev", client=client)
