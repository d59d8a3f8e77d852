"""Taint survives any change of client identity while the store answers, through the gateway.

A request taints every identity it carries (each client session id, the `X-Factrail-Session`
value, the stable head) and is checked under all of them. Each walk sends a small transcript
with a fenced call, then, over a new gateway on the same store, later turns of the same head
without the call, each with some identity changed, added or dropped, pushed past the trigger:
they are compacted and a remote judge receives 0 requests. The controls: the same walk whose
first turn is clean reaches the judge, and so does an unrelated session (another head, other
ids) on the tainted store, so each zero is the fence's doing. Every walk runs on SQLite and on
Redis.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx
from fastapi.testclient import TestClient

from factrail.gateway.factory import create_app
from factrail.settings import Settings
from tests.redis_server import RedisServer

JUDGE_URL = "http://judge.invalid/v1/systemone"
OPENAI = "http://upstream.invalid/v1"
ANTHROPIC = "http://anthropic.invalid"
TRIGGER = 1500
ROUTES = {"chat": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}
FENCED = ("mcp__email-gateway__search", {"query": "invoices"})
CLEAN = ("Grep", {"pattern": "invoices"})
PLAIN = [("Bash", {"command": "ls"}), ("Read", {"file_path": "a.py"})]


@dataclass(frozen=True)
class Turn:
    """One request of a walk: the identities it carries (`None`: left out), whether the client
    trimmed its oldest turns (another first answer), and its first user message when it is
    another task (a subagent of the same client session: another head)."""

    header: str | None = None
    cache_key: str | None = None
    codex_header: str | None = None
    codex_metadata: str | None = None
    claude: str | None = None
    claude_json: bool = False
    trimmed: bool = False
    task: str | None = None


@dataclass(frozen=True)
class Walk:
    """A first request (the fenced call in it) and the later requests, all of one head."""

    fmt: str
    first: Turn
    later: tuple[Turn, ...]


def ids() -> tuple[str, str, str]:
    return str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())


A, B, C = ids()
WALKS = {
    "header-renamed": Walk("chat", Turn(header=A), (Turn(header=B),)),
    "header-added-to-anonymous": Walk("chat", Turn(), (Turn(header=A),)),
    "header-dropped": Walk("chat", Turn(header=A), (Turn(),)),
    "cache-key-changed": Walk("chat", Turn(cache_key=A), (Turn(cache_key=B),)),
    "cache-key-dropped": Walk("chat", Turn(cache_key=A), (Turn(),)),
    "header-added-then-cache-key-dropped-and-header-renamed": Walk(
        "chat", Turn(cache_key=A), (Turn(header=B, cache_key=A), Turn(header=C))
    ),
    "header-dropped-for-a-cache-key-then-header-added": Walk(
        "chat", Turn(header=A), (Turn(cache_key=B), Turn(cache_key=B, header=C))
    ),
    "cache-key-changed-then-a-subagent": Walk(
        "chat", Turn(cache_key=A), (Turn(cache_key=B), Turn(cache_key=B, task="Subtask."))
    ),
    "trimmed": Walk("chat", Turn(), (Turn(trimmed=True),)),
    "trimmed-and-named": Walk("chat", Turn(), (Turn(trimmed=True, header=A),)),
    "codex-session-changed": Walk(
        "responses",
        Turn(cache_key=A, codex_header=A),
        (Turn(cache_key=B, codex_header=B),),
    ),
    "codex-session-header-changed": Walk(
        "responses", Turn(codex_header=A), (Turn(codex_header=B, trimmed=True),)
    ),
    "codex-client-metadata-changed": Walk(
        "responses", Turn(codex_metadata=A), (Turn(codex_metadata=B),)
    ),
    "codex-ids-dropped-then-header-added": Walk(
        "responses",
        Turn(cache_key=A, codex_header=A, codex_metadata=A),
        (Turn(), Turn(header=B)),
    ),
    "claude-session-changed": Walk("anthropic", Turn(claude=A), (Turn(claude=B),)),
    "claude-session-changed-then-a-subagent": Walk(
        "anthropic", Turn(claude=A), (Turn(claude=B), Turn(claude=B, task="Explore the repo."))
    ),
    "claude-session-changed-to-json-user-id": Walk(
        "anthropic", Turn(claude=A), (Turn(claude=B, claude_json=True),)
    ),
    "claude-session-and-headers-changed": Walk(
        "anthropic",
        Turn(claude=A, codex_header=A, header=C),
        (Turn(claude=B, codex_header=B, header=B, trimmed=True),),
    ),
}


def _output(i: int) -> str:
    return "\n".join(f"out {i}.{j}: entry value {i * 1000 + j}" for j in range(40))


def _calls(fenced: bool, later: bool, turn: Turn) -> list[tuple[str, tuple[str, Any]]]:
    """(call id, call): a first turn of two calls, one of them `FENCED` (or `CLEAN`); a later
    turn of nine plain calls, past the trigger, the first of them the first turn's own unless
    the client trimmed it (another first answer)."""
    if not later:
        return [("c0", PLAIN[0]), ("c1", FENCED if fenced else CLEAN)]
    trimmed = turn.trimmed or turn.task is not None
    prefix = "t" if trimmed else "c"
    return [
        ("c0" if i == 0 and not trimmed else f"{prefix}{i + 1}", PLAIN[i % 2]) for i in range(9)
    ]


def chat_body(first: str, calls: list[tuple[str, tuple[str, Any]]]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": first},
    ]
    for i, (cid, (name, args)) in enumerate(calls):
        fn = {"name": name, "arguments": json.dumps(args)}
        call = {"id": f"call_{cid}", "type": "function", "function": fn}
        messages.append({"role": "assistant", "content": f"Step {cid}.", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{cid}", "content": _output(i)})
    messages.append({"role": "user", "content": "Carry on."})
    return {"model": "gpt-4o", "messages": messages}


def responses_body(first: str, calls: list[tuple[str, tuple[str, Any]]]) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": first}]}
    ]
    for i, (cid, (name, args)) in enumerate(calls):
        call_id = f"fc_{cid}"
        items.append(
            {
                "type": "function_call",
                "call_id": call_id,
                "name": name,
                "arguments": json.dumps(args),
            }
        )
        items.append({"type": "function_call_output", "call_id": call_id, "output": _output(i)})
    go = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]}
    return {"model": "gpt-5-codex", "instructions": "You are Codex.", "input": [*items, go]}


def anthropic_body(first: str, calls: list[tuple[str, tuple[str, Any]]]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
    for i, (cid, (name, args)) in enumerate(calls):
        use = {"type": "tool_use", "id": f"toolu_{cid}", "name": name, "input": args}
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "On it."}, use]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{cid}", "content": _output(i)}
        messages.append({"role": "user", "content": [result]})
    messages.append({"role": "assistant", "content": "Done so far."})
    messages.append({"role": "user", "content": "Carry on."})
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "system": "You are Claude Code.",
        "messages": messages,
    }


BUILDERS = {"chat": chat_body, "responses": responses_body, "anthropic": anthropic_body}


def request(
    fmt: str, first: str, turn: Turn, *, fenced: bool = True, later: bool = False
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one request of a walk."""
    body = BUILDERS[fmt](turn.task or first, _calls(fenced, later, turn))
    headers = {"content-type": "application/json"}
    if turn.header is not None:
        headers["x-factrail-session"] = turn.header
    if turn.cache_key is not None:
        body["prompt_cache_key"] = turn.cache_key
    if turn.codex_header is not None:
        name = "x-claude-code-session-id" if fmt == "anthropic" else "session_id"
        headers[name] = turn.codex_header
    if turn.codex_metadata is not None:
        body["client_metadata"] = {"session_id": turn.codex_metadata}
    if turn.claude is not None:
        user = (
            orjson.dumps({"device_id": "d" * 16, "session_id": turn.claude}).decode()
            if turn.claude_json
            else f"user_{'ab' * 32}_account__session_{turn.claude}"
        )
        body["metadata"] = {"user_id": user}
    return orjson.dumps(body), headers


