"""A fake Anthropic Messages upstream for integration tests.

It records every request (`GET /_records`: path, body and the Anthropic/auth headers; `POST
/_reset`), answers `/v1/messages` as JSON or SSE (`"stream": true`) and `count_tokens`, and fails
on demand through the `x-fake-mode` header: `429` (rate limited) or `hang`.
Run: `uvicorn tests.integration.fake_anthropic:app`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.integration.fakes import json_response, record_routes

RECORDS: list[dict[str, Any]] = []
INPUT_TOKENS = 40
CACHE_READ_TOKENS = 3000
RECORDED_HEADERS = ("x-api-key", "authorization", "anthropic-version", "anthropic-beta")
USAGE = {"input_tokens": INPUT_TOKENS, "cache_read_input_tokens": CACHE_READ_TOKENS}


def _message(content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {**USAGE, "output_tokens": 2},
    }


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


async def _stream() -> AsyncIterator[bytes]:
    yield _event("message_start", {"type": "message_start", "message": _message([])})
    block = {"type": "text", "text": ""}
    yield _event("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": block})  # fmt: skip
    for part in ("Hel", "lo"):
        delta = {"type": "text_delta", "text": part}
        yield _event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": delta})  # fmt: skip
    yield _event("content_block_stop", {"type": "content_block_stop", "index": 0})
    stop = {"stop_reason": "end_turn", "stop_sequence": None}
    usage = {"output_tokens": 2}
    yield _event("message_delta", {"type": "message_delta", "delta": stop, "usage": usage})
    yield _event("message_stop", {"type": "message_stop"})


async def messages(request: Request) -> Response:
    body = await request.body()
    headers = {k: request.headers[k] for k in RECORDED_HEADERS if k in request.headers}
    RECORDS.append({"path": request.url.path, "body": body.decode(), "headers": headers})
    mode = request.headers.get("x-fake-mode", "")
    if mode == "429":
        error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
        return json_response(error, 429, {"retry-after": "3", "request-id": "req_limited"})
    if mode == "hang":
        await asyncio.sleep(30)
    if request.url.path.endswith("/count_tokens"):
        return json_response({"input_tokens": 1234})
    data = orjson.loads(body)
    if data.get("stream"):
        return StreamingResponse(_stream(), media_type="text/event-stream")
    content = [{"type": "text", "text": "done"}]
    return json_response(
        _message(content),
        headers={"request-id": "req_fake", "anthropic-ratelimit-requests-remaining": "99"},
    )


app = Starlette(
    routes=[
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", messages, methods=["POST"]),
        *record_routes(RECORDS),
    ]
)
