"""Relay an upstream stream to the client chunk by chunk, as each chunk arrives.

Starlette's `StreamingResponse` watches for the client leaving through an anyio task group, which
costs more than the rest of the relay on a short stream. Here one plain asyncio task waits for
`http.disconnect` and cancels the relay's anyio cancel scope when the client leaves, so the
upstream is closed at once (a model stops generating for nobody) even while it is silent. A
cancel scope, not `Task.cancel()`: httpcore hands a connection back to its pool under an anyio
shield, which a scope's cancellation respects and a native one does not. A client leaving as the
stream ends (Codex does, on `response.completed`) used to cut that hand-back short, and the
connection stayed taken for good.

A stream can also end early on the other side: the upstream dies mid-body (a transport error
after the head was sent), or the server stops and its graceful-shutdown bound runs out (the
relay is cancelled by the server, not by the client). The status line is out by then, so an
event stream ends with one error event in the route's provider shape (which the SDKs raise on)
and is then closed cleanly; any other body is left incomplete, so the client cannot take a
truncated body for a whole one. Either way one warning line is logged, no traceback, and `cut`
names the outcome the request is counted under.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import anyio
import httpx
from starlette.types import Receive, Scope, Send

from factrail.gateway.errors import StreamShape, stream_error

log = logging.getLogger("factrail.proxy")

UPSTREAM_CUT = "upstream-cut"
"""Outcome of a relay whose upstream failed after its head was sent."""
SHUTDOWN_CUT = "shutdown-cut"
"""Outcome of a relay the server cancelled at shutdown, past its graceful bound."""
FINISHED = (b"[DONE]", b"message_stop", b"response.completed", b"response.incomplete")
"""Markers of a stream's last event: an upstream failing after one of them lost nothing."""
TAIL_BYTES = 64


class Relay:
    """An ASGI response streaming `upstream` through; `tap` sees every chunk as it passes and
    `done` runs once the relay ends, however it ends (the client leaving included: what the
    upstream reported until then was billed all the same). `shape`: the body is an event
    stream whose errors take that shape (None: any other body)."""

    def __init__(
        self,
        upstream: httpx.Response,
        headers: dict[str, str],
        tap: Callable[[bytes], None] | None = None,
        done: Callable[[], None] | None = None,
        shape: StreamShape | None = None,
    ) -> None:
        self.upstream = upstream
        self.status_code = upstream.status_code
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        self.tap = tap
        self.done = done
        self.shape = shape
        self.cut: str | None = None
        """`UPSTREAM_CUT` or `SHUTDOWN_CUT` when the stream ended early on the server's side."""
        self._ending = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the head, then every chunk as it comes; close the upstream however this ends."""
        relay = asyncio.current_task()
        assert relay is not None
        left = anyio.CancelScope()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            left.cancel()

        watcher = asyncio.get_running_loop().create_task(watch())
        tap = self.tap
        tail = b""
        try:
            with left:
                await send(
                    {
                        "type": "http.response.start",
                        "status": self.status_code,
                        "headers": self.raw_headers,
                    }
                )
                try:
                    async for chunk in self.upstream.aiter_bytes():
                        if tap is not None:
                            tap(chunk)
                        tail = _tail(tail, chunk)
                        body = {"type": "http.response.body", "body": chunk, "more_body": True}
                        await send(body)
                except httpx.TransportError as exc:
                    watcher.cancel()
                    await self._end_early(send, tail, UPSTREAM_CUT, type(exc).__name__)
                    return
                watcher.cancel()  # the last message completes the response: not a disconnect
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if relay.cancelling() != 1:
                raise
            relay.uncancel()  # the server's graceful-shutdown bound ran out: end it cleanly
            watcher.cancel()
            if not self._ending:
                await self._end_early(send, tail, SHUTDOWN_CUT, "CancelledError")
        finally:
            watcher.cancel()
            with anyio.CancelScope(shield=True):
                await self.upstream.aclose()
            if self.done is not None:
                self.done()

    async def _end_early(self, send: Send, tail: bytes, cut: str, error: str) -> None:
        """End a stream cut short: one error event and the end of an event stream (unless its
        last event had already come); any other body is left incomplete."""
        self._ending = True
        finished = any(marker in tail for marker in FINISHED)
        fields = {"cut": cut, "error": error, "finished": finished}
        log.warning("stream cut short", extra={"fields": fields})
        if finished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        self.cut = cut
        if self.shape is None:
            return  # the server drops the connection: the client sees an incomplete body
        if cut == UPSTREAM_CUT:
            event = stream_error(self.shape, 502, "the upstream cut the stream", "upstream_cut")
        else:
            message = "the proxy shut down before the stream ended; retry"
            event = stream_error(self.shape, 503, message, "shutting_down")
        await send(
            {"type": "http.response.body", "body": _boundary(tail) + event, "more_body": True}
        )
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _tail(tail: bytes, chunk: bytes) -> bytes:
    """The last `TAIL_BYTES` of the stream once `chunk` is sent."""
    return chunk[-TAIL_BYTES:] if len(chunk) >= TAIL_BYTES else (tail + chunk)[-TAIL_BYTES:]


def _boundary(tail: bytes) -> bytes:
    """What ends an event left open by the last bytes sent (nothing at an event's end)."""
    if not tail or tail.endswith((b"\n\n", b"\r\n\r\n")):
        return b""
    return b"\n" if tail.endswith(b"\n") else b"\n\n"