@dataclass
class Gateway:
    """Gateways over one state store, with a remote judge route counting its requests."""

    tmp: Path
    state_url: str
    judge_requests: int = 0
    outcomes: list[str] = field(default_factory=list)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.judge_requests += 1
        questions = orjson.loads(request.content)["questions"]
        answers = {n: {"noul": 0.1 if n.startswith("result_") else 0.9} for n in questions}
        return httpx.Response(200, json={"answers": answers})

    @contextmanager
    def running(self) -> Iterator[TestClient]:
        router = respx.MockRouter(assert_all_called=False)
        router.post(JUDGE_URL).mock(side_effect=self._answer)
        ok = {"choices": [], "usage": {"prompt_tokens": 1}}
        router.post(f"{OPENAI}/chat/completions").mock(return_value=httpx.Response(200, json=ok))
        nothing = {"input_tokens": 0}
        response = {"id": "resp_1", "object": "response", "output": [], "usage": nothing}
        router.post(f"{OPENAI}/responses").mock(return_value=httpx.Response(200, json=response))
        message = {"id": "msg_1", "type": "message", "content": [], "usage": nothing}
        router.post(f"{ANTHROPIC}/v1/messages").mock(return_value=httpx.Response(200, json=message))
        config = Settings(
            upstream_url=OPENAI,
            anthropic_upstream_url=ANTHROPIC,
            trigger_tokens=TRIGGER,
            trigger_percent=0,
            rearm_tokens=0,
            judge="systemone",
            judge_url=JUDGE_URL,
            judge_api_key="jk-" + "Qx5" * 10,  # type: ignore[arg-type]
            judge_local=False,
            outputs_dir=str(self.tmp / "outputs"),
            state_url=self.state_url,
            price_profile="none",
        )
        client = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
        with TestClient(create_app(config, client=client)) as gateway:
            yield gateway

    def send(self, gateway: TestClient, fmt: str, content: bytes, headers: dict[str, str]) -> None:
        r = gateway.post(ROUTES[fmt], content=content, headers=headers)
        assert r.status_code == 200, r.text
        self.outcomes.append(r.headers["x-factrail"])


