"""An upstream dying mid-stream, through the whole gateway: an error event, its own outcome."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import orjson
import respx
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.support import UPSTREAM

FIRST = b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
SMALL = orjson.dumps(
    {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
)


class Dying(httpx.AsyncByteStream):
    """One event, then the connection drops (what httpx raises when the peer goes away)."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield FIRST
        raise httpx.RemoteProtocolError("peer closed connection without sending complete body")


def test_an_upstream_dying_mid_stream_is_an_error_event_and_counted_apart(
    client: TestClient, router: respx.MockRouter
) -> None:
    headers = {"content-type": "text/event-stream"}
    router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, headers=headers, stream=Dying())
    )
    with client.stream("POST", "/v1/chat/completions", content=SMALL) as r:
        assert r.status_code == 200
        body = r.read()
    assert body.startswith(FIRST)
    error = orjson.loads(body[len(FIRST) :].removeprefix(b"data: "))["error"]
    assert error["code"] == "upstream_cut"
    counts = {
        (s.labels["outcome"], s.labels["status_class"]): s.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        if family.name == "factrail_requests"
        for s in family.samples
        if s.name == "factrail_requests_total" and s.value  # the known ones start at 0
    }
    assert counts == {("upstream-cut", "2xx"): 1.0}
