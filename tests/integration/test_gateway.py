"""factrail as a real process in front of a real fake upstream; clients: openai SDK and httpx."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.datastructures import Headers

from factrail.core.formats.openai_chat import parse
from factrail.session import session_key
from factrail.stores.sqlite_state import SqliteStateStore
from tests.integration.fake_upstream import CACHED_TOKENS, PROMPT_TOKENS
from tests.integration.processes import Stack, start_factrail, stop

pytestmark = pytest.mark.integration
DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "dashboards"


def transcript(calls: int = 14) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Find out why the build fails and fix it."},
    ]
    for i in range(calls):
        call_id = f"call_{i}"
        args = orjson.dumps({"cmd": f"pytest tests/test_mod{i}.py -x"}).decode()
        messages.append(
            {
                "role": "assistant",
                "content": f"Running step {i}.",
                "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": "bash", "arguments": args}}
                ],
            }
        )  # fmt: skip
        lines = [f"tests/test_mod{i}.py::test_case_{j} PASSED [{j}%]" for j in range(60)]
        lines.insert(30, f"ERROR: assertion failed in module {i}: expected 4{i}1 got 4{i}2")
        messages.append({"role": "tool", "tool_call_id": call_id, "content": "\n".join(lines)})
    messages.append({"role": "assistant", "content": "All steps ran; module 3 fails."})
    messages.append({"role": "user", "content": "Good, now fix module 3."})
    return messages


def sdk(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.factrail, api_key="test-" + "key", max_retries=0)


def prose(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(m["role"], m.get("content")) for m in messages if m["role"] != "tool"]


def test_below_the_trigger_the_upstream_gets_the_exact_bytes(stack: Stack) -> None:
    stack.reset()
    body = b'{ "model":"gpt-4o",  "messages":[{"role":"user","content":"hi \\u00e9"}] , "n":1.0}'
    r = httpx.post(f"{stack.factrail}/chat/completions", content=body)
    assert r.status_code == 200
    assert r.headers["x-factrail"] == "passthrough"
    assert stack.records()[-1]["body"].encode() == body


def test_sdk_clients_sync_async_streaming_and_tool_calls(stack: Stack) -> None:
    client = sdk(stack)
    tools: Any = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    user: Any = [{"role": "user", "content": "x"}]
    done = client.chat.completions.create(model="gpt-4o", messages=user)
    assert done.choices[0].message.content == "done"
    called = client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "x"}],
        tools=tools,
    )
    tool_calls = called.choices[0].message.tool_calls or []
    assert [c.id for c in tool_calls] == ["call_fake"]
    stream = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "x"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hello"
    assert client.models.list().data[0].id == "gpt-4o"

    async def run() -> str | None:
        async with openai.AsyncOpenAI(base_url=stack.factrail, api_key="k", max_retries=0) as a:
            r = await a.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "x"}]
            )
            return r.choices[0].message.content

    assert asyncio.run(run()) == "done"


def input_tokens(stack: Stack) -> dict[str, float]:
    """`factrail_upstream_input_tokens_total` by kind, from the gateway's `/metrics`."""
    text = httpx.get(stack.factrail[:-3] + "/metrics").text
    return {
        s.labels["kind"]: s.value
        for f in text_string_to_metric_families(text)
        if f.name == "factrail_upstream_input_tokens"
        for s in f.samples
        if s.name.endswith("_total")
    }


def test_a_streams_usage_is_counted_by_kind(stack: Stack) -> None:
    before = input_tokens(stack)
    stream = sdk(stack).chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "x"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    usage = [c.usage for c in stream if c.usage]
    assert usage and usage[0].prompt_tokens == PROMPT_TOKENS
    after = input_tokens(stack)
    assert after["cached"] - before["cached"] == CACHED_TOKENS
    assert after["uncached"] - before["uncached"] == PROMPT_TOKENS - CACHED_TOKENS
    assert after["cache_write"] == before["cache_write"] == 0


def test_a_client_closing_at_done_keeps_the_streams_calibration(stack: Stack) -> None:
    """The openai SDK closes a stream once it reads `[DONE]`; the upstream's own end may come
    later. What the stream reported until then still calibrates the session."""
    stream = sdk(stack).chat.completions.create(
        model="gpt-4o",
        messages=transcript(),
        stream=True,
        extra_headers={"x-factrail-session": "linger-1", "x-fake-mode": "linger"},
    )
    started = time.monotonic()
    assert [c.usage.prompt_tokens for c in stream if c.usage] == [PROMPT_TOKENS]
    assert time.monotonic() - started < 1  # the SDK did not wait for the upstream's end
    key = session_key(Headers({"x-factrail-session": "linger-1"}), {}, parse([]), "gpt-4o")
    store = SqliteStateStore(stack.data_home / "factrail" / "state.db")
    try:
        for _ in range(50):
            state = store.load(key)
            if state is not None and state.calibration is not None:
                break
            time.sleep(0.02)
        assert state is not None and state.calibration is not None
    finally:
        store.close()