def walk(gateway: Gateway, walk: Walk, *, fenced: bool) -> list[int]:
    """The judge requests each later turn of `walk` made (its first turn holds the fenced call,
    or a clean one), each of them compacted."""
    first = f"Tidy up the inbox integration ({uuid.uuid4().hex[:8]})."
    with gateway.running() as g:
        gateway.send(g, walk.fmt, *request(walk.fmt, first, walk.first, fenced=fenced))
    assert gateway.judge_requests == 0 and gateway.outcomes == ["passthrough"]
    asked = []
    with gateway.running() as g:  # a new gateway: the store alone carries the taint
        for turn in walk.later:
            before = gateway.judge_requests
            gateway.send(g, walk.fmt, *request(walk.fmt, first, turn, later=True))
            asked.append(gateway.judge_requests - before)
    assert gateway.outcomes[1:] == ["compacted"] * len(walk.later)
    return asked


@pytest.fixture(params=["sqlite", "redis"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    server: RedisServer = request.getfixturevalue("redis_server")
    return f"{server.url}?prefix=fi{uuid.uuid4().hex[:8]}:"


@pytest.mark.parametrize("name", WALKS)
def test_taint_survives_every_change_of_identity(name: str, tmp_path: Path, state_url: str) -> None:
    gateway = Gateway(tmp_path, state_url)
    assert walk(gateway, WALKS[name], fenced=True) == [0] * len(WALKS[name].later)
    # An unrelated clean session on the same store (another head, other ids) is judged.
    unrelated = Turn(header=str(uuid.uuid4()), cache_key=str(uuid.uuid4()))
    fmt = WALKS[name].fmt
    with gateway.running() as g:
        gateway.send(g, fmt, *request(fmt, "Another task.", unrelated, fenced=False, later=True))
    assert gateway.outcomes[-1] == "compacted" and gateway.judge_requests > 0


@pytest.mark.parametrize("name", WALKS)
def test_the_same_walk_from_a_clean_start_reaches_the_judge(
    name: str, tmp_path: Path, state_url: str
) -> None:
    """The control: each zero above is the fence's, not the walk's."""
    assert all(walk(Gateway(tmp_path, state_url), WALKS[name], fenced=False))


def with_compaction_block(content: bytes) -> bytes:
    """An Anthropic request going on from the provider's compaction: its block after the first
    user message, so the head is the same while the turns before the block were not seen."""
    body = orjson.loads(content)
    block = {"type": "compaction", "content": "The agent tidied the inbox.", "signature": "s"}
    compacted = [{"role": "assistant", "content": [block]}, {"role": "user", "content": "Go on."}]
    body["messages"] = [body["messages"][0], *compacted, *body["messages"][1:]]
    return orjson.dumps(body)


@pytest.mark.parametrize("continued", [True, False])
@pytest.mark.parametrize("first", [Turn(header=A), Turn()], ids=["named", "anonymous"])
def test_a_named_session_never_borrows_a_heads_proof(
    first: Turn, continued: bool, tmp_path: Path
) -> None:
    """Another session that shares a clean head seen from its start proves nothing about a
    named one going on from turns factrail did not see: it is judged as if tainted (without
    the provider's compaction, the control, it is judged)."""
    gateway = Gateway(tmp_path, f"sqlite:///{tmp_path / 'state.db'}")
    task = f"Tidy up the inbox integration ({uuid.uuid4().hex[:8]})."
    with gateway.running() as g:
        gateway.send(g, "anthropic", *request("anthropic", task, first, fenced=False))
        content, headers = request("anthropic", task, Turn(header=B), later=True)
        gateway.send(
            g, "anthropic", with_compaction_block(content) if continued else content, headers
        )
    assert gateway.outcomes == ["passthrough", "compacted"]
    assert gateway.judge_requests == (0 if continued else 1)
