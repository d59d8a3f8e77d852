"""What the gateway does with a compaction route's request body: the one place that decides.

`classify` reads a body (already bounded by `max_body_bytes` as received) and answers with one
verdict: `Read` (a JSON object factrail may compact), `Forward` (sent upstream byte for byte,
with its own headers, unread and uncompacted: the upstream judges it and answers in its own
shape) or `Reject` (a 4xx factrail answers itself, in the route's provider shape). It never
raises: an unexpected error while classifying is a `Forward`, so hostile input never becomes a
5xx of ours and nothing a client sent is lost. Pass-through routes (`/v1/models`, files,
`count_tokens`, ...) are never classified: their bodies are forwarded as they come.

The rule: factrail answers 4xx only for what no JSON API could accept, and rewrites only what it
reads faithfully; whatever is JSON but beyond what it reads faithfully goes upstream unchanged.

====================================  =============================================================
body                                  verdict
====================================  =============================================================
Content-Encoding gzip, x-gzip,        decoded to at most max_body_bytes (a bomb stops there: 413
deflate (zlib or raw), stacked        body_too_large), then classified as a plain body; sent as
                                      received (encoded) unless compacted, when the new JSON goes
                                      plain, without the header
------------------------------------  -------------------------------------------------------------
a coding that does not decode         400 invalid_encoding
(corrupt, truncated, trailing bytes)
------------------------------------  -------------------------------------------------------------
any other coding (br, zstd,           Forward (no decoder for it)
compress, ...) or more than 4
stacked
------------------------------------  -------------------------------------------------------------
too small to reach any trigger (the   Forward
fast path, on the decoded bytes):
empty bodies too
------------------------------------  -------------------------------------------------------------
a media type that is not JSON         Forward
(text/plain, a form, multipart) or a
charset not UTF-8; no Content-Type
at all reads as JSON
------------------------------------  -------------------------------------------------------------
not UTF-8                             400 invalid_json
------------------------------------  -------------------------------------------------------------
not JSON (a syntax error, truncated,  400 invalid_json
a huge line of garbage)
------------------------------------  -------------------------------------------------------------
JSON whose top level is not an        400 invalid_body
object (array, string, number, null)
------------------------------------  -------------------------------------------------------------
JSON only lenient parsers read: NaN   Forward (a rewrite would change them: NaN becomes null, a
/ Infinity, numbers past a double     lone surrogate cannot be written)
(1e999), lone surrogate escapes
("\\ud800"), a UTF-8 byte order mark
------------------------------------  -------------------------------------------------------------
an integer beyond 64 bits (even       Forward (orjson reads it as a float: a rewrite would round
5,000 digits)                         it)
------------------------------------  -------------------------------------------------------------
nesting deeper than factrail reads    Forward
(about 1,000 levels: 5,000 arrays,
1,500 objects)
------------------------------------  -------------------------------------------------------------
nesting from 255 levels (orjson       Read; a compaction cannot write it back and fails open (the
writes no deeper) to 1,000            original bytes go)
------------------------------------  -------------------------------------------------------------
duplicate keys                        Read, the last wins (as orjson, Python, JavaScript and Go
                                      read them); sent byte for byte unless compacted, when the new
                                      body holds each key once, with the value factrail read
------------------------------------  -------------------------------------------------------------
a huge single line (one long string,  Read like any other body: nothing here works by lines
no newline)
------------------------------------  -------------------------------------------------------------
any other JSON object                 Read (an unknown shape is then forwarded unchanged by the
                                      gateway)
====================================  =============================================================
"""

from __future__ import annotations

import json
import logging
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.datastructures import Headers

log = logging.getLogger("factrail.proxy")

ZLIB_CODINGS = {"gzip": 31, "x-gzip": 31, "deflate": 15}
"""Content codings factrail decodes → zlib `wbits` (gzip header; zlib header, raw as a
fallback for `deflate`, which clients send both ways)."""
MAX_CODINGS = 4
"""More stacked codings than this are not decoded (forwarded as they came)."""
_JSON_MEDIA = re.compile(r"^(application|text)/(json|[^;\s]*\+json)$")
_CLASSES = bytes(0x30 if 0x30 <= c <= 0x39 else 0x3A if c in b":,[" else 0x2E for c in range(256))
"""Digits to `0`, what may precede a number literal (`:`, `,`, `[`) to `:`, the rest to `.`."""
_CANDIDATE = b":" + b"0" * 19
_INT_RANGE = (-(2**63), 2**64 - 1)
"""Integers orjson reads exactly; past them it reads a float."""


@dataclass(frozen=True)
class Read:
    """A JSON object to compact; `decoded` when the body came under a content coding (a
    rewritten body then goes plain, without `Content-Encoding`)."""

    data: dict[str, Any]
    decoded: bool = False


@dataclass(frozen=True)
class Forward:
    """Forward the body as received, unread; `reason` is logged (but for the fast path's)."""

    reason: str


@dataclass(frozen=True)
class Reject:
    """A 4xx the gateway answers itself, in the route's error shape."""

    status: int
    message: str
    code: str


Verdict = Read | Forward | Reject


_SMALL = Forward("too small to reach a trigger")


class _TooLarge(Exception):
    pass


