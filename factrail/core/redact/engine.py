"""The redaction pass: known values, the key families, auth-scheme values, URL and `curl -u`
passwords, named slots, cookies and secret CLI flags, each replaced by `[REDACTED:<label>]`.

Every pattern is compiled once and skipped outright when its literal anchor is absent (one pass
finds the anchors), because this runs over every saved output (megabytes) and every judge
request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from ahocorasick import Automaton

from factrail.core.kernels import active
from factrail.core.redact.families import FAMILIES, Family, is_placeholder, standalone
from factrail.core.redact.slots import (
    CLI_FLAG,
    COOKIE,
    COOKIE_ANCHOR,
    COOKIE_ANY_CASE,
    LOWER_ANCHORS,
    NAMED_SLOTS,
    NAMED_SLOTS_ANY_CASE,
    SLOT_ANCHORS,
    Edits,
    cookies,
    flag_replacer,
    marker,
    named_slots,
)
from factrail.core.redact.values import is_path, is_placeholder_value

_K = active()


class Redacted(NamedTuple):
    """Redacted text, the number of replacements and their count per label."""

    text: str
    count: int  # type: ignore[assignment]  # shadows tuple.count on purpose
    families: dict[str, int]


class RedactionCounts(NamedTuple):
    """Replacement counts of a redacted JSON value, in total and per label."""

    count: int  # type: ignore[assignment]  # shadows tuple.count on purpose
    families: dict[str, int]


_TOKEN_SCHEME = standalone("Token", 5, r"[\w-]")
"""`SPL-Token …` is a name, not the `Token` scheme."""
_AUTH = re.compile(
    rf"({standalone('Bearer', 6)}|{standalone('Basic', 5)}|{_TOKEN_SCHEME})"
    r"([ \t]{1,4})([A-Za-z0-9._~+/=-]{8,})"
)
_URL_CREDENTIALS = re.compile(r"://([^\s/@:\"'<>`]{0,64}):([^\s@\"'<>`]{1,128})@")
"""`scheme://user:password@`: the user may be empty (`redis://:pw@host`) and the password may
hold `/` (raw base64), which `_url_password_is_secret` tells from a port and a path."""
_URL_SCHEME = re.compile(r"\b[a-z][a-z0-9+.-]{1,15}\Z", re.IGNORECASE)
"""A URL scheme ending right before `://` (searched backwards from each `://` match)."""
_PORT = re.compile(r"(?:[^/]*:)?\d{2,5}\]?")
"""What precedes the first `/` of a `host:8080/path@x` "password": a port, not a secret."""

_CURL_USER = re.compile(
    r"curl\b(?:[^\n]|\\\n){0,400}?[ \t](?:-u|--user)(?:=|[ \t]{1,4})"
    r"([\"']?)([^\s:\"']{1,64}):([^\s\"']{1,128})\1(?=\s|\Z)"
)
"""`curl … -u user:password` (gitleaks' curl-auth-user): the password, group 3, goes."""


FAMILY_LABELS: tuple[str, ...] = tuple(
    dict.fromkeys(
        ("known", *(f.name for f in FAMILIES), "bearer", "url-password", "curl-user", "named")
    )
)
"""Every label `redact` can count: a bounded set, fit for a metric label."""


Replace = Callable[[str, re.Match[str]], str | None]
"""The replacement of a match (positions taken in `text`), or None to leave it as it is."""


def _sub(
    pattern: re.Pattern[str],
    text: str,
    replace: Replace,
    label: str,
    tally: dict[str, int],
    edits: Edits,
    scan: str | None = None,
) -> str:
    """Replace the matches of `pattern` in `scan` (same offsets as `text`, default `text`)."""
    pieces: list[str] = []
    last = 0
    for m in pattern.finditer(text if scan is None else scan):
        new = replace(text, m)
        if new is not None:
            pieces += (text[last : m.start()], new)
            last = m.end()
            tally[label] = tally.get(label, 0) + 1
            if edits is not None:
                edits.append(_changed(text, m.start(), m.end(), new))
    return "".join((*pieces, text[last:])) if pieces else text


def _changed(text: str, start: int, end: int, new: str) -> tuple[int, int, int]:
    """The edit replacing `text[start:end]` by `new`, narrowed to the part that changed (a
    value replacer keeps the label around the value)."""
    old = text[start:end]
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return start + head, end - tail, len(new) - head - tail


def _value_replacer(group: int, is_secret: Callable[[str], bool], label: str) -> Replace:
    """Keep what precedes `group`, replace the group with the marker when `is_secret`."""
    mark = marker(label)

    def replace(text: str, m: re.Match[str]) -> str | None:
        start, end = m.span(group)
        if not is_secret(text[start:end]):
            return None
        return text[m.start() : start] + mark + text[end : m.end()]

    return replace


def _url_is_credential(text: str, m: re.Match[str]) -> bool:
    start = m.start()
    return _URL_SCHEME.search(text, max(0, start - 16), start) is not None


def _url_password_is_secret(password: str) -> bool:
    """A URL password unless a placeholder, a masked value or a path (`host:/srv/x@y`)."""
    if "[REDACTED" in password or password[0] in "$%<{[*" or is_placeholder_value(password):
        return False
    return not (password[0] == "/" and is_path(password))


def _is_host(name: str) -> bool:
    """What reads as a host rather than a user name: dotted, an address, `localhost`."""
    return "." in name or name[:1] == "[" or name.lower() == "localhost" or name.isdigit()


def _url_replacer() -> Replace:
    password = _value_replacer(2, _url_password_is_secret, "url-password")

    def replace(text: str, m: re.Match[str]) -> str | None:
        user = m.group(1)
        if "[REDACTED" in user or not _url_is_credential(text, m):
            return None
        head, slash, _ = m.group(2).partition("/")
        if slash and _is_host(user) and _PORT.fullmatch(head):
            return None  # `host:8080/users/x@y.z`: a port and a path, no `user:password@`
        return password(text, m)

    return replace


def _curl_password_is_secret(password: str) -> bool:
    return password[0] not in "$%<{[*" and not is_placeholder_value(password)


def _family_replacer(family: Family) -> Replace:
    if family.keeps_label:
        return _value_replacer(2, lambda v: not is_placeholder(v), family.name)
    mark = marker(family.name)
    return lambda text, m: None if is_placeholder(text[m.start() : m.end()]) else mark


def _auth_value_is_secret(value: str) -> bool:
    """An auth-scheme value is a credential unless it reads as a word (`Bearer authentication`,
    `Token based`, `SPL-Token Command-line`): ASCII letters (words may be joined by `-`), in one
    ordinary case and not over 24 chars."""
    value = value.rstrip(".,;:")  # `HTTP Basic authentication.`
    if ("-" in value or "_" in value) and value.isascii():  # `Command-line`, `access_token`
        parts = value.replace("_", "-").split("-")
        return not all(p.isalpha() and (p.islower() or p.istitle()) for p in parts)
    if not (value.isascii() and value.isalpha()):
        return True
    return len(value) > 24 or not (value.islower() or value.istitle())


_AUTH_REPLACER = _value_replacer(3, _auth_value_is_secret, "bearer")
_CURL_REPLACER = _value_replacer(3, _curl_password_is_secret, "curl-user")
_URL_REPLACER = _url_replacer()
_FAMILY_REPLACERS = {id(f): _family_replacer(f) for f in FAMILIES}


_CASE_ANCHOR_LIST = tuple(
    dict.fromkeys(a for f in FAMILIES if f.any_case is None for a in f.anchors)
)
"""The anchors of the case-sensitive families (ASCII, 2 chars or more)."""
_LOWER_ANCHOR_LIST = tuple(
    dict.fromkeys(
        (*(a for f in FAMILIES if f.any_case is not None for a in f.anchors), *LOWER_ANCHORS)
    )
)
"""The anchors looked for in the lower-cased text: the case-insensitive families' and the named
slots' (ASCII, 2 chars or more)."""


def _automaton(anchors: tuple[str, ...]) -> Automaton:
    auto = Automaton()
    for anchor in anchors:
        auto.add_word(anchor, anchor)
    auto.make_automaton()
    return auto


_ANY_CASE_FAMILIES = tuple(f for f in FAMILIES if f.any_case is not None)
"""The families that run on a text holding no case-sensitive anchor (most texts)."""
_CASE_ANCHORS = _automaton(_CASE_ANCHOR_LIST)
"""The same anchors found in one pass (most outputs hold none), when the C kernel is absent."""
_LOWER_ANCHORS = _automaton(_LOWER_ANCHOR_LIST)


def anchors_in(text: str) -> set[str]:
    """The case-sensitive families' anchors that occur in `text`."""
    if (kernel := _K.anchors_in) is not None:
        return kernel(text, _CASE_ANCHOR_LIST)
    return {anchor for _, anchor in _CASE_ANCHORS.iter(text)}


def _lower_anchors_in(lowered: str) -> set[str]:
    """The case-insensitive families' and named slots' anchors that occur in `lowered`."""
    if (kernel := _K.anchors_in) is not None:
        return kernel(lowered, _LOWER_ANCHOR_LIST)
    return {anchor for _, anchor in _LOWER_ANCHORS.iter(lowered)}


Trace = list[list[tuple[int, int, int]]]
"""Each pass's replacements, in order (see `Edits`)."""


def _pass(trace: Trace | None) -> Edits:
    """A new pass's replacement list, when tracing."""
    if trace is None:
        return None
    trace.append([])
    return trace[-1]


def _known(text: str, known: Iterable[str], tally: dict[str, int], trace: Trace | None) -> str:
    """Replace the configured values (≥ 8 bytes), longest first."""
    mark = marker("known")
    for value in sorted({k for k in known if len(k.encode()) >= 8}, key=len, reverse=True):
        hits = text.count(value)
        if hits:
            if (edits := _pass(trace)) is not None:
                at = text.find(value)
                while at >= 0:
                    edits.append((at, at + len(value), len(mark)))
                    at = text.find(value, at + len(value))
            text = text.replace(value, mark)
            tally["known"] = tally.get("known", 0) + hits
    return text


def _redact(text: str, known: Iterable[str], trace: Trace | None) -> Redacted:
    """`redact`, recording each pass's replacements in `trace` when given."""
    tally: dict[str, int] = {}
    if known:
        text = _known(text, known, tally, trace)
    tracing = trace is not None
    present = anchors_in(text)
    lowered, lowered_of = text.lower(), text
    low = _lower_anchors_in(lowered)  # the lower-case anchors, of `lowered_of`
    for family in FAMILIES if present else _ANY_CASE_FAMILIES:
        if family.any_case is None:
            if present.isdisjoint(family.anchors):
                continue
            scan = text
        else:
            if lowered_of is not text:
                lowered, lowered_of = text.lower(), text
                low = _lower_anchors_in(lowered)
            if low.isdisjoint(family.anchors):
                continue
            scan = lowered
        before = text
        pattern = family.pattern
        if family.any_case is not None and len(scan) != len(text):  # `İ` moved the offsets
            pattern, scan = family.any_case, text
        replace = _FAMILY_REPLACERS[id(family)]
        edits = _pass(trace) if tracing else None
        text = _sub(pattern, text, replace, family.name, tally, edits, scan)
        if text is not before:
            present = anchors_in(text)
    if "Bearer" in text or "Basic" in text or "Token" in text:
        text = _sub(_AUTH, text, _AUTH_REPLACER, "bearer", tally, _pass(trace) if tracing else None)
    if "://" in text:
        text = _sub(
            _URL_CREDENTIALS,
            text,
            _URL_REPLACER,
            "url-password",
            tally,
            _pass(trace) if tracing else None,
        )
    if "curl" in text:
        text = _sub(
            _CURL_USER, text, _CURL_REPLACER, "curl-user", tally, _pass(trace) if tracing else None
        )
    if lowered_of is not text:
        lowered = text.lower()
        low = _lower_anchors_in(lowered)
    if not low.isdisjoint(SLOT_ANCHORS):
        same = len(lowered) == len(text)
        patterns = NAMED_SLOTS if same else NAMED_SLOTS_ANY_CASE
        text = named_slots(
            text, lowered if same else text, patterns, low, tally, _pass(trace) if tracing else None
        )
        if "--" in text:
            text = _sub(
                CLI_FLAG, text, flag_replacer, "named", tally, _pass(trace) if tracing else None
            )
    if COOKIE_ANCHOR in low:
        scan, pattern = text.lower(), COOKIE
        if len(scan) != len(text):
            scan, pattern = text, COOKIE_ANY_CASE
        text = cookies(text, scan, pattern, tally, _pass(trace) if tracing else None)
    return Redacted(text, sum(tally.values()), tally)


def redact(text: str, known: Iterable[str] = ()) -> Redacted:
    """Replace every secret-shaped string in `text`; `known` values (≥ 8 bytes) go first."""
    return _redact(text, known, None)


def _back(edits: list[tuple[int, int, int]], pos: int, end: bool) -> int:
    """Where offset `pos` of a pass's output was in its input; inside a replacement, that
    replacement's start (or end, for the `end` of a span)."""
    shift = 0
    for start, stop, length in edits:
        out_start = start + shift
        out_end = out_start + length
        if pos < out_start or (end and pos == out_start):
            break
        if pos < out_end or (end and pos == out_end):
            return stop if end else start
        shift += length - (stop - start)
    return pos - shift


def secret_spans(text: str, known: Iterable[str] = ()) -> list[tuple[int, int]]:
    """The (start, end) of every part of `text` that `redact` replaces, in order, merged."""
    trace: Trace = []
    _redact(text, known, trace)
    spans: list[tuple[int, int]] = []
    for edits in reversed(trace):
        if not edits:
            continue
        edits.sort()
        mapped = [(_back(edits, s, False), _back(edits, e, True)) for s, e in spans]
        spans = sorted([*mapped, *((s, e) for s, e, _ in edits)])
        merged: list[tuple[int, int]] = []
        for s, e in spans:
            if merged and s <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
            else:
                merged.append((s, e))
        spans = merged
    return spans


def redact_value(value: Any, known: Iterable[str] = ()) -> tuple[Any, RedactionCounts]:
    """Redact every string inside a JSON value; object keys and non-strings stay as they are."""
    known = tuple(known)
    families: dict[str, int] = {}

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            r = redact(v, known)
            for label, n in r.families.items():
                families[label] = families.get(label, 0) + n
            return r.text
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    new = walk(value)
    return new, RedactionCounts(sum(families.values()), families)
