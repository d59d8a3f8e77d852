"""The stream relay: chunks pass as they come, and a client that leaves closes the upstream."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import anyio
import httpx
import orjson
import pytest
from starlette.types import Message

from factrail.gateway.relay import Relay

FIRST = b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":77}}\n\n'


class Upstream(httpx.AsyncByteStream):
    """Yields `chunks`, then stays silent forever when `hang` (a model still thinking)."""

    def __init__(self, chunks: list[bytes], hang: bool) -> None:
        self.chunks = chunks
        self.hang = hang
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.hang:
            await asyncio.Event().wait()

    async def aclose(self) -> None:
        self.closed = True


async def test_chunks_are_relayed_tapped_and_the_end_is_told() -> None:
    stream = Upstream([FIRST, USAGE], hang=False)
    upstream = httpx.Response(200, stream=stream)
    tapped: list[bytes] = []
    ended: list[bool] = []
    sent: list[Message] = []

    async def receive() -> Message:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    relay = Relay(
        upstream, {"content-type": "text/event-stream"}, tapped.append, lambda: ended.append(True)
    )
    await asyncio.wait_for(relay({"type": "http"}, receive, send), 5)
    assert sent[0]["status"] == 200
    assert (b"content-type", b"text/event-stream") in sent[0]["headers"]
    assert [m["body"] for m in sent[1:]] == [FIRST, USAGE, b""]
    assert [m["more_body"] for m in sent[1:]] == [True, True, False]
    assert tapped == [FIRST, USAGE] and ended == [True]
    assert stream.closed


async def test_a_client_leaving_a_silent_stream_closes_the_upstream() -> None:
    stream = Upstream([FIRST], hang=True)
    upstream = httpx.Response(200, stream=stream)
    tapped: list[bytes] = []
    ended: list[bool] = []
    first_sent = asyncio.Event()
    sent: list[Message] = []

    async def receive() -> Message:
        await first_sent.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message.get("body"):
            first_sent.set()

    relay = Relay(upstream, {}, tapped.append, lambda: ended.append(True))
    await asyncio.wait_for(relay({"type": "http"}, receive, send), 5)
    assert [m.get("body") for m in sent[1:]] == [FIRST]
    assert stream.closed
    assert tapped == [FIRST] and ended == [True]  # what was reported until then still counts


class Failing(httpx.AsyncByteStream):
    """Yields `chunks`, then fails as a dead upstream does (`error`), or hangs when None."""

    def __init__(self, chunks: list[bytes], error: Exception | None) -> None:
        self.chunks = chunks
        self.error = error
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.error is None:
            await asyncio.Event().wait()
        else:
            raise self.error

    async def aclose(self) -> None:
        self.closed = True


async def never(*_: object) -> Message:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def relayed(relay: Relay) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await asyncio.wait_for(relay({"type": "http"}, never, send), 5)
    return sent


CUT = httpx.RemoteProtocolError("peer closed connection without sending complete message body")


async def test_an_upstream_dying_mid_stream_ends_it_with_an_error_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stream = Failing([FIRST], CUT)
    ended: list[bool] = []
    relay = Relay(httpx.Response(200, stream=stream), {}, done=lambda: ended.append(True))
    relay.shape = "openai"
    with caplog.at_level(logging.WARNING, "factrail.proxy"):
        sent = await relayed(relay)
    bodies = [m["body"] for m in sent[1:]]
    assert bodies[0] == FIRST and bodies[-1] == b""
    assert [m["more_body"] for m in sent[1:]] == [True, True, False]
    event = bodies[1]
    assert event.startswith(b"data: ") and event.endswith(b"\n\n")
    error = orjson.loads(event[6:])["error"]
    assert error["code"] == "upstream_cut" and error["type"] == "upstream_error"
    assert relay.cut == "upstream-cut"
    assert stream.closed and ended == [True]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].exc_info is None
    assert warnings[0].fields["error"] == "RemoteProtocolError"  # type: ignore[attr-defined]


async def test_an_event_left_open_is_closed_before_the_anthropic_error_event() -> None:
    partial = b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"te'
    relay = Relay(httpx.Response(200, stream=Failing([partial], httpx.ReadError("reset"))), {})
    relay.shape = "anthropic"
    sent = await relayed(relay)
    event = sent[2]["body"]
    assert event.startswith(b"\n\nevent: error\ndata: ")
    payload = orjson.loads(event.split(b"data: ", 1)[1])
    assert payload == {
        "type": "error",
        "error": {"type": "api_error", "message": "the upstream cut the stream"},
    }
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


async def test_a_body_other_than_events_is_left_incomplete() -> None:
    relay = Relay(httpx.Response(200, stream=Failing([b'{"data": ['], CUT)), {})
    sent = await relayed(relay)
    assert [m.get("more_body") for m in sent[1:]] == [True]  # never completed: the server drops it
    assert relay.cut == "upstream-cut"


async def test_a_failure_after_the_last_event_loses_nothing() -> None:
    done = b"data: [DONE]\n\n"
    relay = Relay(httpx.Response(200, stream=Failing([FIRST, USAGE, done], CUT)), {})
    relay.shape = "openai"
    sent = await relayed(relay)
    assert [m["body"] for m in sent[1:]] == [FIRST, USAGE, done, b""]
    assert relay.cut is None


async def test_the_server_cancelling_at_shutdown_ends_the_stream_cleanly() -> None:
    stream = Failing([FIRST], None)
    relay = Relay(httpx.Response(200, stream=stream), {})
    relay.shape = "responses"
    sent: list[Message] = []
    first = asyncio.Event()

    async def send(message: Message) -> None:
        sent.append(message)
        if message.get("body"):
            first.set()

    task = asyncio.get_running_loop().create_task(relay({"type": "http"}, never, send))
    await first.wait()
    task.cancel("timeout graceful shutdown exceeded")
    await asyncio.wait_for(task, 5)  # returns: no exception reaches the server
    event = sent[2]["body"]
    assert event.startswith(b"event: error\ndata: ")
    assert orjson.loads(event.split(b"data: ", 1)[1])["code"] == "shutting_down"
    assert sent[-1]["more_body"] is False
    assert relay.cut == "shutdown-cut" and stream.closed


class ClosingSlowly(httpx.AsyncByteStream):
    """Yields `chunks`; its close marks it closed first and then does shielded work, as
    httpcore's does (`AsyncShieldCancellation` around handing the connection back): a close
    cut short by a cancellation leaves the connection taken, and a later close does nothing."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.closing = asyncio.Event()
        self.marked = False
        self.released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        if self.marked:
            return
        self.marked = True
        with anyio.CancelScope(shield=True):
            self.closing.set()
            await asyncio.sleep(0.05)
            self.released = True


async def test_a_client_leaving_as_the_stream_ends_cannot_cut_the_upstream_s_close_short() -> None:
    # Codex leaves as soon as it reads `response.completed`: its disconnect can arrive while the
    # relay is closing the finished upstream. Cut short there, httpcore never hands the
    # connection back to the pool, and four such leaks wedged a pool shard (504s for good).
    stream = ClosingSlowly([FIRST, USAGE])
    ended: list[bool] = []

    async def receive() -> Message:
        await stream.closing.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        await asyncio.sleep(0)

    relay = Relay(httpx.Response(200, stream=stream), {}, done=lambda: ended.append(True))
    await asyncio.wait_for(relay({"type": "http"}, receive, send), 5)
    assert stream.released, "the upstream's close was cut short: its connection is lost"
    assert ended == [True]
