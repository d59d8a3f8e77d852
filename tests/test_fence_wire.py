"""The fence fails closed, through the gateway, for every spelling of a fenced name in every wire
format, across restarts, new session headers, the client's own compaction and store faults.

Property: for any spelling a generator can make of a fenced tool, MCP server or skill (case,
`-`/`_`, `mcp__s__t`, `s__t`, plugin-qualified, `mcp_tool_use.server_name`,
`mcp_call.server_label`, `Skill` with `skill`/`name`/`command`, slash forms, `\\u` escapes in
the raw body), sent as OpenAI chat, Anthropic Messages or Responses, and any lifecycle
(one request; a restart then the client's own compaction; a new session header; a wiped
store; a failing store; a client that names no session trimming its oldest turns, or going on
from the provider's compaction, or from history the provider keeps), a judge not declared local
receives 0 requests. The control: the same
scenario with the judge declared local reaches it, so the zero is the fence's doing.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factrail.gateway.factory import create_app
from factrail.settings import Settings
from factrail.stores.sqlite_state import SqliteStateStore

JUDGE_URL = "http://judge.invalid/v1/systemone"
OPENAI = "http://upstream.invalid/v1"
ANTHROPIC = "http://anthropic.invalid"
TRIGGER = 1500
FORMATS = ("chat", "anthropic", "responses")
LIFECYCLES = (
    "once", "restart", "new-header", "wiped", "failing", "trimmed", "provider-compacted", "kept"
)  # fmt: skip
ANONYMOUS = ("trimmed", "provider-compacted", "kept")
"""Lifecycles of a client that names no session."""
MESSAGE_ID = "msg_kept"
RESPONSE_ID = "resp_kept"
CONTINUED = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The conversation is summarized below: the agent tidied the inbox integration."
)
EXAMPLES = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass(frozen=True)
class Call:
    """One call as a wire format writes it: a tool name, its arguments, and the MCP server
    when it is named beside the tool (`mcp_tool_use`, `mcp_call`)."""

    name: str
    args: dict[str, Any]
    server: str | None = None
    command: str | None = None
    """A slash command typed in a user turn instead of a call."""


def judge_key() -> str:
    return "jk-" + "Wi7" * 10


@st.composite
def mangled(draw: st.DrawFn, name: str) -> str:
    """`name` with any letter's case flipped and any `-`/`_` swapped."""
    out = []
    for ch in name:
        if ch in "-_":
            out.append(draw(st.sampled_from("-_")))
        elif ch.isalpha() and draw(st.booleans()):
            out.append(ch.swapcase())
        else:
            out.append(ch)
    return "".join(out)


@st.composite
def fenced_calls(draw: st.DrawFn) -> Call:
    """A spelling of a call of the default fence: the e-mail gateway or Gmail MCP server, or
    the email-search skill."""
    if draw(st.booleans()):
        server = draw(mangled(draw(st.sampled_from(["email-gateway", "claude_ai_Gmail"]))))
        tool = draw(st.sampled_from(["search_threads", "send", "x"]))
        form = draw(st.sampled_from(["mcp", "bare", "plugin", "beside"]))
        if form == "beside":
            return Call(tool, {"q": "invoices"}, server=server)
        name = {
            "mcp": f"mcp__{server}__{tool}",
            "bare": f"{server}__{tool}",
            "plugin": f"mcp__plugin_mail_{server}__{tool}",
        }[form]
        return Call(draw(mangled(name)) if form != "bare" else name, {"q": "invoices"})
    skill = draw(mangled("email-search"))
    value = draw(
        st.sampled_from([skill, f"/{skill}", f"agentbox:{skill}", f"/{skill} find invoices"])
    )
    form = draw(st.sampled_from(["skill", "name", "command", "as-tool", "slash"]))
    if form == "as-tool":
        return Call(skill, {})
    if form == "slash":
        return Call("", {}, command=value if value.startswith("/") else "/" + value)
    return Call(draw(mangled("Skill")), {form: value})


PLAIN = [Call("Bash", {"command": "ls"}), Call("Read", {"file_path": "a.py"})]


def _output(i: int) -> str:
    return "\n".join(f"out {i}.{j}: entry value {i * 1000 + j}" for j in range(40))


