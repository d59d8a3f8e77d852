"""What leaves the process: no result content, no credential, no argument under metadata."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from factrail.core.model import Message, ToolResult, ToolUse
from factrail.core.plan import JudgeRequest, build_plan
from factrail.judges import SystemOneJudge, TevJudge, make_judge
from tests.leaks import new_family_leaks
from tests.options import plan_options

S1_URL = "https://judge.example/v1/systemone"
TEV_BASE = "http://tev.example:8000/v1/"
RESULT = "RESULT-SENTINEL-42ab"
ARG = "ARG-SENTINEL-77cd"
JUDGE_KEY = "jk-" + "Z9y8" * 6
USER_KEY = "sk-" + "proj-" + "A1b2" * 8
GH_TOKEN = "gh" + "p_" + "Q7w" * 10
LEAKS = new_family_leaks()
"""Secrets of the newer families (Azure, redis, `DB_PASS=`, `whsec_`, `curl -u`…), one a line."""


def requests_for(egress: str = "full") -> list[JudgeRequest]:
    msgs = [
        Message(
            "user",
            f"fix it; my key is {USER_KEY}, the judge's is {JUDGE_KEY}\n"
            + "\n".join(line for line, _, _ in LEAKS),
        ),
        Message(
            "assistant",
            "reading",
            tool_uses=[ToolUse("u1", "Bash", {"command": f"curl -H 'x: {GH_TOKEN}' {ARG}"})],
        ),
        Message("user", tool_results=[ToolResult("u1", f"{RESULT} {USER_KEY} {JUDGE_KEY}")]),
        Message("assistant", "", tool_uses=[ToolUse("u2", "Read", {"file_path": f"/x/{ARG}"})]),
        Message("user", tool_results=[ToolResult("u2", RESULT * 3)]),
        Message("assistant", "done"),
        Message("user", "thanks"),
        Message("assistant", "bye"),
    ]
    options = plan_options(preserve_recent=2, egress=egress)  # type: ignore[arg-type]
    return build_plan(msgs, options, {}, set()).requests


def assert_clean(bodies: list[bytes], egress: str) -> None:
    assert bodies
    for raw in bodies:
        text = raw.decode()
        for secret in (RESULT, JUDGE_KEY, USER_KEY, GH_TOKEN, *(s for _, s, _ in LEAKS)):
            assert secret not in text
        assert (ARG in text) == (egress == "full")
    assert any("[REDACTED:known]" in b.decode() for b in bodies)


@pytest.mark.parametrize("egress", ["full", "metadata"])
async def test_system_one_sends_nothing_it_must_not(
    egress: str, respx_mock: respx.MockRouter
) -> None:
    answers = {n: {"noul": 0.5} for r in requests_for() for n in r.questions}
    route = respx_mock.post(S1_URL).mock(
        return_value=httpx.Response(200, json={"answers": answers})
    )
    async with httpx.AsyncClient() as client:
        judge = SystemOneJudge(client=client, url=S1_URL, api_key=JUDGE_KEY)
        result = await judge.ask(requests_for(egress), deadline=_far())
    assert result.errors == [] and len(result.answers) == 4
    assert result.redacted >= 3
    assert_clean([c.request.content for c in route.calls], egress)
    assert all(c.request.headers["authorization"] == f"Bearer {JUDGE_KEY}" for c in route.calls)


@pytest.mark.parametrize("egress", ["full", "metadata"])
async def test_tev_sends_nothing_it_must_not(egress: str, respx_mock: respx.MockRouter) -> None:
    reply = {"choices": [{"message": {"content": "A"}}]}
    route = respx_mock.post("http://tev.example:8000/v1/chat/completions").mock(
        return_value=httpx.Response(200, json=reply)
    )
    async with httpx.AsyncClient() as client:
        judge = TevJudge(client=client, base_url=TEV_BASE, api_key=JUDGE_KEY)
        result = await judge.ask(requests_for(egress), deadline=_far())
    assert len(route.calls) == 4 and len(result.answers) == 4
    assert_clean([c.request.content for c in route.calls], egress)
    user = json.loads(route.calls[0].request.content)["messages"][1]["content"]
    state = json.loads(user)["state"]
    assert "[REDACTED:sk-proj]" in state
    for _, _, family in LEAKS:  # sent, and masked under its family
        assert f"[REDACTED:{family}]" in state


async def test_keyless_local_facade_gets_no_authorization(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(S1_URL).mock(return_value=httpx.Response(200, json={"answers": {}}))
    async with httpx.AsyncClient() as client:
        judge = make_judge("systemone", client=client, url=S1_URL, local=True)
        await judge.ask(requests_for(), deadline=_far())
    assert "authorization" not in route.calls[0].request.headers


async def test_the_key_never_follows_a_redirect(respx_mock: respx.MockRouter) -> None:
    respx_mock.post(S1_URL).mock(
        return_value=httpx.Response(307, headers={"location": "https://evil.example/grab"})
    )
    evil = respx_mock.post("https://evil.example/grab").mock(return_value=httpx.Response(200))
    async with httpx.AsyncClient(follow_redirects=True) as client:
        judge = SystemOneJudge(client=client, url=S1_URL, api_key=JUDGE_KEY)
        result = await judge.ask(requests_for(), deadline=_far())
    assert not evil.called
    assert [e.kind for e in result.errors] == ["status"]
    assert result.answers == {}


async def test_status_bodies_are_redacted_and_cut(respx_mock: respx.MockRouter) -> None:
    body = f"bad key {JUDGE_KEY} " + "x" * 500
    respx_mock.post(S1_URL).mock(return_value=httpx.Response(401, text=body))
    async with httpx.AsyncClient() as client:
        judge = SystemOneJudge(client=client, url=S1_URL, api_key=JUDGE_KEY)
        result = await judge.ask(requests_for(), deadline=_far())
    message = str(result.errors[0])
    assert message.startswith("judge answered HTTP 401: bad key [REDACTED:known] xxx")
    assert JUDGE_KEY not in message
    assert len(message) == len("judge answered HTTP 401: ") + 200


def _far() -> float:
    import time

    return time.monotonic() + 30
