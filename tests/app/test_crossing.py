"""Credentials go only where they belong, and no path climbs out of `/v1` on the upstream."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx

from app.upstream import has_dot_segment, request_headers
from factrail.settings import Settings
from tests.app.support import UPSTREAM, ScriptedCompactor, make_client


@pytest.mark.parametrize(
    ("path", "dotted"),
    [
        ("/v1/models", False),
        ("/v1/../../x", True),
        ("/v1/./models", True),
        ("/v1/%2e%2e/x", True),
        ("/v1/%2E./x", True),
        ("/v1/files/a..b", False),
        ("/v1/files/...", False),
    ],
)
def test_dot_segments(path: str, dotted: bool) -> None:
    assert has_dot_segment(path) is dotted


def test_anthropic_credentials_never_reach_another_upstream() -> None:
    key = "sk-ant-" + "k" * 24
    raw = [(b"x-api-key", key.encode()), (b"anthropic-version", b"2023-06-01"), (b"x-other", b"1")]
    to_openai = dict(request_headers(raw))
    assert b"x-api-key" not in to_openai and b"anthropic-version" not in to_openai
    assert to_openai[b"x-other"] == b"1"
    assert dict(request_headers(raw, anthropic=True))[b"x-api-key"] == key.encode()


def test_through_the_gateway(router: respx.MockRouter, compactor: ScriptedCompactor) -> None:
    seen: list[httpx.Request] = []

    def models(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": []})

    router.get(f"{UPSTREAM}/models").mock(side_effect=models)
    with make_client(Settings(upstream_url=UPSTREAM), router, compactor, None) as client:
        key = "sk-ant-" + "q" * 24
        got = client.get("/v1/models", headers={"x-api-key": key, "authorization": "Bearer t"})
        assert got.status_code == 200
    (request,) = seen
    assert "x-api-key" not in request.headers and request.headers["authorization"] == "Bearer t"


def test_a_dotted_path_is_rejected_before_anything_is_forwarded(
    router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    with make_client(Settings(upstream_url=UPSTREAM), router, compactor, None) as client:
        app = client.app
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "http_version": "1.1",
            "method": "GET",
            "path": "/v1/x",
            "raw_path": b"/v1/../../x",
            "query_string": b"",
            "headers": [],
            "app": app,
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 8080),
            "scheme": "http",
        }
        client.portal.call(app, scope, receive, send)  # type: ignore[union-attr]
    assert sent[0]["status"] == 400
    assert not router.calls