def chat_body(calls: list[Call], first: str, client: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": first},
    ]
    for i, call in enumerate(calls):
        if call.command:
            messages.append({"role": "user", "content": call.command})
            continue
        cid = f"call_{i}"
        fn = {"name": call.name, "arguments": json.dumps(call.args)}
        messages.append(
            {"role": "assistant", "content": f"Step {i}.",
             "tool_calls": [{"id": cid, "type": "function", "function": fn}]}
        )  # fmt: skip
        messages.append({"role": "tool", "tool_call_id": cid, "content": _output(i)})
    messages.append({"role": "user", "content": "Carry on."})
    return {"model": "gpt-4o", "messages": messages, "prompt_cache_key": client}


def anthropic_body(calls: list[Call], first: str, client: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
    for i, call in enumerate(calls):
        if call.command:
            text = f"<command-name>{call.command.split()[0]}</command-name>"
            messages.append({"role": "assistant", "content": "Ready."})
            messages.append({"role": "user", "content": text})
            continue
        tid = f"toolu_{i:04d}"
        if call.server is not None:
            use = {
                "type": "mcp_tool_use",
                "id": tid,
                "name": call.name,
                "server_name": call.server,
                "input": call.args,
            }
            done = {
                "type": "mcp_tool_result",
                "tool_use_id": tid,
                "content": [{"type": "text", "text": "3 threads"}],
            }
            messages.append({"role": "assistant", "content": [use, done]})
            messages.append({"role": "user", "content": "Go on."})
            continue
        use = {"type": "tool_use", "id": tid, "name": call.name, "input": call.args}
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "On it."}, use]})
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tid, "content": _output(i)}],
            }
        )
    messages.append({"role": "assistant", "content": "Done so far."})
    messages.append({"role": "user", "content": "Carry on."})
    user_id = f"user_{'ab' * 32}_account__session_{client}"
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "system": "You are Claude Code.",
        "metadata": {"user_id": user_id},
        "messages": messages,
    }


def responses_body(calls: list[Call], first: str, client: str) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": first}]}
    ]
    for i, call in enumerate(calls):
        if call.command:
            items.append(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": call.command}],
                }
            )
            continue
        cid = f"fc_{i}"
        if call.server is not None:
            items.append(
                {
                    "type": "mcp_call",
                    "id": f"mcp_{i}",
                    "name": call.name,
                    "server_label": call.server,
                    "arguments": json.dumps(call.args),
                    "output": "3 threads",
                }
            )
            continue
        items.append(
            {
                "type": "function_call",
                "call_id": cid,
                "name": call.name,
                "arguments": json.dumps(call.args),
            }
        )
        items.append({"type": "function_call_output", "call_id": cid, "output": _output(i)})
    items.append(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]}
    )
    return {"model": "gpt-4o", "input": items, "prompt_cache_key": client}


ROUTES = {"chat": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}


def build(fmt: str, calls: list[Call], first: str, client: str) -> dict[str, Any]:
    if fmt == "chat":
        return chat_body(calls, first, client)
    if fmt == "anthropic":
        return anthropic_body(calls, first, client)
    return responses_body(calls, first, client)


def escaped(body: dict[str, Any], call: Call) -> bytes:
    """The body as bytes with the fenced name's letters written as JSON `\\u` escapes."""
    raw = orjson.dumps(body)
    name = call.server or call.name or (call.command or "").lstrip("/").split()[0]
    if not name:
        return raw
    target = orjson.dumps(name)[1:-1]
    escape = "".join(f"\\u{ord(c):04x}" if c.isalpha() else c for c in name).encode()
    return raw.replace(target, escape)


