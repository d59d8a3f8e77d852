"""The admin surface's key check: the session routes (and any page under `/factrail/`) answer
only a request presenting the admin key, configured or generated (`factrail.stores.admin_key`):
never open, whatever the bind.

The JSON routes want the key as a bearer token; the pages take it too, or the cookie their
login sets: not the key but an HMAC of a fixed label under it, so the key itself never sits in
a browser's cookie jar and changing the key signs every browser out."""

from __future__ import annotations

import hashlib
import hmac

from starlette.requests import Request
from starlette.responses import Response

from factrail.gateway.errors import openai_error
from factrail.gateway.proxy import Gateway

COOKIE = "factrail_admin"
"""The name of the pages' sign-in cookie."""
COOKIE_LABEL = b"factrail pages sign-in v1"
"""What the cookie's HMAC signs under the admin key."""


def admin_denied(request: Request) -> Response | None:
    """A 401 (in the OpenAI error shape) unless the request carries the admin key as
    `Authorization: Bearer <key>`; None when it does."""
    if holds_bearer(request):
        return None
    return openai_error(
        401,
        "a valid admin bearer token is required",
        type_="authentication_error",
        code="invalid_admin_key",
        headers={"www-authenticate": "Bearer"},
    )


def holds_bearer(request: Request) -> bool:
    """Whether the request carries the admin key as `Authorization: Bearer <key>`."""
    key = _key(request).encode("utf-8")
    presented = [bearer_token(v) for k, v in request.headers.raw if k.lower() == b"authorization"]
    return bool(key) and any(t is not None and hmac.compare_digest(t, key) for t in presented)


def page_admitted(request: Request) -> bool:
    """Whether a page may be shown: the admin key as a bearer token, or the sign-in cookie."""
    if holds_bearer(request):
        return True
    key = _key(request)
    presented = request.cookies.get(COOKIE)
    if not key or presented is None:
        return False
    return hmac.compare_digest(presented.encode("utf-8"), cookie_value(key).encode("ascii"))


def is_admin_key(request: Request, candidate: str) -> bool:
    """Whether `candidate` (typed into the login form or given in its link) is the admin key."""
    key = _key(request).encode("utf-8")
    return bool(key) and hmac.compare_digest(candidate.encode("utf-8", "replace"), key)


def cookie_value(key: str) -> str:
    """The sign-in cookie's value for the admin key `key`: HMAC-SHA256 of `COOKIE_LABEL`, hex."""
    return hmac.new(key.encode("utf-8"), COOKIE_LABEL, hashlib.sha256).hexdigest()


def bearer_token(value: bytes) -> bytes | None:
    """The credential of an `Authorization` value in the bearer scheme (any case, any
    whitespace around), as raw bytes; None for another scheme or none."""
    parts = value.split(None, 1)
    if len(parts) != 2 or parts[0].lower() != b"bearer":
        return None
    return parts[1].strip()


def _key(request: Request) -> str:
    gateway: Gateway = request.app.state.gateway
    return gateway.admin_key
