"""The hook protocol's envelope (version 1): one JSON object in, one out.

Every request carries `"protocol": 1`; every answer carries `"protocol": 1` and `"ok": true`,
or `"ok": false` with `"error"`. Reading a request never raises anything but `HookError`, whose
message is the `error` the answer carries. See `docs/protocol.md`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import orjson

PROTOCOL = 1
EVENTS = ("compact", "turn", "taint", "status")
MAX_NUMBER = 2**53
"""A request's number past this (a `now`, a token count) is read as absent: no clock, count or
size of a session is that large, and every answer stays within JSON's exact integers."""
MAX_ERROR_CHARS = 500
"""An `error` longer than this is cut (it is a log line on the plugin's side)."""


class HookError(Exception):
    """A request this binary cannot answer: its message is the answer's `error`."""


def read_request(data: bytes, limit: int) -> dict[str, Any]:
    """The request object in `data` (at most `limit` bytes), its protocol checked."""
    if len(data) > limit:
        raise HookError(f"request too large: over {limit} bytes")
    try:
        request = orjson.loads(data)
    except orjson.JSONDecodeError as err:
        raise HookError(f"request is not JSON: {err}") from None
    if not isinstance(request, dict):
        raise HookError("request is not a JSON object")
    got = request.get("protocol")
    if type(got) is not int or got != PROTOCOL:
        shown = orjson.dumps(got).decode() if _dumpable(got) else repr(got)
        raise HookError(f"protocol mismatch: this binary speaks {PROTOCOL}, the request {shown}")
    return request


def _dumpable(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return False
    return True


def answer(body: Mapping[str, Any]) -> dict[str, Any]:
    """A success answer: the body with the envelope fields."""
    return {**body, "protocol": PROTOCOL, "ok": True}


def refusal(error: str) -> dict[str, Any]:
    """A failure answer."""
    text = error if len(error) <= MAX_ERROR_CHARS else error[: MAX_ERROR_CHARS - 1] + "…"
    return {"protocol": PROTOCOL, "ok": False, "error": text}


def encode(body: Mapping[str, Any]) -> bytes:
    """One answer as one line of compact JSON; an answer JSON cannot carry (a number past 64
    bits, a lone surrogate, …) becomes a refusal that can."""
    try:
        return orjson.dumps(body) + b"\n"
    except (TypeError, orjson.JSONEncodeError) as err:
        fallback = refusal(f"internal error: the answer is not JSON ({type(err).__name__})")
        return orjson.dumps(fallback) + b"\n"


# -- reading fields leniently -------------------------------------------------------------------


def section(request: Mapping[str, Any], key: str) -> dict[str, Any]:
    """An object field of the request (absent or of another type: empty)."""
    value = request.get(key)
    return value if isinstance(value, dict) else {}


def stored(request: Mapping[str, Any], key: str) -> Any:
    """A value the plugin read from its store and sent under `store` (absent: None)."""
    return section(request, "store").get(key)


def number(value: Any) -> float | None:
    """A finite JSON number (not a bool) of at most `MAX_NUMBER`, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return float(value) if abs(value) <= MAX_NUMBER else None
    return value if math.isfinite(value) and abs(value) <= MAX_NUMBER else None


def text(value: Any) -> str | None:
    """A string, else None."""
    return value if isinstance(value, str) else None


def now_ms(request: Mapping[str, Any]) -> int:
    """The request's `now` (ms since the epoch) when it sends one, else the clock's."""
    sent = number(request.get("now"))
    return int(sent) if sent is not None and sent >= 0 else int(time.time() * 1000)