def test_compaction_then_reapplication_keeps_the_prefix(stack: Stack) -> None:
    client = sdk(stack)

    def send(messages: Any) -> Any:
        return client.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=messages, extra_headers={"x-factrail-session": "integration-1"}
        )

    stack.reset()
    first: Any = transcript()
    raw = send(first)
    assert raw.headers["x-factrail"] == "compacted"
    sent = orjson.loads(stack.records()[-1]["body"])["messages"]
    assert prose(sent) == prose(first)
    ids = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    assert ids == [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert sent != first

    more = [{"role": "assistant", "content": "Looking."}, {"role": "user", "content": "ok"}]
    second: Any = [*first, *more]
    raw = send(second)
    assert raw.headers["x-factrail"] == "reapplied"
    resent = orjson.loads(stack.records()[-1]["body"])["messages"]
    assert orjson.dumps(resent).startswith(orjson.dumps(sent)[:-1])

    for path in stack.data_home.rglob("state.db*"):
        path.unlink()
    raw = send(second)
    assert raw.http_response.status_code == 200

    text = httpx.get(stack.factrail[:-3] + "/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    compactions = sum(s.value for s in families["factrail_compactions"].samples)
    assert compactions >= 1
    ratio = families["factrail_compaction_tokens_remaining_ratio"]
    assert any(s.name.endswith("_count") and s.value >= 1 for s in ratio.samples)


def test_an_engine_exception_fails_open(stack: Stack, tmp_path: Path) -> None:
    url, proc = start_factrail(stack.upstream, tmp_path, FACTRAIL_TEST_FAIL_COMPACTION="1")
    try:
        body = orjson.dumps({"model": "gpt-4o", "messages": transcript()})
        r = httpx.post(f"{url}/chat/completions", content=body)
        assert r.status_code == 200
        assert r.headers["x-factrail"] == "failed-open"
        assert stack.records()[-1]["body"].encode() == body
    finally:
        stop(proc)


def test_upstream_failures_reach_the_client(stack: Stack) -> None:
    client = sdk(stack)
    messages: Any = [{"role": "user", "content": "x"}]
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(
            model="gpt-4o", messages=messages, extra_headers={"x-fake-mode": "429"}
        )
    assert limited.value.response.headers["retry-after"] == "3"
    assert limited.value.code == "rate_limit_exceeded"
    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(
            model="gpt-4o", messages=messages, extra_headers={"x-fake-mode": "500"}
        )
    assert failed.value.status_code == 500
    body = orjson.dumps({"model": "gpt-4o", "messages": messages})
    hang = httpx.post(f"{stack.factrail}/chat/completions", content=body,
                      headers={"x-fake-mode": "hang"}, timeout=10)  # fmt: skip
    assert hang.status_code == 504
    assert hang.json()["error"]["code"] == "upstream_timeout"
    reset = httpx.post(f"{stack.factrail}/chat/completions", content=body,
                       headers={"x-fake-mode": "reset"})  # fmt: skip
    assert reset.status_code == 502
    assert set(reset.json()["error"]) == {"message", "type", "param", "code"}
    stream = client.chat.completions.create(
        model="gpt-4o", messages=messages, stream=True, extra_headers={"x-fake-mode": "cut"}
    )
    with pytest.raises((openai.APIError, httpx.HTTPError)):
        for _ in stream:
            pass


def test_a_body_over_32_mib_is_413(stack: Stack) -> None:
    body = b'{"model": "gpt-4o", "messages": [], "pad": "' + b"x" * (33 * 1024 * 1024) + b'"}'
    r = httpx.post(f"{stack.factrail}/chat/completions", content=body, timeout=30)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "body_too_large"


def test_every_dashboard_metric_is_exported(stack: Stack) -> None:
    text = httpx.get(stack.factrail[:-3] + "/metrics").text
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
    exported: set[str] = set()
    for family in text_string_to_metric_families(text):
        exported |= {s.name for s in family.samples}
        exported |= {family.name + x for x in suffixes.get(family.type, [""])}
    queried: set[str] = set()
    for path in DASHBOARD.glob("*.json"):
        queried |= set(re.findall(r"\bfactrail_[a-z_]+", path.read_text()))
    assert queried, "the dashboard queries no factrail metric"
    assert queried <= exported