@dataclass
class Gateway:
    """Gateways built over one state database, with a judge route counting its requests."""

    tmp: Path
    local: bool
    judge_requests: int = 0

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
        nothing = {"input_tokens": 0}  # read (with the answer's id) but calibrates nothing
        response = {"id": RESPONSE_ID, "object": "response", "output": [], "usage": nothing}
        router.post(f"{OPENAI}/responses").mock(return_value=httpx.Response(200, json=response))
        message = {"id": MESSAGE_ID, "type": "message", "content": [], "usage": nothing}
        router.post(f"{ANTHROPIC}/v1/messages").mock(return_value=httpx.Response(200, json=message))
        config = Settings(
            upstream_url=OPENAI,
            anthropic_upstream_url=ANTHROPIC,
            trigger_tokens=TRIGGER,
            trigger_percent=0,
            rearm_tokens=0,
            judge="systemone",
            judge_url=JUDGE_URL,
            judge_api_key=judge_key(),  # type: ignore[arg-type]
            judge_local=self.local,
            outputs_dir=str(self.tmp / "outputs"),
            state_url=f"sqlite:///{self.tmp / 'state.db'}",
            price_profile="none",
        )
        client = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
        with TestClient(create_app(config, client=client)) as gateway:
            yield gateway


def anonymous(body: dict[str, Any]) -> dict[str, Any]:
    """The body as a client that names no session sends it (no `prompt_cache_key`, no
    `metadata.user_id`): factrail keys it by its head and its first answer."""
    return {k: v for k, v in body.items() if k not in ("prompt_cache_key", "metadata")}


def trimmed(body: dict[str, Any]) -> bytes:
    """The body of a later turn of a client that drops its oldest turns: the same head, the
    fenced call gone, another first answer (every call id renamed)."""
    raw = orjson.dumps(anonymous(body))
    for prefix in (b'"call_', b'"fc_', b'"toolu_'):
        raw = raw.replace(prefix, prefix + b"t")
    return raw


def provider_compacted(fmt: str, body: dict[str, Any]) -> dict[str, Any]:
    """A later turn of a client that names no session, after the provider's compaction: the
    provider's summary in place of the messages before (chat has none: the client's own)."""
    if fmt == "anthropic":
        block = {"type": "compaction", "content": "The agent tidied the inbox.", "signature": "s"}
        messages = [{"role": "assistant", "content": [block]}, *body["messages"][1:]]
        return {**anonymous(body), "messages": messages}
    if fmt == "responses":
        item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"}
        return {**anonymous(body), "input": [item, *body["input"][1:]]}
    return anonymous(body)


def kept(fmt: str, body: dict[str, Any]) -> bytes:
    """A later turn of a client that names no session and lets the provider keep its history
    (an Anthropic thread, a Responses chain): only the new turns are sent, their calls new
    (chat keeps none: the whole transcript)."""
    if fmt == "anthropic":
        thread = {"type": "continue", "previous_message_id": MESSAGE_ID}
        later = {**anonymous(body), "messages": body["messages"][1:], "thread": thread}
    elif fmt == "responses":
        later = {**anonymous(body), "input": body["input"][1:], "previous_response_id": RESPONSE_ID}
    else:
        later = anonymous(body)
    raw = orjson.dumps(later)
    for prefix in (b'"call_', b'"fc_', b'"toolu_'):
        raw = raw.replace(prefix, prefix + b"k")
    return raw


def send(gateway: TestClient, fmt: str, content: bytes, header: str | None) -> str:
    headers = {"content-type": "application/json"}
    if header is not None:
        headers["x-factrail-session"] = header
    r = gateway.post(ROUTES[fmt], content=content, headers=headers)
    assert r.status_code == 200, r.text
    return r.headers["x-factrail"]


