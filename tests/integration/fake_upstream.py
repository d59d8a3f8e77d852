"""A fake OpenAI-compatible upstream for integration tests and the proxy benchmark.

It records every request body (`GET /_records`, `POST /_reset`) and misbehaves on demand, per
request, through the `x-fake-mode` header: `429`, `500`, `hang`, `reset` (the connection drops
mid-body), `cut` (a stream stops mid-way), `linger` (a stream ends a second after `[DONE]`) or
`no-usage`. A stream can be slow: `x-fake-chunks: N` and `x-fake-interval: S` send N content
chunks S seconds apart before the usage and `[DONE]` (a model generating). Run:
`uvicorn tests.integration.fake_upstream:app`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.integration.fakes import json_response, record_routes

RECORDS: list[dict[str, Any]] = []
RECORDING = os.environ.get("FAKE_UPSTREAM_RECORDS", "1") != "0"
"""`FAKE_UPSTREAM_RECORDS=0` records nothing (a load bench's thousands of bodies)."""
PROMPT_TOKENS = 4242
CACHED_TOKENS = 4096
CHAT_USAGE = {
    "prompt_tokens": PROMPT_TOKENS,
    "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS},
    "completion_tokens": 2,
    "total_tokens": PROMPT_TOKENS + 2,
}


def _completion(tool_call: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "done"}
    if tool_call:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_fake",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
                }
            ],
        }
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": CHAT_USAGE,
    }


def _chunk(delta: dict[str, Any], usage: bool = False) -> bytes:
    data: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    if usage:
        data["usage"] = CHAT_USAGE
    return b"data: " + orjson.dumps(data) + b"\n\n"


async def _stream(mode: str) -> AsyncIterator[bytes]:
    yield _chunk({"role": "assistant", "content": "Hel"})
    yield _chunk({"content": "lo"})
    if mode == "cut":
        raise ConnectionResetError("fake upstream cut the stream")
    yield _chunk({}, usage=True)
    yield b"data: [DONE]\n\n"
    if mode == "linger":  # a remote upstream's end arrives after [DONE], the client has gone
        await asyncio.sleep(1)


async def _slow(chunks: int, interval: float) -> AsyncIterator[bytes]:
    yield _chunk({"role": "assistant", "content": ""})
    for i in range(chunks):
        await asyncio.sleep(interval)
        yield _chunk({"content": f"token {i} "})
    yield _chunk({}, usage=True)
    yield b"data: [DONE]\n\n"


async def _reset() -> AsyncIterator[bytes]:
    yield b'{"partial": '
    raise ConnectionResetError("fake upstream dropped the connection")


async def chat(request: Request) -> Response:
    body = await request.body()
    if RECORDING:
        RECORDS.append({"path": request.url.path, "body": body.decode("utf-8", "surrogateescape")})
    mode = request.headers.get("x-fake-mode", "")
    if mode == "429":
        error = {"error": {"message": "rate limited", "type": "requests", "param": None,
                           "code": "rate_limit_exceeded"}}  # fmt: skip
        return json_response(
            error, 429, {"retry-after": "3", "x-ratelimit-remaining-requests": "0"}
        )
    if mode == "500":
        return json_response({"error": {"message": "boom", "type": "server_error"}}, 500)
    if mode == "hang":
        await asyncio.sleep(30)
    if mode == "reset":
        return StreamingResponse(_reset(), media_type="application/json")
    data = orjson.loads(body)
    if request.url.path.endswith("/responses"):
        return json_response(
            {
                "id": "resp_fake",
                "object": "response",
                "status": "completed",
                "output": [],
                "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": 1, "total_tokens": 1},
            }
        )
    if data.get("stream"):
        chunks = request.headers.get("x-fake-chunks")
        if chunks is not None:
            interval = float(request.headers.get("x-fake-interval", "0"))
            return StreamingResponse(_slow(int(chunks), interval), media_type="text/event-stream")
        return StreamingResponse(_stream(mode), media_type="text/event-stream")
    answer = _completion(bool(data.get("tools")))
    if mode == "no-usage":  # leaves the proxy's token estimate uncalibrated
        del answer["usage"]
    return json_response(answer, headers={"x-request-id": "req_fake"})


async def models(request: Request) -> Response:
    return json_response({"object": "list", "data": [{"id": "gpt-4o", "object": "model"}]})


app = Starlette(
    routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/responses", chat, methods=["POST"]),
        Route("/v1/models", models),
        *record_routes(RECORDS),
    ]
)
