"""The admin surface's key check: the session routes (and any page under `/factrail/`) answer
only a request presenting the admin key, configured or generated (`factrail.stores.admin_key`):
never open, whatever the bind."""

from __future__ import annotations

import hmac

from starlette.requests import Request
from starlette.responses import Response

from factrail.gateway.errors import openai_error
from factrail.gateway.proxy import Gateway


def admin_denied(request: Request) -> Response | None:
    """A 401 (in the OpenAI error shape) unless the request carries the admin key as
    `Authorization: Bearer <key>`; None when it does."""
    gateway: Gateway = request.app.state.gateway
    key = gateway.admin_key.encode("utf-8")
    presented = [bearer_token(v) for k, v in request.headers.raw if k.lower() == b"authorization"]
    if key and any(t is not None and hmac.compare_digest(t, key) for t in presented):
        return None
    return openai_error(
        401,
        "a valid admin bearer token is required",
        type_="authentication_error",
        code="invalid_admin_key",
        headers={"www-authenticate": "Bearer"},
    )


def bearer_token(value: bytes) -> bytes | None:
    """The credential of an `Authorization` value in the bearer scheme (any case, any
    whitespace around), as raw bytes; None for another scheme or none."""
    parts = value.split(None, 1)
    if len(parts) != 2 or parts[0].lower() != b"bearer":
        return None
    return parts[1].strip()
