"""Errors the gateway answers itself, in the shape each provider's clients understand.

OpenAI: `{"error": {"message", "type", "param", "code"}}`.
Anthropic: `{"type": "error", "error": {"type", "message"}}`, the type named by the status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import orjson
from starlette.responses import Response

ANTHROPIC_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""HTTP status → Anthropic `error.type` (other 4xx are `invalid_request_error`, 5xx `api_error`)."""


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
    return _json(status, body, headers)


def anthropic_error_type(status: int) -> str:
    """The Anthropic `error.type` for an HTTP status."""
    default = "api_error" if status >= 500 else "invalid_request_error"
    return ANTHROPIC_ERROR_TYPES.get(status, default)


def anthropic_error(
    status: int, message: str, *, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON error response clients of the Anthropic API (and its SDKs) already understand."""
    body = {"type": "error", "error": {"type": anthropic_error_type(status), "message": message}}
    return _json(status, body, headers)


def _json(status: int, body: object, headers: Mapping[str, str] | None) -> Response:
    return Response(
        orjson.dumps(body), status_code=status, media_type="application/json", headers=headers
    )


StreamShape = Literal["openai", "responses", "anthropic"]
"""How a route's server-sent events carry an error: Chat Completions (and the other OpenAI
streams), the Responses API, or Anthropic's Messages."""


def stream_error(shape: StreamShape, status: int, message: str, code: str) -> bytes:
    """One server-sent event telling the client that the stream failed, in the shape its SDK
    raises on: `data: {"error": …}` (OpenAI), `event: error` with the Responses error event, or
    Anthropic's `event: error` (`api_error`, `overloaded_error`, … named by `status`)."""
    if shape == "anthropic":
        typed = {"type": anthropic_error_type(status), "message": message}
        return b"event: error\ndata: " + orjson.dumps({"type": "error", "error": typed}) + b"\n\n"
    if shape == "responses":
        event = {"type": "error", "code": code, "message": message, "param": None}
        return b"event: error\ndata: " + orjson.dumps(event) + b"\n\n"
    error = {"message": message, "type": "upstream_error", "param": None, "code": code}
    return b"data: " + orjson.dumps({"error": error}) + b"\n\n"
