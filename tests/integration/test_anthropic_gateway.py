"""factrail as a real process in front of a fake Anthropic upstream; client: the anthropic SDK."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest

from tests.integration.fake_anthropic import CACHE_READ_TOKENS, INPUT_TOKENS
from tests.integration.processes import free_port, start_factrail, start_fake, stop

pytestmark = pytest.mark.integration
MODEL = "claude-sonnet-4-6"
SYSTEM = "You are a careful coding agent."


@dataclass
class AnthropicStack:
    fake: str
    """Root URL of the fake Anthropic upstream."""
    factrail: str
    """Root URL of factrail (the SDK appends `/v1/messages`)."""
    home: Path

    def records(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = httpx.get(f"{self.fake}/_records").json()
        return records

    key: str = "sk-" + "ant-" + "Zz09" * 6

    def sdk(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.factrail, api_key=self.key, max_retries=0)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnthropicStack]:
    home = tmp_path_factory.mktemp("home")
    fake_url, fake = start_fake("tests.integration.fake_anthropic:app")
    try:
        unused_openai = f"http://127.0.0.1:{free_port()}/v1"
        url, proxy = start_factrail(unused_openai, home, FACTRAIL_ANTHROPIC_UPSTREAM_URL=fake_url)
        try:
            yield AnthropicStack(fake_url, url.removesuffix("/v1"), home)
        finally:
            stop(proxy)
    finally:
        stop(fake)


def transcript(steps: int = 14) -> list[dict[str, Any]]:
    task = {"type": "text", "text": "Find out why the build fails and fix it."}
    messages: list[dict[str, Any]] = [{"role": "user", "content": [task]}]
    for i in range(steps):
        lines = [f"tests/test_mod{i}.py::test_case_{j} PASSED [{j}%]" for j in range(60)]
        lines.insert(30, f"ERROR: assertion failed in module {i}: expected 4{i}1 got 4{i}2")
        thinking = {"type": "thinking", "thinking": f"Run module {i}.", "signature": f"U2ln{i}=="}
        use = {"type": "tool_use", "id": f"toolu_{i:02d}", "name": "Bash",
               "input": {"command": f"pytest tests/test_mod{i}.py -x"}}  # fmt: skip
        result = {
            "type": "tool_result",
            "tool_use_id": f"toolu_{i:02d}",
            "content": "\n".join(lines),
        }
        messages.append(
            {
                "role": "assistant",
                "content": [thinking, {"type": "text", "text": f"Step {i}."}, use],
            }
        )
        messages.append({"role": "user", "content": [result]})
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "Module 3 fails."}]})
    prompt = {
        "type": "text",
        "text": "Good, now fix module 3.",
        "cache_control": {"type": "ephemeral"},
    }
    messages.append({"role": "user", "content": [prompt]})
    return messages


def untouched(messages: list[dict[str, Any]]) -> list[Any]:
    """Every block except tool results' content, in order."""
    return [
        {k: v for k, v in block.items() if not (block["type"] == "tool_result" and k == "content")}
        for m in messages
        for block in m["content"]
    ]


