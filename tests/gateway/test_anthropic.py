"""The Anthropic Messages route against respx upstreams: forwarding, compaction, errors, usage."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx
from fastapi.testclient import TestClient
from starlette.datastructures import Headers

from factrail.core.tokens import estimate_tokens
from factrail.gateway.factory import create_app, default_engine
from factrail.gateway.request_facts import requested_window
from factrail.settings import Settings
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.outputs import OutputStore
from tests.gateway.support import UPSTREAM, ScriptedCompactor, make_client

ANTHROPIC = "http://anthropic.test"
MESSAGES = f"{ANTHROPIC}/v1/messages"
SYSTEM: list[dict[str, Any]] = [
    {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}
]
TOOLS: list[dict[str, Any]] = [
    {"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}}
]


def transcript(steps: int = 3, lines: int = 8) -> list[dict[str, Any]]:
    """A Claude Code style transcript: thinking with signatures, tool_use/tool_result pairs."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Find out why the build fails and fix it."}
    ]
    for i in range(steps):
        output = [f"tests/test_mod{i}.py::test_case_{j} PASSED [{j}%]" for j in range(lines)]
        output.insert(lines // 2, f"ERROR: assertion failed in module {i}: expected 4{i}1")
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"Step {i}: run it.", "signature": f"c2ln{i}"},
                    {"type": "text", "text": f"Running step {i}."},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i}",
                        "name": "Bash",
                        "input": {"command": f"pytest tests/test_mod{i}.py -x"},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{i}",
                        "content": "\n".join(output),
                    }
                ],
            }
        )
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "Module 1 fails."}]})
    image = {"type": "base64", "media_type": "image/png", "data": "iVBO"}
    prompt = {"type": "text", "text": "Now fix it.", "cache_control": {"type": "ephemeral"}}
    messages.append({"role": "user", "content": [prompt, {"type": "image", "source": image}]})
    return messages


def body(messages: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": SYSTEM,
        "tools": TOOLS,
        "messages": transcript() if messages is None else messages,
        **extra,
    }


def message(usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "done"}],
        "stop_reason": "end_turn",
        "usage": usage or {"input_tokens": 10, "output_tokens": 2},
    }


def sse(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(
        b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
        for name, data in events
    )


def without_results(messages: list[dict[str, Any]]) -> list[Any]:
    """Every block but tool results' content, in order (what compaction must never touch)."""
    out: list[Any] = []
    for m in messages:
        content = m["content"]
        if not isinstance(content, list):
            out.append((m["role"], content))
            continue
        for block in content:
            if block.get("type") == "tool_result":
                out.append((m["role"], {k: v for k, v in block.items() if k != "content"}))
            else:
                out.append((m["role"], block))
    return out


def assert_paired(messages: list[dict[str, Any]]) -> None:
    """Each tool_result answers a tool_use of the assistant message right before it."""
    for prev, m in itertools.pairwise(messages):
        if not isinstance(m["content"], list):
            continue
        results = [b["tool_use_id"] for b in m["content"] if b.get("type") == "tool_result"]
        if results:
            uses = [b["id"] for b in prev["content"] if b.get("type") == "tool_use"]
            assert prev["role"] == "assistant" and results == uses


def make_settings(**extra: Any) -> Settings:
    values: dict[str, Any] = {
        "upstream_url": UPSTREAM,
        "anthropic_upstream_url": ANTHROPIC,
        "trigger_tokens": 100,
        "max_body_bytes": 64 * 1024,
        "record_decisions": False,
        "price_profile": "none",  # compact at the soft line: these tests are not about cost
        **extra,
    }
    return Settings(**values)


@pytest.fixture
def settings() -> Settings:
    """Overrides the conftest settings: an Anthropic upstream and a larger body limit."""
    return make_settings()


def test_anthropic_headers_are_forwarded_and_hop_by_hop_stripped(
    client: TestClient, router: respx.MockRouter
) -> None:
    route = router.post(MESSAGES).mock(return_value=httpx.Response(200, json=message()))
    key = "sk-" + "ant-" + "A1b2" * 8
    other = "tok-" + "C3d4" * 8
    r = client.post(
        "/v1/messages",
        json=body(),
        headers={
            "x-api-key": key,
            "authorization": f"Bearer {other}",
            "anthropic-version": "2023-06-01",
            "anthropic-beta": "prompt-caching-2024-07-31",
            "connection": "keep-alive, x-drop-me",
            "x-drop-me": "1",
            "keep-alive": "timeout=5",
            "x-factrail-session": "s1",
        },
    )
    assert r.status_code == 200
    sent = route.calls.last.request
    assert sent.headers["x-api-key"] == key
    assert "authorization" not in sent.headers  # not an Anthropic credential: never sent there
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["anthropic-beta"] == "prompt-caching-2024-07-31"
    for name in ("x-drop-me", "keep-alive", "x-factrail-session"):
        assert name not in sent.headers


def test_upstream_headers_and_errors_are_relayed_as_sent(
    client: TestClient, router: respx.MockRouter
) -> None:
    error = b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}'
    router.post(MESSAGES).mock(
        return_value=httpx.Response(
            429,
            content=error,
            headers={
                "content-type": "application/json",
                "request-id": "req_abc",
                "anthropic-ratelimit-requests-remaining": "0",
                "retry-after": "7",
                "connection": "close",
            },
        )
    )
    r = client.post("/v1/messages", json=body())
    assert r.status_code == 429
    assert r.content == error
    assert r.headers["request-id"] == "req_abc"
    assert r.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert r.headers["retry-after"] == "7"


