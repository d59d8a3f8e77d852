"""The gateway against a respx upstream: forwarding, relaying, compaction, failing open."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
import respx
from fastapi.testclient import TestClient

from factrail.settings import Settings
from factrail.stores.outputs import OutputStore
from tests.gateway.support import UPSTREAM, ScriptedCompactor, make_client

CHAT = f"{UPSTREAM}/chat/completions"


def transcript() -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Run the tests please."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "FAILED test_x " * 40},
        {"role": "assistant", "content": "One test failed."},
        {"role": "user", "content": "Fix it."},
    ]


def chat_body(**extra: Any) -> bytes:
    return orjson.dumps({"model": "gpt-4o", "messages": transcript(), **extra})


def ok_json(usage: int | None = 123) -> httpx.Response:
    body: dict[str, Any] = {"id": "x", "choices": []}
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage, "completion_tokens": 1}
    return httpx.Response(200, json=body)


def test_client_headers_are_forwarded_and_hop_by_hop_stripped(
    client: TestClient, router: respx.MockRouter
) -> None:
    route = router.post(CHAT).mock(return_value=ok_json())
    body = chat_body()
    key = "sk-" + "proj-" + "A1b2" * 8
    r = client.post(
        "/v1/chat/completions",
        content=body,
        headers={
            "authorization": f"Bearer {key}",
            "openai-organization": "org-1",
            "x-custom": "kept",
            "connection": "keep-alive, x-drop-me",
            "x-drop-me": "1",
            "keep-alive": "timeout=5",
            "te": "trailers",
            "x-factrail-session": "s1",
        },
    )
    assert r.status_code == 200
    sent = route.calls.last.request
    assert sent.headers["authorization"] == f"Bearer {key}"
    assert sent.headers["openai-organization"] == "org-1"
    assert sent.headers["x-custom"] == "kept"
    for name in ("x-drop-me", "keep-alive", "te", "x-factrail-session"):
        assert name not in sent.headers
    assert int(sent.headers["content-length"]) == len(sent.content)


def test_upstream_headers_and_errors_are_relayed(
    client: TestClient, router: respx.MockRouter
) -> None:
    error = {"error": {"message": "slow down", "type": "rate_limit", "param": None, "code": None}}
    router.post(CHAT).mock(
        return_value=httpx.Response(
            429,
            json=error,
            headers={
                "retry-after": "7",
                "x-ratelimit-remaining-requests": "0",
                "x-request-id": "req_1",
                "openai-processing-ms": "12",
                "keep-alive": "timeout=5",
            },
        )
    )
    r = client.post("/v1/chat/completions", content=chat_body())
    assert r.status_code == 429
    assert r.json() == error
    assert r.headers["retry-after"] == "7"
    assert r.headers["x-ratelimit-remaining-requests"] == "0"
    assert r.headers["x-request-id"] == "req_1"
    assert r.headers["openai-processing-ms"] == "12"
    assert "keep-alive" not in r.headers
    assert r.headers["x-factrail"] == "compacted"


def test_connect_failure_is_502_and_timeout_is_504(
    client: TestClient, router: respx.MockRouter
) -> None:
    router.post(CHAT).mock(side_effect=httpx.ConnectError("refused"))
    r = client.post("/v1/chat/completions", content=chat_body())
    assert r.status_code == 502
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    router.post(f"{UPSTREAM}/responses").mock(side_effect=httpx.ReadTimeout("slow"))
    r = client.post("/v1/responses", content=b'{"model": "gpt-4o", "input": "hi"}')
    assert r.status_code == 504
    assert r.json()["error"]["code"] == "upstream_timeout"


def test_body_over_the_limit_is_413(client: TestClient, router: respx.MockRouter) -> None:
    route = router.post(CHAT).mock(return_value=ok_json())
    r = client.post("/v1/chat/completions", content=b"x" * 5000)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "body_too_large"

    def chunks() -> Any:
        yield b"x" * 3000
        yield b"x" * 3000

    r = client.post("/v1/chat/completions", content=chunks())
    assert r.status_code == 413
    assert not route.called


def test_bad_json_is_400_but_unknown_shapes_are_forwarded(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    route = router.post(CHAT).mock(return_value=ok_json())
    r = client.post("/v1/chat/completions", content=b"{not json" + b" " * 100)
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"
    r = client.post("/v1/chat/completions", content=b"[1, 2, 3]" + b" " * 100)
    assert r.status_code == 400
    assert not route.called
    odd = orjson.dumps({"model": "gpt-4o", "prompt": "no messages here" * 10})
    r = client.post("/v1/chat/completions", content=odd)
    assert r.status_code == 200
    assert route.calls.last.request.content == odd
    assert r.headers["x-factrail"] == "passthrough"
    assert compactor.calls == []


def test_compaction_rewrites_only_the_transcript_and_reads_usage(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    route = router.post(CHAT).mock(return_value=ok_json(usage=321))
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    r = client.post(
        "/v1/chat/completions",
        content=chat_body(tools=tools, temperature=0.5),
        headers={"x-factrail-session": "s1"},
    )
    assert r.headers["x-factrail"] == "compacted"
    assert r.headers["x-factrail-compactions"] == "1"
    sent = orjson.loads(route.calls.last.request.content)
    assert sent["messages"][3]["content"] == "REDUCED"
    assert sent["messages"][:3] == transcript()[:3]
    assert sent["tools"] == tools and sent["temperature"] == 0.5
    session, model, extra = compactor.calls[0]
    assert model == "gpt-4o" and extra > 0
    assert compactor.usage == [(session, 321, 250)]


@pytest.mark.parametrize(
    ("extra", "ttl"),
    [
        ({}, None),
        ({"prompt_cache_retention": "in_memory"}, None),
        ({"prompt_cache_retention": "24h"}, 86_400.0),
        # From GPT-5.6 on the cache lives 30 minutes, asked for or not.
        ({"prompt_cache_options": {"ttl": "30m"}}, 1800.0),
        ({"model": "gpt-6-sol"}, 1800.0),
        ({"model": "openai/gpt-5.6-terra", "prompt_cache_options": {"mode": "explicit"}}, 1800.0),
        ({"model": "gpt-5.5", "prompt_cache_options": {"ttl": "soon"}}, None),
    ],
)
def test_openai_s_longer_lived_caches_tell_the_step_so(
    client: TestClient,
    router: respx.MockRouter,
    compactor: ScriptedCompactor,
    extra: dict[str, Any],
    ttl: float | None,
) -> None:
    router.post(CHAT).mock(return_value=ok_json())
    r = client.post("/v1/chat/completions", content=chat_body(**extra))
    assert r.status_code == 200
    assert compactor.cache_ttls == [ttl]


def test_engine_exception_fails_open_with_the_exact_bytes(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    compactor.fail = True
    route = router.post(CHAT).mock(return_value=ok_json())
    body = chat_body()
    r = client.post("/v1/chat/completions", content=body)
    assert r.status_code == 200
    assert r.headers["x-factrail"] == "failed-open"
    assert route.calls.last.request.content == body
    metrics = client.get("/metrics").text
    assert 'factrail_compaction_failures_total{reason="compact"} 1.0' in metrics


@pytest.mark.parametrize("fails", [False, True])
def test_a_turns_follow_up_runs_once_its_answer_is_out(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor, fails: bool
) -> None:
    compactor.outcome = "passthrough"
    compactor.after_answer_fails = fails
    compactor.upstream_calls = router.post(CHAT).mock(return_value=ok_json())
    r = client.post(
        "/v1/chat/completions", content=chat_body(), headers={"x-factrail-session": "a"}
    )
    assert r.status_code == 200 and r.headers["x-factrail"] == "passthrough"
    session = compactor.calls[0][0]
    assert compactor.answered == ([] if fails else [(session, 1)])  # after the upstream answered


def test_small_bodies_take_the_fast_path(
    settings: Settings, router: respx.MockRouter, outputs: OutputStore
) -> None:
    compactor = ScriptedCompactor()
    route = router.post(CHAT).mock(return_value=ok_json())
    big = Settings(upstream_url=UPSTREAM)
    with make_client(big, router, compactor, outputs) as c:
        body = chat_body()
        r = c.post("/v1/chat/completions", content=body)
        assert r.headers["x-factrail"] == "passthrough"
        assert route.calls.last.request.content == body
    assert compactor.calls == []


def test_a_small_body_naming_a_fenced_tool_is_parsed_for_the_fence(
    router: respx.MockRouter, outputs: OutputStore
) -> None:
    router.post(CHAT).mock(return_value=ok_json())
    compactor = ScriptedCompactor()
    fenced = transcript()
    fenced[2]["tool_calls"][0]["function"]["name"] = "mcp__email-gateway__ask_email"
    with make_client(Settings(upstream_url=UPSTREAM), router, compactor, outputs) as c:
        c.post(
            "/v1/chat/completions", content=orjson.dumps({"model": "gpt-4o", "messages": fenced})
        )
        assert len(compactor.calls) == 1  # parsed, although small enough for the fast path
    assert len(orjson.dumps({"model": "gpt-4o", "messages": fenced})) < 2700
    assert len(orjson.dumps({"model": "gpt-4o", "messages": transcript()})) < 2700


def test_the_named_models_trigger_bounds_the_fast_path(
    router: respx.MockRouter, outputs: OutputStore
) -> None:
    """A 30 KB body cannot reach gpt-4o's soft line (5/6 of 76.8k tokens) but can reach gpt-4's."""
    route = router.post(CHAT).mock(return_value=ok_json())
    settings = Settings(upstream_url=UPSTREAM)
    padding = [{"role": "user", "content": "x " * 15_000}]
    for model, parsed in (("gpt-4o", False), ("gpt-4", True)):
        compactor = ScriptedCompactor()
        with make_client(settings, router, compactor, outputs) as c:
            body = orjson.dumps({"messages": transcript() + padding, "model": model})
            r = c.post("/v1/chat/completions", content=body)
            assert r.status_code == 200
        assert bool(compactor.calls) is parsed, model
        if not parsed:
            assert route.calls.last.request.content == body


def test_streams_are_relayed_chunk_by_chunk_with_usage(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    events = [
        b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n',
        b'data: {"choices":[],"usage":{"prompt_tokens":77,',
        b'"completion_tokens":1}}\n\ndata: [DONE]\n\n',
    ]
    router.post(CHAT).mock(
        return_value=httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            stream=httpx.ByteStream(b"".join(events)),
        )
    )
    with client.stream("POST", "/v1/chat/completions", content=chat_body(stream=True)) as r:
        assert r.headers["x-accel-buffering"] == "no"
        assert r.headers["x-factrail"] == "compacted"
        assert r.read() == b"".join(events)
    assert compactor.usage[-1][1:] == (77, 250)


def test_other_v1_paths_pass_through(client: TestClient, router: respx.MockRouter) -> None:
    models = router.get(f"{UPSTREAM}/models", params={"limit": "2"}).mock(
        return_value=httpx.Response(200, json={"data": []})
    )
    deleted = router.delete(f"{UPSTREAM}/files/file-1").mock(
        return_value=httpx.Response(200, json={"deleted": True})
    )
    assert client.get("/v1/models?limit=2").json() == {"data": []}
    assert client.delete("/v1/files/file-1").json() == {"deleted": True}
    assert models.called and deleted.called


def test_codex_s_remote_compaction_passes_through_as_sent(
    client: TestClient, router: respx.MockRouter
) -> None:
    """Codex calls `POST /v1/responses/compact` near its own window: factrail is not the one
    compacting there, so the request reaches the upstream byte for byte."""
    body = orjson.dumps({"model": "gpt-5-codex", "input": [{"role": "user", "content": "hi"}]})
    seen: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        return httpx.Response(200, json={"output": []})

    router.post(f"{UPSTREAM}/responses/compact").mock(side_effect=answer)
    r = client.post("/v1/responses/compact", content=body)
    assert r.status_code == 200 and r.json() == {"output": []}
    assert r.headers["x-factrail"] == "passthrough"
    assert seen == [body]


def test_every_set_cookie_reaches_the_client(client: TestClient, router: respx.MockRouter) -> None:
    cookies = [("set-cookie", "a=1; Path=/"), ("set-cookie", "b=2; Path=/")]
    router.get(f"{UPSTREAM}/models").mock(return_value=httpx.Response(200, headers=cookies))
    router.post(CHAT).mock(return_value=httpx.Response(200, json={}, headers=cookies))
    for r in (client.get("/v1/models"), client.post("/v1/chat/completions", json={"x": 1})):
        assert r.headers.get_list("set-cookie") == ["a=1; Path=/", "b=2; Path=/"]


def test_the_path_is_forwarded_as_sent(client: TestClient, router: respx.MockRouter) -> None:
    # An escaped slash or space in an id stays escaped: the upstream sees the client's path.
    seen: list[bytes] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path)
        return httpx.Response(200, json={"ok": True})

    router.get(url__startswith=f"{UPSTREAM}/files/").mock(side_effect=record)
    assert client.get("/v1/files/a%2Fb%20c/content?x=1%2F2").status_code == 200
    assert seen == [b"/v1/files/a%2Fb%20c/content?x=1%2F2"]
