"""What the fake servers share: JSON responses and the `/_records` and `/_reset` routes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), status, headers, media_type="application/json")


def record_routes(
    records: list[dict[str, Any]], forget: Callable[[], None] | None = None
) -> list[Route]:
    """`GET /_records` lists the recorded requests; `POST /_reset` forgets them (and runs
    `forget`, for whatever else the server remembers)."""

    async def listed(request: Request) -> Response:
        return json_response(records)

    async def reset(request: Request) -> Response:
        records.clear()
        if forget is not None:
            forget()
        return json_response({})

    return [Route("/_records", listed), Route("/_reset", reset, methods=["POST"])]
