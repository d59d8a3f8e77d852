"""Fake judges for integration tests: a System One endpoint and a Tev chat-completions server.

Each app records every request body (`GET /_records`, `POST /_reset`) and misbehaves on demand
through `POST /_mode` with `{"mode": ...}` (it lasts until the next `/_reset`): `hang` (until
the client gives up), `500`, `429` (with `Retry-After`), `malformed` (a body that is not JSON),
`missing` (the first question gets no answer) or `out-of-range` (a probability of 1.7).
Run: `uvicorn tests.integration.fake_judges:systemone` (or `:tev`).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.integration.fakes import json_response

KEEP_CALL, KEEP_RESULT = 0.9, 0.1
"""The answers to well-formed questions: keep every call, let its output go to the rails."""
HANG_LIMIT_S = 30.0
RETRY_AFTER = "1"


class Recorder:
    """Request bodies received and the current misbehaviour of one fake judge process."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.mode = ""

    async def misbehave(self, request: Request) -> Response | None:
        """The misbehaving response of the current mode, or None to answer normally."""
        if self.mode == "hang":
            waited = 0.0
            while waited < HANG_LIMIT_S and not await request.is_disconnected():
                await asyncio.sleep(0.05)
                waited += 0.05
            return json_response({"error": "hung"}, 504)
        if self.mode == "500":
            return json_response({"error": {"message": "boom"}}, 500)
        if self.mode == "429":
            return json_response(
                {"error": {"message": "slow down"}}, 429, {"retry-after": RETRY_AFTER}
            )
        if self.mode == "malformed":
            return Response(b'{"answers": {', 200, media_type="application/json")
        return None

    def routes(self) -> list[Route]:
        async def records(request: Request) -> Response:
            return json_response(self.records)

        async def reset(request: Request) -> Response:
            self.records.clear()
            self.mode = ""
            return json_response({})

        async def mode(request: Request) -> Response:
            self.mode = str(orjson.loads(await request.body()).get("mode", ""))
            return json_response({"mode": self.mode})

        return [
            Route("/_records", records),
            Route("/_reset", reset, methods=["POST"]),
            Route("/_mode", mode, methods=["POST"]),
        ]

    async def record(self, request: Request) -> dict[str, Any]:
        body = await request.body()
        self.records.append(
            {
                "path": request.url.path,
                "authorization": request.headers.get("authorization", ""),
                "body": body.decode("utf-8", "surrogateescape"),
            }
        )
        data: dict[str, Any] = orjson.loads(body)
        return data


SYSTEMONE = Recorder()


async def systemone_answer(request: Request) -> Response:
    """`{answers: {name: {noul: p}}}` for every question (bar the misbehaviour)."""
    data = await SYSTEMONE.record(request)
    failed = await SYSTEMONE.misbehave(request)
    if failed is not None:
        return failed
    names = list(data.get("questions", {}))
    answers: dict[str, Any] = {
        name: {"noul": KEEP_RESULT if name.startswith("result_") else KEEP_CALL} for name in names
    }
    if names and SYSTEMONE.mode == "missing":
        del answers[names[0]]
    if names and SYSTEMONE.mode == "out-of-range":
        answers[names[0]] = {"noul": 1.7}
    return json_response(
        {"model": data.get("model"), "answers": answers, "usage": {"questions": 1}}
    )


TEV = Recorder()


def _letter_choice(p_a: float) -> dict[str, Any]:
    a, b = {"token": "A", "logprob": math.log(p_a)}, {"token": "B", "logprob": math.log(1 - p_a)}
    first = a if p_a >= 0.5 else b
    return {
        "index": 0,
        "message": {"role": "assistant", "content": first["token"]},
        "logprobs": {"content": [{**first, "top_logprobs": [a, b]}]},
        "finish_reason": "stop",
    }


async def tev_answer(request: Request) -> Response:
    """A one-letter chat completion with first-token logprobs (bar the misbehaviour)."""
    data = await TEV.record(request)
    failed = await TEV.misbehave(request)
    if failed is not None:
        return failed
    question = str(data["messages"][-1]["content"])
    choices = [_letter_choice(KEEP_RESULT if "The full output" in question else KEEP_CALL)]
    if TEV.mode == "missing":
        choices = []
    if TEV.mode == "out-of-range":
        choices = [{"index": 0, "message": {"role": "assistant", "content": "1.7"}}]
    return json_response(
        {
            "id": "chatcmpl-tev",
            "object": "chat.completion",
            "model": data.get("model"),
            "choices": choices,
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
        }
    )


systemone = Starlette(
    routes=[
        Route("/v1/systemone", systemone_answer, methods=["POST"]),
        *SYSTEMONE.routes(),
    ]
)
tev = Starlette(
    routes=[
        Route("/v1/chat/completions", tev_answer, methods=["POST"]),
        *TEV.routes(),
    ]
)