def test_sdk_request_is_compacted_keeping_prose_thinking_and_pairs(stack: AnthropicStack) -> None:
    messages = transcript()
    raw = stack.sdk().messages.with_raw_response.create(
        model=MODEL,
        max_tokens=256,
        system=SYSTEM,
        messages=messages,  # type: ignore[arg-type]
        extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"},
    )
    reply = raw.parse()
    assert [b.text for b in reply.content if b.type == "text"] == ["done"]
    assert raw.headers["x-factrail"] == "compacted"
    assert raw.headers["request-id"] == "req_fake"
    assert raw.headers["anthropic-ratelimit-requests-remaining"] == "99"
    record = stack.records()[-1]
    assert record["path"] == "/v1/messages"
    auth = record["headers"].get("x-api-key", "") + record["headers"].get("authorization", "")
    assert stack.key in auth, record["headers"]  # as x-api-key, or as a bearer (SDK 2.x)
    assert record["headers"]["anthropic-version"]
    assert record["headers"]["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    sent = orjson.loads(record["body"])
    assert sent["system"] == SYSTEM
    results = [b for m in sent["messages"] for b in m["content"] if b["type"] == "tool_result"]
    added = [b.pop("cache_control") for b in results if "cache_control" in b]
    assert added == [{"type": "ephemeral"}]  # the end of the frozen zone (cache_marks.py)
    assert untouched(sent["messages"]) == untouched(messages)
    assert len(record["body"]) < len(orjson.dumps(messages)) * 0.8


def test_sdk_streaming_relays_every_event(stack: AnthropicStack) -> None:
    with stack.sdk().messages.stream(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Hello"
    assert final.usage.input_tokens == INPUT_TOKENS
    assert final.usage.cache_read_input_tokens == CACHE_READ_TOKENS


def test_sdk_count_tokens_passes_through(stack: AnthropicStack) -> None:
    counted = stack.sdk().messages.count_tokens(
        model=MODEL, system=SYSTEM, messages=[{"role": "user", "content": "hi"}]
    )
    assert counted.input_tokens == 1234
    record = stack.records()[-1]
    assert record["path"] == "/v1/messages/count_tokens"
    assert orjson.loads(record["body"])["system"] == SYSTEM


def test_sdk_sees_upstream_and_gateway_errors_in_the_anthropic_shape(
    stack: AnthropicStack,
) -> None:
    user: Any = [{"role": "user", "content": "hi"}]
    with pytest.raises(anthropic.RateLimitError) as limited:
        stack.sdk().messages.create(
            model=MODEL, max_tokens=8, messages=user, extra_headers={"x-fake-mode": "429"}
        )
    assert limited.value.response.headers["retry-after"] == "3"
    assert limited.value.body == {"type": "error", "error": {"type": "rate_limit_error",
                                                             "message": "slow down"}}  # fmt: skip
    with pytest.raises(anthropic.APIStatusError) as slow:
        stack.sdk().messages.create(
            model=MODEL, max_tokens=8, messages=user, extra_headers={"x-fake-mode": "hang"}
        )
    assert slow.value.status_code == 504
    assert isinstance(slow.value.body, dict)
    assert slow.value.body["error"]["type"] == "timeout_error"
    bad = httpx.post(f"{stack.factrail}/v1/messages", content=b"{" + b" " * 5000)
    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "invalid_request_error"


def test_unreachable_anthropic_upstream_is_a_502(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    url, proxy = start_factrail(dead + "/v1", tmp_path, FACTRAIL_ANTHROPIC_UPSTREAM_URL=dead)
    try:
        client = anthropic.Anthropic(
            base_url=url.removesuffix("/v1"), api_key="test-" + "key", max_retries=0
        )
        with pytest.raises(anthropic.InternalServerError) as failed:
            client.messages.create(
                model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "hi"}]
            )
    finally:
        stop(proxy)
    assert failed.value.status_code == 502
    assert isinstance(failed.value.body, dict)
    assert failed.value.body["error"]["type"] == "api_error"


def test_sdk_thread_continued_stays_in_its_session(stack: AnthropicStack) -> None:
    """The SDK's server-held thread: a request that creates one is compacted and its answer's
    id remembered; the next request, sending only its new turn with the thread continued
    from that id, is of the same session (it has been compacted once), while the same turn
    sent without the thread is a session of its own."""
    sdk = stack.sdk()
    system = SYSTEM + " Work in a thread."  # a session of its own in this module's gateway
    first = sdk.beta.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=64,
        system=system,
        messages=transcript(),  # type: ignore[arg-type]
        thread={"type": "create"},
    )
    assert first.headers["x-factrail"] == "compacted"
    assert orjson.loads(stack.records()[-1]["body"])["thread"] == {"type": "create"}
    log = "\n".join(f"tests/test_mod3.py::test_case_{j} FAILED [{j}%]" for j in range(200))
    turn = [{"role": "user", "content": f"The log of the rerun:\n{log}"}]
    go_on = {"type": "continue", "previous_message_id": first.parse().id}
    later = sdk.beta.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=64,
        system=system,
        messages=turn,
        thread=go_on,  # type: ignore[arg-type]
    )
    assert orjson.loads(stack.records()[-1]["body"])["thread"] == go_on
    assert later.headers["x-factrail-compactions"] == "1"
    alone = sdk.beta.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=64,
        system=system,
        messages=turn,  # type: ignore[arg-type]
    )
    assert alone.headers["x-factrail-compactions"] == "0"
