"""The stream relay: chunks pass as they come, and a client that leaves closes the upstream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
from starlette.types import Message

from app.relay import Relay

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
