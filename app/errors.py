"""Errors in the OpenAI shape: `{"error": {"message", "type", "param", "code"}}`."""

from __future__ import annotations

from collections.abc import Mapping

import orjson
from starlette.responses import Response


def openai_error(
    status: int,
    message: str,
    *,
    type_: str = "invalid_request_error",
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A JSON error response clients of the OpenAI API already understand."""
    body = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return Response(
        orjson.dumps(body), status_code=status, media_type="application/json", headers=headers
    )