def test_compaction_rewrites_only_tool_results(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    route = router.post(MESSAGES).mock(return_value=httpx.Response(200, json=message()))
    original = body()
    r = client.post("/v1/messages", json=original)
    assert r.status_code == 200
    assert r.headers["x-factrail"] == "compacted"
    sent = orjson.loads(route.calls.last.request.content)
    assert sent["system"] == SYSTEM and sent["tools"] == TOOLS
    assert without_results(sent["messages"]) == without_results(original["messages"])
    results = [
        b["content"] for m in sent["messages"] if isinstance(m["content"], list)
        for b in m["content"] if b.get("type") == "tool_result"
    ]  # fmt: skip
    assert results == ["REDUCED"] * 3
    assert_paired(sent["messages"])
    _, model, extra = compactor.calls[-1]
    assert model == "claude-sonnet-4-5"
    system_and_tools = estimate_tokens("You are Claude Code.") + estimate_tokens(
        orjson.dumps(TOOLS).decode()
    )
    assert extra == system_and_tools


@pytest.mark.parametrize(
    ("betas", "window"),
    [
        ([], None),
        (["prompt-caching-2024-07-31"], None),
        (["context-1m-2025-08-07"], 1_000_000),
        (["interleaved-thinking-2025-05-14,CONTEXT-1M-2025-08-07"], 1_000_000),
        (["fine-grained-tool-streaming-2025-05-14", "context-1m-2025-08-07"], 1_000_000),
    ],
)
def test_the_1m_context_beta_gives_the_step_its_window(
    client: TestClient,
    router: respx.MockRouter,
    compactor: ScriptedCompactor,
    betas: list[str],
    window: int | None,
) -> None:
    router.post(MESSAGES).mock(return_value=httpx.Response(200, json=message()))
    headers = [("anthropic-version", "2023-06-01"), *(("anthropic-beta", b) for b in betas)]
    r = client.post("/v1/messages", content=orjson.dumps(body()), headers=headers)
    assert r.status_code == 200
    assert compactor.windows == [window]


@pytest.mark.parametrize(
    ("mark", "ttl"),
    [
        (None, None),  # no marker: the configured lifetime
        ({"type": "ephemeral"}, 300.0),
        ({"type": "ephemeral", "ttl": "5m"}, 300.0),
        ({"type": "ephemeral", "ttl": "1h"}, 3600.0),
    ],
)
def test_the_markers_tell_the_step_the_cache_lifetime_the_client_asked_for(
    client: TestClient,
    router: respx.MockRouter,
    compactor: ScriptedCompactor,
    mark: dict[str, str] | None,
    ttl: float | None,
) -> None:
    """The longest of the request's markers: how long what the last turn wrote stays cached
    (and, at one hour, what its writes cost)."""
    router.post(MESSAGES).mock(return_value=httpx.Response(200, json=message()))
    system = [{"type": "text", "text": "You are Claude Code."}]
    messages = transcript()
    for m in messages:
        for block in m["content"] if isinstance(m["content"], list) else []:
            block.pop("cache_control", None)
    if mark is not None:
        messages[-1]["content"][-1]["cache_control"] = mark
        system[0]["cache_control"] = {"type": "ephemeral"}
    payload = body(messages, system=system)
    headers = {"anthropic-version": "2023-06-01"}
    r = client.post("/v1/messages", content=orjson.dumps(payload), headers=headers)
    assert r.status_code == 200
    assert compactor.cache_ttls == [ttl]


@pytest.mark.parametrize("system", ["Prompt A", [{"type": "text", "text": "Prompt A"}]])
def test_system_prompt_keys_the_session(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor, system: Any
) -> None:
    router.post(MESSAGES).mock(return_value=httpx.Response(200, json=message()))
    client.post("/v1/messages", json=body(system=system))
    client.post("/v1/messages", json=body(system="Prompt B"))
    client.post("/v1/messages", json=body(system="Prompt A"))
    first, other, again = (call[0] for call in compactor.calls)
    assert first == again != other


def test_compaction_failure_forwards_the_original_bytes(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    route = router.post(MESSAGES).mock(return_value=httpx.Response(200, json=message()))
    compactor.fail = True
    raw = orjson.dumps(body())
    r = client.post("/v1/messages", content=raw)
    assert r.status_code == 200
    assert r.headers["x-factrail"] == "failed-open"
    assert route.calls.last.request.content == raw


def test_real_engine_keeps_prose_thinking_and_pairing(
    router: respx.MockRouter, tmp_path: Path
) -> None:
    route = router.post(MESSAGES).mock(return_value=httpx.Response(200, json=message()))
    settings = make_settings(trigger_tokens=1500, preserve_recent=2, outputs_dir=str(tmp_path))
    upstream = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    app = create_app(
        settings, client=upstream, state=MemoryStateStore(), engine_factory=default_engine
    )
    original = body(transcript(steps=12, lines=40))
    snapshot = copy.deepcopy(original)
    with TestClient(app) as c:
        r = c.post("/v1/messages", json=original)
    assert r.status_code == 200
    assert r.headers["x-factrail"] == "compacted"
    sent = orjson.loads(route.calls.last.request.content)
    assert len(route.calls.last.request.content) < len(orjson.dumps(snapshot))
    assert sent["system"] == snapshot["system"]
    results = [
        b for m in sent["messages"] if isinstance(m["content"], list)
        for b in m["content"] if b.get("type") == "tool_result"
    ]  # fmt: skip
    added = [b.pop("cache_control") for b in results if "cache_control" in b]
    assert added == [{"type": "ephemeral"}]  # the end of the frozen zone (cache_marks.py)
    assert without_results(sent["messages"]) == without_results(snapshot["messages"])
    assert_paired(sent["messages"])


def test_history_the_provider_compacted_is_forwarded_as_sent(
    router: respx.MockRouter, tmp_path: Path
) -> None:
    """Anthropic drops every block before a compaction block with a summary: a transcript past
    the trigger only in that history is not compacted (the bytes go as the client sent them)."""
    route = router.post(MESSAGES).mock(return_value=httpx.Response(200, json=message()))
    settings = make_settings(trigger_tokens=1500, preserve_recent=2, outputs_dir=str(tmp_path))
    upstream = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    app = create_app(
        settings, client=upstream, state=MemoryStateStore(), engine_factory=default_engine
    )
    block = {"type": "compaction", "content": "Summary.", "encrypted_content": "b3BhcXVl"}
    history = transcript(steps=12, lines=40)[:-1]
    after = [
        {"role": "user", "content": "Go on."},
        {"role": "assistant", "content": [block, {"type": "text", "text": "Carrying on."}]},
        {"role": "user", "content": "Now fix it."},
    ]
    with TestClient(app) as c:
        raw = orjson.dumps(body([*history, *after]))
        r = c.post("/v1/messages", content=raw, headers={"content-type": "application/json"})
        assert r.headers["x-factrail"] == "passthrough"
        assert route.calls.last.request.content == raw
        failed = dict(block, content=None)  # a failed compaction: the API reads everything
        after[1]["content"][0] = failed
        r = c.post("/v1/messages", json=body([*history, *after]))
        assert r.headers["x-factrail"] == "compacted"


@pytest.mark.parametrize(
    ("raw", "status", "kind"),
    [
        (
            b'{"model": "claude-sonnet-4-5", "messages": [' + b" " * 100,
            400,
            "invalid_request_error",
        ),
        (b"[" + b" " * 100 + b"]", 400, "invalid_request_error"),
        (b'{"x": "' + b"a" * 70_000 + b'"}', 413, "request_too_large"),
    ],
)
def test_rejections_use_the_anthropic_error_shape(
    client: TestClient, router: respx.MockRouter, raw: bytes, status: int, kind: str
) -> None:
    route = router.post(MESSAGES).mock(return_value=httpx.Response(200, json=message()))
    r = client.post("/v1/messages", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == status
    data = r.json()
    assert data["type"] == "error" and data["error"]["type"] == kind
    assert isinstance(data["error"]["message"], str) and data["error"]["message"]
    assert not route.called


@pytest.mark.parametrize(
    ("failure", "status", "kind"),
    [
        (httpx.ConnectError("refused"), 502, "api_error"),
        (httpx.ReadTimeout("slow"), 504, "timeout_error"),
    ],
)
def test_transport_failures_use_the_anthropic_error_shape(
    client: TestClient, router: respx.MockRouter, failure: Exception, status: int, kind: str
) -> None:
    router.post(MESSAGES).mock(side_effect=failure)
    r = client.post("/v1/messages", json=body())
    assert r.status_code == status
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == kind
    assert r.headers["x-factrail"] == "compacted"


def test_openai_routes_keep_the_openai_error_shape(
    client: TestClient, router: respx.MockRouter
) -> None:
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=httpx.ConnectError("refused"))
    r = client.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": []})
    assert r.status_code == 502
    assert r.json()["error"]["code"] == "upstream_unreachable"


def test_count_tokens_and_other_v1_paths_go_to_their_upstreams(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    counted = router.post(f"{MESSAGES}/count_tokens").mock(
        return_value=httpx.Response(200, json={"input_tokens": 42}, headers={"request-id": "r1"})
    )
    models = router.get(f"{UPSTREAM}/models").mock(return_value=httpx.Response(200, json={}))
    raw = orjson.dumps(body())
    r = client.post("/v1/messages/count_tokens?beta=true", content=raw)
    assert r.status_code == 200 and r.json() == {"input_tokens": 42}
    assert r.headers["request-id"] == "r1"
    assert r.headers["x-factrail"] == "passthrough"
    assert counted.calls.last.request.content == raw
    assert counted.calls.last.request.url.query == b"beta=true"
    assert compactor.calls == []
    assert client.get("/v1/models").status_code == 200
    assert models.called


def test_upstream_url_already_ending_in_v1(router: respx.MockRouter, outputs: OutputStore) -> None:
    route = router.post(MESSAGES).mock(return_value=httpx.Response(200, json=message()))
    settings = make_settings(anthropic_upstream_url=f"{ANTHROPIC}/v1/")
    with make_client(settings, router, ScriptedCompactor(), outputs) as c:
        assert c.post("/v1/messages", json=body()).status_code == 200
    assert route.called


def test_non_streaming_usage_counts_cached_prompt_tokens(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    usage = {
        "input_tokens": 5,
        "cache_read_input_tokens": 700,
        "cache_creation_input_tokens": 40,
        "output_tokens": 3,
    }
    router.post(MESSAGES).mock(return_value=httpx.Response(200, json=message(usage)))
    client.post("/v1/messages", json=body())
    session = compactor.calls[-1][0]
    assert compactor.usage == [(session, 745, 250)]


def test_sse_is_relayed_as_sent_and_message_start_usage_is_read(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    start = {"type": "message_start", "message": {
        **message({"input_tokens": 9, "cache_read_input_tokens": 1000, "output_tokens": 1}),
        "content": [],
    }}  # fmt: skip
    stream = sse(
        ("message_start", start),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Hi"}}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 4}}),
        ("message_stop", {"type": "message_stop"}),
    )  # fmt: skip
    router.post(MESSAGES).mock(
        return_value=httpx.Response(
            200, content=stream, headers={"content-type": "text/event-stream", "request-id": "q"}
        )
    )
    with client.stream("POST", "/v1/messages", json=body(stream=True)) as r:
        relayed = b"".join(r.iter_bytes())
        assert r.headers["x-accel-buffering"] == "no"
        assert r.headers["x-factrail"] == "compacted"
        assert r.headers["request-id"] == "q"
    assert relayed == stream
    assert compactor.usage == [(compactor.calls[-1][0], 1009, 250)]


def test_only_anthropic_requests_ask_for_a_window() -> None:
    beta = Headers({"anthropic-beta": "context-1m-2025-08-07"})
    assert requested_window("anthropic", beta) == 1_000_000
    assert requested_window("openai", beta) is None
