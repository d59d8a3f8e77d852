"""The taint fence, end to end: a fenced transcript never reaches a judge not declared local.

Property: for any small transcript past a small trigger with at least one fenced call, a remote
(non-local) model judge's transport sees zero requests — through `SessionCompactor`, through
`factrail compact` and through the gateway app. The same transcript with the judge declared
local IS asked, which proves each path would have reached the judge.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import respx
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factrail.cli import main
from factrail.core.formats import openai_chat
from factrail.gateway.factory import create_app
from factrail.judges import SystemOneJudge
from factrail.session import SessionCompactor
from factrail.settings import Settings
from factrail.stores.memory_state import MemoryStateStore
from tests.options import engine_options

JUDGE_URL = "http://judge.invalid/v1/systemone"
UPSTREAM = "http://upstream.invalid/v1"
TRIGGER = 1500
KEY_ENV = "FENCE_TEST_JUDGE_KEY"
EXAMPLES = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

PLAIN_TOOLS = ["Bash", "Read", "Grep", "mcp__github__search", "mcp__email_gatewayx__y", "Skill"]
FENCED_PREFIXES = ["mcp__email-gateway__", "mcp__claude_ai_Gmail__"]
FENCED_SKILLS = ["email-search", "plugin:email-search", "acme-tools:email-search"]


def judge_key() -> str:
    return "jk-" + "Fe9" * 10


@st.composite
def fenced_call(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A fenced tool call: a fenced MCP prefix, or a `Skill` call loading `email-search`."""
    if draw(st.booleans()):
        suffix = draw(st.sampled_from(["search_threads", "send", "read_message", "x"]))
        return draw(st.sampled_from(FENCED_PREFIXES)) + suffix, {"query": "invoices"}
    field = draw(st.sampled_from(["skill", "name"]))
    return "Skill", {field: draw(st.sampled_from(FENCED_SKILLS))}


