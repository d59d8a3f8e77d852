"""Signing a browser in to the pages: where a login may send it next, the cookie, the form body.

The login link a first start prints (`/factrail/login?key=…`) and the login form both end in a
303 to one of the gateway's own pages with the sign-in cookie set (`routes.admin.cookie_value`),
so the key leaves the address bar at once. `next` is taken only when it names a page here:
anything else (another host, a scheme, a path out of `/factrail`, however encoded) lands on the
sessions list."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, quote, unquote

from starlette.requests import Request

from factrail.gateway.routes.admin import COOKIE, cookie_value

HOME = "/factrail/"
"""The sessions list: where a login goes when `next` is absent or refused."""
PREFIX = "/factrail"
COOKIE_MAX_AGE_S = 30 * 24 * 3600
"""How long a browser stays signed in (changing the admin key signs it out sooner)."""
MAX_FORM_BYTES = 8192
"""The login form's body is refused past this size."""
_DECODE_ROUNDS = 4
_PATH_CHARS = re.compile(r"[A-Za-z0-9/._~:@!$&'()*+,;=-]*")
_QUERY = re.compile(r"[A-Za-z0-9=&_.-]*")
_SAFE = "/:@!$&'()*+,;="


def safe_next(raw: str | None) -> str:
    """`raw` (a `next` parameter, decoded once) when it names a page of the gateway, re-encoded;
    else `HOME`. Decoded until it no longer changes, then refused for any character outside a
    path's (controls, backslashes, spaces), a `//`, a `.` or `..` segment, or a path not under
    `/factrail`; a query is kept only when it is plain `name=value` pairs."""
    if not raw:
        return HOME
    path, sep, query = raw.partition("?")
    decoded = path
    for _ in range(_DECODE_ROUNDS):
        try:
            again = unquote(decoded, errors="strict")
        except UnicodeDecodeError:
            return HOME
        if again == decoded:
            break
        decoded = again
    else:
        return HOME
    if not _PATH_CHARS.fullmatch(decoded) or "//" in decoded:
        return HOME
    if decoded != PREFIX and not decoded.startswith(PREFIX + "/"):
        return HOME
    if any(segment in (".", "..") for segment in decoded.split("/")):
        return HOME
    kept = f"?{query}" if sep and query and _QUERY.fullmatch(query) else ""
    return quote(decoded, safe=_SAFE) + kept


def requested(request: Request) -> str:
    """The page a request asked for, as a `next` a login may return to."""
    query = request.url.query
    return safe_next(request.url.path + (f"?{query}" if query else ""))


def sign_in_cookie(key: str, request: Request) -> str:
    """The `Set-Cookie` value that signs a browser in (`Secure` when it came over https)."""
    return _cookie(cookie_value(key), COOKIE_MAX_AGE_S, is_https(request))


def sign_out_cookie(request: Request) -> str:
    """The `Set-Cookie` value that removes the sign-in cookie."""
    return _cookie("", 0, is_https(request))


def is_https(request: Request) -> bool:
    """Whether the browser reached the gateway over https (directly, or through a proxy that
    says so: a spoofed header only makes the spoofer's own cookie https-only)."""
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


async def form_fields(request: Request) -> dict[str, str] | None:
    """The fields of a url-encoded form body (the first value of each); None when the body is
    larger than `MAX_FORM_BYTES` or is not UTF-8."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=16)
    except (UnicodeDecodeError, ValueError):
        return None
    return {name: values[0] for name, values in fields.items() if values}


def _cookie(value: str, max_age: int, secure: bool) -> str:
    flags = f"; Max-Age={max_age}; Path={PREFIX}; HttpOnly; SameSite=Strict"
    return f"{COOKIE}={value}{flags}{'; Secure' if secure else ''}"