def classify(
    body: bytes, headers: Headers, *, limit: int, small: Callable[[bytes], bool]
) -> Verdict:
    """The verdict on a compaction route's body (see the module's table); never raises.

    `limit` bounds a decoded body; `small(plain)` is the gateway's fast path: True when the
    plain body cannot reach any trigger (it may also look for fenced names).
    """
    try:
        verdict = _classify(body, headers, limit, small)
    except Exception:
        log.warning("request body not classified; forwarded as sent", exc_info=True)
        return Forward("classification failed")
    if isinstance(verdict, Forward) and verdict is not _SMALL:
        log.info("request body forwarded unread", extra={"fields": {"reason": verdict.reason}})
    return verdict


def _classify(body: bytes, headers: Headers, limit: int, small: Callable[[bytes], bool]) -> Verdict:
    codings = _codings(headers.get("content-encoding", ""))
    plain = body
    if codings:
        unknown = [c for c in codings if c not in ZLIB_CODINGS]
        if unknown or len(codings) > MAX_CODINGS:
            return Forward(f"content coding {', '.join(unknown or codings)} is not decoded")
        try:
            for coding in reversed(codings):
                plain = _inflate(plain, ZLIB_CODINGS[coding], limit)
        except _TooLarge:
            return Reject(413, f"the decoded request body exceeds {limit} bytes", "body_too_large")
        except zlib.error:
            message = f"the request body is not valid {', '.join(codings)} data"
            return Reject(400, message, "invalid_encoding")
    if small(plain):
        return _SMALL
    if not _json_media(headers.get("content-type", "")):
        return Forward("the content type is not JSON")
    return _parse(plain, decoded=bool(codings))


def _parse(plain: bytes, *, decoded: bool) -> Verdict:
    try:
        data = orjson.loads(plain)
    except orjson.JSONDecodeError:
        return _lenient(plain)
    if not isinstance(data, dict):
        return Reject(400, "the request body must be a JSON object", "invalid_body")
    if _may_hold_wide_int(plain) and _has_wide_int(plain):
        return Forward("an integer beyond 64 bits")
    return Read(data, decoded)


def _lenient(plain: bytes) -> Verdict:
    """A body orjson refused: a 400 unless it is JSON a lenient parser reads (then forwarded)."""
    try:
        text = plain.decode("utf-8")
    except UnicodeDecodeError:
        return Reject(400, "the request body is not valid UTF-8", "invalid_json")
    try:  # numbers are not converted: a 5,000-digit integer is JSON, and no bound applies
        value = json.loads(
            text.removeprefix("\ufeff"), parse_int=_keep, parse_float=_keep, parse_constant=_keep
        )
    except RecursionError:
        return Forward("nested deeper than factrail reads")
    except ValueError:
        return Reject(400, "the request body is not valid JSON", "invalid_json")
    if not isinstance(value, dict):
        return Reject(400, "the request body must be a JSON object", "invalid_body")
    return Forward("JSON that factrail cannot write back as sent")


def _may_hold_wide_int(plain: bytes) -> bool:
    """Whether a run of 19 or more digits may be a number literal: it follows `:`, `,` or `[`
    (whitespace and a minus sign aside). Two passes in C, about 1 ms a MB; a 19-digit id inside
    a string mostly stands elsewhere, so the exact check seldom runs."""
    return _CANDIDATE in plain.translate(_CLASSES, b" \t\r\n-")


def _has_wide_int(plain: bytes) -> bool:
    """Whether an integer literal lies outside what orjson reads exactly."""
    wide = False

    def check(literal: str) -> int:
        nonlocal wide
        value = int(literal) if len(literal) <= 40 else _INT_RANGE[1] + 1
        wide = wide or not _INT_RANGE[0] <= value <= _INT_RANGE[1]
        return 0

    try:
        json.loads(plain, parse_int=check)
    except (RecursionError, ValueError):
        return True  # orjson read it but Python's parser cannot: do not rewrite it
    return wide


def _keep(literal: str) -> str:
    return literal


def _codings(header: str) -> list[str]:
    """The content codings in the order applied, `identity` left out."""
    parts = (part.strip().lower() for part in header.split(","))
    return [part for part in parts if part and part != "identity"]


def _json_media(content_type: str) -> bool:
    """Whether a `Content-Type` declares JSON (or is missing) in UTF-8."""
    if not content_type.strip():
        return True
    media, *params = (part.strip().lower() for part in content_type.split(";"))
    if not _JSON_MEDIA.match(media):
        return False
    charsets = [p.partition("=")[2].strip("\"' ") for p in params if p.startswith("charset=")]
    return all(c in ("utf-8", "utf8", "us-ascii") for c in charsets)


def _inflate(data: bytes, wbits: int, limit: int) -> bytes:
    """`data` decoded under one zlib coding, at most `limit` bytes out (else `_TooLarge`);
    `zlib.error` when it is not that coding. Concatenated gzip members are all decoded."""
    if wbits == 15 and data[:1] and (data[0] & 0x0F != 8 or int.from_bytes(data[:2]) % 31):
        wbits = -15  # no zlib header: raw deflate
    out = bytearray()
    rest = data
    while True:
        inflater = zlib.decompressobj(wbits)
        out += inflater.decompress(rest, limit + 1 - len(out))
        if len(out) > limit:
            raise _TooLarge
        if not inflater.eof:
            raise zlib.error("truncated")
        rest = inflater.unused_data
        if not rest:
            return bytes(out)
        if wbits != 31:
            raise zlib.error("trailing data")
