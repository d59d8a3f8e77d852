"""Relay an upstream stream to the client chunk by chunk, as each chunk arrives.

Starlette's `StreamingResponse` watches for the client leaving through an anyio task group, which
costs more than the rest of the relay on a short stream. Here one plain asyncio task waits for
`http.disconnect` and cancels the relay when the client leaves, so the upstream is closed at once
(a model stops generating for nobody) even while it is silent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio
import httpx
from starlette.types import Receive, Scope, Send


class Relay:
    """An ASGI response streaming `upstream` through; `tap` sees every chunk as it passes and
    `done` runs once the relay ends, however it ends (the client leaving included: what the
    upstream reported until then was billed all the same)."""

    def __init__(
        self,
        upstream: httpx.Response,
        headers: dict[str, str],
        tap: Callable[[bytes], None] | None = None,
        done: Callable[[], None] | None = None,
    ) -> None:
        self.upstream = upstream
        self.status_code = upstream.status_code
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        self.tap = tap
        self.done = done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the head, then every chunk as it comes; close the upstream however this ends."""
        relay = asyncio.current_task()
        assert relay is not None
        gone = False

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            relay.cancel()

        watcher = asyncio.get_running_loop().create_task(watch())
        tap = self.tap
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            async for chunk in self.upstream.aiter_bytes():
                if tap is not None:
                    tap(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            watcher.cancel()  # the last message completes the response: not a disconnect
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not gone:
                raise
            relay.uncancel()
            return
        finally:
            watcher.cancel()
            with anyio.CancelScope(shield=True):
                await self.upstream.aclose()
            if self.done is not None:
                self.done()
