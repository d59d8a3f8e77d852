"""An upstream that closes idle keep-alive connections: the race behind the rare 502s under load,
made deterministic, and the pool's expiry that keeps factrail out of it.

A server closes a connection idle for its keep-alive timeout (uvicorn 5 s, gunicorn 2 s). When a
client reuses that connection at the same moment, its request crosses the server's close: the
server never answers it, the client sees the connection drop and factrail answers 502. Here the
race is made certain: `LazyCloser` drops any request arriving on a connection idle longer than
`CLOSES_AFTER_S`, as if its keep-alive timer had fired while the request was on its way (the
client saw no close yet, so its pool's check that the socket is still open passes). A request
`GAP_S` after the last one then either crosses the close (reused) or opens a new connection (the
pool's expiry is shorter than the upstream's)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from factrail.settings import Settings
from tests.integration.processes import start_factrail, stop

pytestmark = pytest.mark.integration
CLOSES_AFTER_S = 1.0
"""The upstream's keep-alive timeout (short, so the test is)."""
GAP_S = 1.5
"""Between requests: past the upstream's timeout, so a reused connection meets its close."""
BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
ANSWER = orjson.dumps(
    {
        "id": "chatcmpl-lazy",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
    }
)


class LazyCloser:
    """A keep-alive HTTP/1.1 upstream on loopback that closes an idle connection only when the
    next request arrives, without answering it (its timer fired as the request came in)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.connections = 0
        self.answered = 0
        self.dropped = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            buffer = b""
            idle_since: float | None = None
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                if idle_since is not None and time.monotonic() - idle_since > CLOSES_AFTER_S:
                    self.dropped += 1
                    return
                buffer += chunk
                head, sep, rest = buffer.partition(b"\r\n\r\n")
                if not sep:
                    continue
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                if len(rest) < length:
                    continue
                buffer = rest[length:]
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
                )
                self.answered += 1
                idle_since = time.monotonic()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def upstream() -> Iterator[LazyCloser]:
    server = LazyCloser()
    try:
        yield server
    finally:
        server.close()


def post(client: httpx.Client, base: str) -> int:
    return client.post(f"{base}/chat/completions", json=BODY).status_code


def test_a_request_on_a_connection_the_upstream_is_closing_is_a_502_sent_once(
    upstream: LazyCloser, tmp_path: Path
) -> None:
    """httpx's own expiry (5 s, the same as uvicorn's keep-alive) reuses the connection: the
    502 of the load bench. factrail does not send the request again (it may have reached an
    upstream that acted on it)."""
    base, proc = start_factrail(upstream.url, tmp_path, FACTRAIL_UPSTREAM_KEEPALIVE_S="5")
    try:
        with httpx.Client(timeout=30) as client:
            assert post(client, base) == 200
            time.sleep(GAP_S)
            assert post(client, base) == 502
    finally:
        stop(proc)
    assert (upstream.connections, upstream.answered, upstream.dropped) == (1, 1, 1)


def test_idle_connections_expire_before_the_upstream_closes_them(
    upstream: LazyCloser, tmp_path: Path
) -> None:
    """With the pool's expiry below the upstream's keep-alive timeout, a request after a pause
    goes on a new connection; requests close together still share one."""
    keepalive = str(CLOSES_AFTER_S * 3 / 4)
    base, proc = start_factrail(upstream.url, tmp_path, FACTRAIL_UPSTREAM_KEEPALIVE_S=keepalive)
    try:
        with httpx.Client(timeout=30) as client:
            assert post(client, base) == 200
            assert post(client, base) == 200  # at once: the same connection
            time.sleep(GAP_S)
            assert post(client, base) == 200
    finally:
        stop(proc)
    assert (upstream.connections, upstream.answered, upstream.dropped) == (2, 3, 0)


def test_the_default_expiry_is_below_common_upstream_keepalive_timeouts() -> None:
    """uvicorn (vLLM, SGLang, LiteLLM), Node, hypercorn: 5 s; uvicorn under gunicorn: 2 s."""
    assert 0 < Settings().upstream_keepalive_s < 2