@st.composite
def plain_call(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    tool = draw(st.sampled_from(PLAIN_TOOLS))
    if tool == "Skill":
        return tool, {"skill": draw(st.sampled_from(["pdf", "email-searcher", "search"]))}
    return tool, {"command": f"run {draw(st.integers(0, 999))}"}


@st.composite
def fenced_transcripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """OpenAI chat with 8-12 calls past the trigger, at least one of them fenced."""
    calls = draw(st.lists(plain_call(), min_size=7, max_size=11))
    fenced = draw(st.lists(fenced_call(), min_size=1, max_size=2))
    for call in fenced:
        calls.insert(draw(st.integers(0, len(calls))), call)
    return transcript(calls, draw(st.integers(25, 45)))


def transcript(calls: list[tuple[str, dict[str, Any]]], lines: int) -> list[dict[str, Any]]:
    """A chat transcript with one assistant call and one tool output of `lines` lines per call."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Tidy up the inbox integration."},
    ]
    for i, (tool, args) in enumerate(calls):
        cid = f"call_{i}"
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {i}.",
                "tool_calls": [{"id": cid, "type": "function",
                                "function": {"name": tool, "arguments": json.dumps(args)}}],
            }
        )  # fmt: skip
        text = "\n".join(f"out {i}.{j}: entry value {i * 1000 + j}" for j in range(lines))
        messages.append({"role": "tool", "tool_call_id": cid, "content": text})
    messages.append({"role": "user", "content": "Carry on."})
    return messages


def answer_all(request: httpx.Request) -> httpx.Response:
    """A System One reply answering every question: keep the call, reduce the output."""
    questions = orjson.loads(request.content)["questions"]
    answers = {n: {"noul": 0.1 if n.startswith("result_") else 0.9} for n in questions}
    return httpx.Response(200, json={"answers": answers})


class CountingTransport(httpx.AsyncBaseTransport):
    """Counts every request and answers it like a System One endpoint."""

    def __init__(self) -> None:
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        await request.aread()
        return answer_all(request)


async def compact_with(messages: list[dict[str, Any]], *, local: bool) -> tuple[int, str]:
    """Judge requests sent and the verdict, for one compaction through `SessionCompactor`."""
    transport = CountingTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        judge = SystemOneJudge(
            client=client, url=JUDGE_URL, api_key=None if local else judge_key(), local=local
        )
        compactor = SessionCompactor(
            engine_options(trigger_tokens=TRIGGER, trigger_percent=0.0, rearm_tokens=0),
            state=MemoryStateStore(),
            outputs=None,
            judge=judge,
        )
        result = await compactor.compact("s", openai_chat.parse(messages))
    assert result.outcome == "compacted"
    return transport.requests, result.reason


@EXAMPLES
@given(fenced_transcripts())
def test_session_compactor_never_asks_a_remote_judge_about_a_fenced_session(
    messages: list[dict[str, Any]],
) -> None:
    assert asyncio.run(compact_with(messages, local=False)) == (0, "tainted")
    asked, reason = asyncio.run(compact_with(messages, local=True))
    assert asked > 0 and reason == "ok-local"


def run_cli(messages: list[dict[str, Any]], *, local: bool) -> tuple[int, list[Any]]:
    """Judge requests seen and the compacted transcript, for one `factrail compact` run."""
    with tempfile.TemporaryDirectory() as tmp, respx.mock(assert_all_called=False) as mock:
        route = mock.post(JUDGE_URL).mock(side_effect=answer_all)
        src, out = Path(tmp) / "t.json", Path(tmp) / "out.json"
        src.write_text(json.dumps({"messages": messages}), encoding="utf-8")
        argv = ["compact", str(src), "--out", str(out), "--trigger-tokens", str(TRIGGER),
                "--judge", "systemone", "--judge-url", JUDGE_URL,
                "--judge-key-env", KEY_ENV]  # fmt: skip
        assert main([*argv, "--local"] if local else argv) == 0
        written = json.loads(out.read_text(encoding="utf-8"))
        return route.call_count, written["messages"]


@EXAMPLES
@given(fenced_transcripts())
def test_factrail_compact_never_asks_a_remote_judge_about_a_fenced_session(
    monkeypatch: Any, messages: list[dict[str, Any]]
) -> None:
    monkeypatch.setenv(KEY_ENV, judge_key())
    monkeypatch.setenv("FACTRAIL_MIN_CUT_CHARS", "0")  # its results are a few hundred chars
    asked, out = run_cli(messages, local=False)
    assert asked == 0
    assert len(out) == len(messages) and out != messages
    asked, _ = run_cli(messages, local=True)
    assert asked > 0


def run_gateway(
    messages: list[dict[str, Any]], *, local: bool, tmp: Path, taint_tools: tuple[str, ...] = ()
) -> tuple[int, str]:
    """Judge requests seen and the `x-factrail` outcome, for one request through the gateway."""
    router = respx.MockRouter(assert_all_called=False)
    judge_route = router.post(JUDGE_URL).mock(side_effect=answer_all)
    router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json={"choices": [], "usage": {"prompt_tokens": 1}})
    )
    config = Settings(
        upstream_url=UPSTREAM,
        trigger_tokens=TRIGGER,
        rearm_tokens=0,
        min_cut_chars=0,  # its results are a few hundred chars
        judge="systemone",
        judge_url=JUDGE_URL,
        judge_api_key=judge_key(),  # type: ignore[arg-type]
        judge_local=local,
        outputs_dir=str(tmp / "outputs"),
        state_url="memory://",
        taint_tools=taint_tools or Settings.model_fields["taint_tools"].default,
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    with TestClient(create_app(config, client=client)) as gateway:
        r = gateway.post(
            "/v1/chat/completions",
            json={"model": "gpt-4o", "messages": messages},
            headers={"x-factrail-session": uuid.uuid4().hex},
        )
    assert r.status_code == 200
    return judge_route.call_count, r.headers["x-factrail"]


@EXAMPLES
@given(fenced_transcripts())
def test_the_gateway_never_asks_a_remote_judge_about_a_fenced_session(
    tmp_path: Path, messages: list[dict[str, Any]]
) -> None:
    assert run_gateway(messages, local=False, tmp=tmp_path) == (0, "compacted")
    asked, outcome = run_gateway(messages, local=True, tmp=tmp_path)
    assert asked > 0 and outcome == "compacted"


def test_without_a_fenced_call_the_remote_judge_is_asked(monkeypatch: Any, tmp_path: Path) -> None:
    """The control: the zero above is the fence's doing, not a judge that is never asked."""
    plain = transcript([("Bash", {"command": f"ls {i}"}) for i in range(10)], 35)
    monkeypatch.setenv(KEY_ENV, judge_key())
    asked, reason = asyncio.run(compact_with(plain, local=False))
    assert asked > 0 and reason == "ok"
    assert run_cli(plain, local=False)[0] > 0
    assert run_gateway(plain, local=False, tmp=tmp_path)[0] > 0


def test_an_operator_prefix_adds_to_the_default_fence(tmp_path: Path) -> None:
    email = transcript([(FENCED_PREFIXES[0] + "send", {}), *[("Bash", {})] * 9], 35)
    slack = transcript([("mcp__slack__post", {}), *[("Bash", {})] * 9], 35)
    extra = ("mcp__slack__",)
    assert run_gateway(email, local=False, tmp=tmp_path, taint_tools=extra)[0] == 0
    assert run_gateway(slack, local=False, tmp=tmp_path, taint_tools=extra)[0] == 0
    assert run_gateway(slack, local=False, tmp=tmp_path)[0] > 0