def run(tmp: Path, fmt: str, call: Call, lifecycle: str, slot: int, local: bool) -> int:
    """Judge requests over one lifecycle: first the transcript with the fenced call, then (for
    every lifecycle but `once`) the client's own compaction of it, without the call."""
    gateway = Gateway(tmp / uuid.uuid4().hex, local)
    gateway.tmp.mkdir()
    client = str(uuid.uuid4())
    calls = [PLAIN[i % 2] for i in range(8)]
    calls.insert(slot % (len(calls) + 1), call)
    first = f"Tidy up the inbox integration ({client[:8]})."
    header: str | None = "h-" + client
    built = build(fmt, calls, first, client)
    if lifecycle in ANONYMOUS:
        built, header = anonymous(built), None
    if lifecycle == "kept" and fmt == "anthropic":
        built["thread"] = {"type": "create"}
    body = escaped(built, call)
    if lifecycle == "failing":
        with failing_store(), gateway.running() as g:
            send(g, fmt, body, header)
        return gateway.judge_requests
    with gateway.running() as g:
        send(g, fmt, body, header)
    if lifecycle == "once":
        return gateway.judge_requests
    if lifecycle in ANONYMOUS:
        clean = build(fmt, [PLAIN[i % 2] for i in range(9)], first, client)
        later = {
            "trimmed": trimmed(clean),
            "provider-compacted": orjson.dumps(provider_compacted(fmt, clean)),
            "kept": kept(fmt, clean),
        }[lifecycle]
        with gateway.running() as g:
            send(g, fmt, later, None)
        return gateway.judge_requests
    if lifecycle == "wiped":
        for path in gateway.tmp.glob("state.db*"):
            path.unlink()
    # The client compacted its transcript: a summary first, then new clean calls; its own
    # session id stays (the head, and so the hashed key, changes).
    later = build(fmt, [PLAIN[i % 2] for i in range(9)], CONTINUED, client)
    if lifecycle == "new-header":
        header = "h-" + uuid.uuid4().hex
    with gateway.running() as g:
        send(g, fmt, orjson.dumps(later), header)
    return gateway.judge_requests


@contextmanager
def failing_store() -> Iterator[None]:
    """Every state store operation fails as a broken disk would."""
    original = SqliteStateStore._connect

    def broken(self: SqliteStateStore) -> sqlite3.Connection:
        raise sqlite3.OperationalError("disk I/O error")

    SqliteStateStore._connect = broken  # type: ignore[method-assign]
    try:
        yield
    finally:
        SqliteStateStore._connect = original  # type: ignore[method-assign]


@EXAMPLES
@given(
    call=fenced_calls(),
    fmt=st.sampled_from(FORMATS),
    lifecycle=st.sampled_from(LIFECYCLES),
    slot=st.integers(0, 8),
)
def test_a_remote_judge_never_sees_a_fenced_session(
    tmp_path: Path, call: Call, fmt: str, lifecycle: str, slot: int
) -> None:
    assert run(tmp_path, fmt, call, lifecycle, slot, local=False) == 0


@pytest.mark.parametrize("lifecycle", LIFECYCLES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_local_judge_is_asked_in_the_same_scenarios(
    tmp_path: Path, fmt: str, lifecycle: str
) -> None:
    """The control: declared local, the judge is reached (the zero above is the fence's)."""
    call = Call("mcp__email-gateway__send", {"to": "a"})
    assert run(tmp_path, fmt, call, lifecycle, 3, local=True) > 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_clean_session_seen_from_its_start_reaches_the_remote_judge(
    tmp_path: Path, fmt: str
) -> None:
    """Fail closed, not shut: a session factrail saw from its start is proven clean, also after
    the client's own compaction (its session id carries the proof)."""
    clean = Call("Grep", {"pattern": "inbox"})
    assert run(tmp_path, fmt, clean, "once", 3, local=False) > 0
    asked = run(tmp_path, fmt, clean, "restart", 3, local=False)
    assert asked > 0


@pytest.mark.parametrize("fmt", ["anthropic"])
def test_a_clean_session_the_provider_keeps_reaches_the_remote_judge(
    tmp_path: Path, fmt: str
) -> None:
    """The request going on from a thread factrail saw start is of that session, so it is
    proven clean; one going on from the provider's compaction cannot be."""
    clean = Call("Grep", {"pattern": "inbox"})
    first_only = run(tmp_path, fmt, clean, "once", 3, local=False)
    assert run(tmp_path, fmt, clean, "kept", 3, local=False) > first_only
    assert run(tmp_path, fmt, clean, "provider-compacted", 3, local=False) == first_only


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("lifecycle", ["wiped", "failing"])
def test_an_unprovable_clean_session_is_judged_by_the_rules(
    tmp_path: Path, fmt: str, lifecycle: str
) -> None:
    """A clean session whose proof is gone (wiped store before the client's compaction, or a
    failing store) is treated as tainted."""
    clean = Call("Grep", {"pattern": "inbox"})
    with_judge_after_first = run(tmp_path, fmt, clean, lifecycle, 3, local=False)
    first_only = run(tmp_path, fmt, clean, "once", 3, local=False)
    expected = 0 if lifecycle == "failing" else first_only
    assert with_judge_after_first == expected
