"""The redaction pass: known values, the key families, auth-scheme values, URL passwords and
tokens, `curl -u` passwords, then the slots (named slots, key/value pairs, cookies in every
syntax, `Authorization:` of any scheme) and secret CLI flags, each replaced by
`[REDACTED:<label>]`. A text holding string escapes has its slots read in the text the escapes
encode, and replaced where they lie.

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
from factrail.core.redact.escapes import Unescaped, has_escapes
from factrail.core.redact.families import FAMILIES, Family, is_placeholder, standalone
from factrail.core.redact.forms import CodeContext
from factrail.core.redact.headers import (
    AUTHORIZATION,
    COOKIE,
    COOKIE_ANY_CASE,
    COOKIE_ARGS,
    COOKIE_JAR,
    authorization_spans,
    cookie_arg_spans,
    cookie_jar_spans,
    cookie_spans,
    reads_as_key,
)
from factrail.core.redact.pairs import pair_spans
from factrail.core.redact.slots import (
    CLI_FLAG,
    FLAG_ANCHORS,
    LOWER_ANCHORS,
    NAMED_SLOTS,
    NAMED_SLOTS_ANY_CASE,
    SLOT_ANCHORS,
    Edit,
    Edits,
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
_URL_CREDENTIALS = re.compile(r"://([^\s/@:\"'<>`]{0,256})(?::([^\s@\"'<>`]{1,128}))?@")
"""`scheme://user:password@`: the user may be empty (`redis://:pw@host`) and the password may
hold `/` (raw base64), which `_url_password_is_secret` tells from a port and a path; and
`scheme://TOKEN@host`, a token as the user with no password (`https://<token>@github.com`)."""
_WORDS_USER = re.compile(
    r"[a-z]+(?:[._-][a-z]+)*[._-]?\d{0,4}|(?:[A-Z][a-z]+){1,3}\d{0,4}|[a-z]+(?:[A-Z][a-z]+){1,2}\d{0,4}"
)
"""A user name in words (`firstname.lastname`, `deploy-bot2`, `JaneDoe`), not a token."""
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
        (
            "known",
            *(f.name for f in FAMILIES),
            "bearer",
            "url-password",
            "url-token",
            "curl-user",
            "named",
        )
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
    label_of: Callable[[re.Match[str]], str] | None = None,
) -> str:
    """Replace the matches of `pattern` in `scan` (same offsets as `text`, default `text`),
    counted under `label` (or `label_of` the match)."""
    pieces: list[str] = []
    last = 0
    for m in pattern.finditer(text if scan is None else scan):
        new = replace(text, m)
        if new is not None:
            pieces += (text[last : m.start()], new)
            last = m.end()
            name = label if label_of is None else label_of(m)
            tally[name] = tally.get(name, 0) + 1
            if edits is not None:
                edits.append(_changed(text, m.start(), m.end(), new, name))
    return "".join((*pieces, text[last:])) if pieces else text


def _changed(text: str, start: int, end: int, new: str, label: str) -> Edit:
    """The edit replacing `text[start:end]` by `new`, narrowed to the part that changed (a
    value replacer keeps the label around the value)."""
    old = text[start:end]
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return start + head, end - tail, len(new) - head - tail, label


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


_NOT_IN_TOKEN = frozenset("[]{}")


def _user_is_token(user: str) -> bool:
    """A URL user that is a token: 16+ chars of two classes of lower, upper and digit, not a
    name in words nor an e-mail address."""
    if "%40" in user or _WORDS_USER.fullmatch(user) or is_placeholder_value(user):
        return False
    classes = (
        any(c.islower() for c in user)
        + any(c.isupper() for c in user)
        + any(c.isdigit() for c in user)
    )
    return classes >= 2


def _url_replacer() -> Replace:
    password = _value_replacer(2, _url_password_is_secret, "url-password")
    token = _value_replacer(1, _user_is_token, "url-token")

    def replace(text: str, m: re.Match[str]) -> str | None:
        user = m.group(1)
        if "[REDACTED" in user or not _url_is_credential(text, m):
            return None
        if m.group(2) is None:
            return token(text, m) if len(user) >= 16 and not _NOT_IN_TOKEN & set(user) else None
        if len(user) > 64:
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


_AUTH_REPLACER = _value_replacer(3, reads_as_key, "bearer")
_CURL_REPLACER = _value_replacer(3, _curl_password_is_secret, "curl-user")
_URL_REPLACER = _url_replacer()
_FAMILY_REPLACERS = {id(f): _family_replacer(f) for f in FAMILIES}


_PAIR_ANCHORS = frozenset(('value"', "value'", "value:", "value=", "value\\"))
"""A key/value pair's value field (`"value":`, `value:`, `\\"value\\"`)."""
_JAR_ANCHORS = frozenset(("\ttrue\t", "\tfalse\t", "\\ttrue\\t", "\\tfalse\\t"))
"""A cookie-jar line's flags, as written or escaped in a string."""
_HEADER_ANCHORS = (
    *sorted(_PAIR_ANCHORS),
    *("authorization", "cookie", "curl", "--cookie", "-b"),
    *sorted(_JAR_ANCHORS),
    "\\/",  # an escaped slash, which hides a URL from the families
)
"""Literals of the passes beside the named slots: a pair's value field, `Authorization:`,
cookie slots, `curl -b`/`--cookie`, cookie-jar lines."""
_SLOTS_ANCHORS = SLOT_ANCHORS | frozenset(_HEADER_ANCHORS)
_CASE_ANCHOR_LIST = tuple(
    dict.fromkeys(a for f in FAMILIES if f.any_case is None for a in f.anchors)
)
"""The anchors of the case-sensitive families (ASCII, 2 chars or more)."""
_LOWER_ANCHOR_LIST = tuple(
    dict.fromkeys(
        (
            *(a for f in FAMILIES if f.any_case is not None for a in f.anchors),
            *LOWER_ANCHORS,
            *FLAG_ANCHORS,
            *_HEADER_ANCHORS,
        )
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


_CASE_ANCHORS = _automaton(_CASE_ANCHOR_LIST)
"""The same anchors found in one pass (most outputs hold none), when the C kernel is absent."""
_LOWER_ANCHORS = _automaton(_LOWER_ANCHOR_LIST)


_BY_ANCHOR: dict[str, tuple[int, ...]] = {}
for _i, _family in enumerate(FAMILIES):
    for _anchor in _family.anchors:
        _BY_ANCHOR[_anchor] = (*_BY_ANCHOR.get(_anchor, ()), _i)


def _families(present: set[str], low: set[str]) -> list[Family]:
    """The families one of whose anchors occurs (in `present`, or lower-cased in `low`), in
    their order: the rest cannot match."""
    found = {i for anchors in (present, low) for a in anchors for i in _BY_ANCHOR.get(a, ())}
    return [FAMILIES[i] for i in sorted(found)]


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


Trace = list[list[Edit]]
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
                    edits.append((at, at + len(value), len(mark), "known"))
                    at = text.find(value, at + len(value))
            text = text.replace(value, mark)
            tally["known"] = tally.get("known", 0) + hits
    return text


def _replace(
    text: str, spans: list[tuple[int, int, str]], tally: dict[str, int], edits: Edits
) -> str:
    """Replace each (start, end, label) span of `text`, in order; one overlapping an earlier
    one is skipped."""
    pieces: list[str] = []
    last = 0
    for start, end, label in sorted(spans):
        if start < last:
            continue
        mark = marker(label)
        pieces += (text[last:start], mark)
        last = end
        tally[label] = tally.get(label, 0) + 1
        if edits is not None:
            edits.append((start, end, len(mark), label))
    return "".join((*pieces, text[last:])) if pieces else text


_ESCAPE_ANCHORS = SLOT_ANCHORS | _PAIR_ANCHORS | {"cookie", "authorization", "\\/"} | _JAR_ANCHORS
"""What, in a text holding escapes, is worth a look at the text they encode (`\\/` hides
URLs from the families)."""


def _slots(text: str, lowered: str, low: set[str], tally: dict[str, int], edits: Edits) -> str:
    """Replace named slots, key/value pairs, cookies and `Authorization:` credentials, all
    found over one version of the text."""
    same = len(lowered) == len(text)
    scan = lowered if same else text
    context = CodeContext(text)
    spans: list[tuple[int, int, str]] = []
    if "authorization" in low and same:
        spans += (
            (s, e, "bearer")
            for m in AUTHORIZATION.finditer(scan)
            for s, e in authorization_spans(text, m)
        )
    if not low.isdisjoint(SLOT_ANCHORS):
        patterns = NAMED_SLOTS if same else NAMED_SLOTS_ANY_CASE
        spans += ((s, e, "named") for s, e in named_slots(text, scan, patterns, low, context))
    if same and not low.isdisjoint(_PAIR_ANCHORS):
        spans += ((s, e, "named") for s, e in pair_spans(text, scan, context))
    if "cookie" in low:
        pattern = COOKIE if same else COOKIE_ANY_CASE
        spans += (
            (s, e, "named")
            for m in pattern.finditer(scan)
            for s, e in cookie_spans(text, m, context)
        )
    if ("--cookie" in low or "-b" in low) and "curl" in low:
        spans += (
            (s, e, "named")
            for pattern in COOKIE_ARGS
            for m in pattern.finditer(text)
            for s, e in cookie_arg_spans(text, m)
        )
    if not low.isdisjoint(_JAR_ANCHORS):
        spans += (
            (s, e, "named") for m in COOKIE_JAR.finditer(text) for s, e in cookie_jar_spans(text, m)
        )
    return _replace(text, spans, tally, edits) if spans else text


_MAX_DEPTH = 1
"""How many levels of string escapes are undone: one (a tool call's arguments as a judge sees
them); the slots read a quote escaped once more (`\\"password\\": \\"…\\"`) as such."""


def _escaped(
    text: str,
    known: Iterable[str],
    low: set[str],
    tally: dict[str, int],
    trace: Trace | None,
    depth: int,
) -> tuple[str, int, dict[str, int]]:
    """Redact the slots of `text` in what it holds once its string escapes are undone (a
    superset of what its own slots show), where they lie in `text`; with `\\/` in it, the
    URL families too. The text's lower-case anchors stand for the view's: an escape is never
    inside a literal, and a keyword before an escaped quote has its `\\` form."""
    un = Unescaped(text)
    inner: Trace = []
    full = "\\/" in text
    if _redact(un.view, known, inner, depth + 1, full, None if full else low).count:
        spans = []
        for start, end, label in _labelled(inner):
            s, e = un.back(start), un.back(end)
            if "[REDACTED:" not in text[max(0, s - 24) : e + 1]:
                spans.append((s, e, label))
        if spans:
            text = _replace(text, spans, tally, _pass(trace))
    return text, sum(tally.values()), tally


def _redact(
    text: str,
    known: Iterable[str],
    trace: Trace | None,
    depth: int = 0,
    full: bool = True,
    anchors: set[str] | None = None,
) -> Redacted:
    """`redact`, recording each pass's replacements in `trace` when given. Below the top
    `depth` (in the text an escape level encodes) only what escapes can hide is looked for,
    unless `full` (the text held `\\/`, which hides URLs from the families); `anchors` are
    the lower-case anchors when known."""
    tally: dict[str, int] = {}
    if known and full:
        text = _known(text, known, tally, trace)
    tracing = trace is not None
    present = anchors_in(text) if full else set()
    lowered, lowered_of = text.lower(), text
    low = _lower_anchors_in(lowered) if anchors is None else anchors  # of `lowered_of`
    for family in _families(present, low) if full else ():
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
    if full and ("Bearer" in text or "Basic" in text or "Token" in text):
        text = _sub(_AUTH, text, _AUTH_REPLACER, "bearer", tally, _pass(trace) if tracing else None)
    if full and "://" in text:
        text = _sub(
            _URL_CREDENTIALS,
            text,
            _URL_REPLACER,
            "url-password",
            tally,
            _pass(trace) if tracing else None,
            label_of=lambda m: "url-token" if m.group(2) is None else "url-password",
        )
    if full and "curl" in text:
        text = _sub(
            _CURL_USER, text, _CURL_REPLACER, "curl-user", tally, _pass(trace) if tracing else None
        )
    if lowered_of is not text:
        lowered = text.lower()
        low = _lower_anchors_in(lowered)
    if (
        depth < _MAX_DEPTH and not low.isdisjoint(_ESCAPE_ANCHORS) and has_escapes(text)
    ):  # the slots are read in what the escapes encode, a level down
        return Redacted(*_escaped(text, known, low, tally, trace, depth))
    if not low.isdisjoint(_SLOTS_ANCHORS):
        text = _slots(text, lowered, low, tally, _pass(trace) if tracing else None)
    if "--" in text and not (low.isdisjoint(SLOT_ANCHORS) and low.isdisjoint(FLAG_ANCHORS)):
        text = _sub(
            CLI_FLAG,
            text,
            flag_replacer,
            "named",
            tally,
            _pass(trace) if tracing else None,
        )
    return Redacted(text, sum(tally.values()), tally)


def redact(text: str, known: Iterable[str] = ()) -> Redacted:
    """Replace every secret-shaped string in `text`; `known` values (≥ 8 bytes) go first."""
    return _redact(text, known, None)


def _back(edits: list[Edit], pos: int, end: bool) -> int:
    """Where offset `pos` of a pass's output was in its input; inside a replacement, that
    replacement's start (or end, for the `end` of a span)."""
    shift = 0
    for start, stop, length, _ in edits:
        out_start = start + shift
        out_end = out_start + length
        if pos < out_start or (end and pos == out_start):
            break
        if pos < out_end or (end and pos == out_end):
            return stop if end else start
        shift += length - (stop - start)
    return pos - shift


def _labelled(trace: Trace) -> list[tuple[int, int, str]]:
    """The (start, end, label) of every replaced part of the text a traced pass began with,
    in order, overlapping ones merged (under the first one's label)."""
    spans: list[tuple[int, int, str]] = []
    for edits in reversed(trace):
        if not edits:
            continue
        edits.sort()
        mapped = [(_back(edits, s, False), _back(edits, e, True), la) for s, e, la in spans]
        spans = sorted([*mapped, *((s, e, la) for s, e, _, la in edits)])
        merged: list[tuple[int, int, str]] = []
        for s, e, la in spans:
            if merged and s <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(e, merged[-1][1]), merged[-1][2])
            else:
                merged.append((s, e, la))
        spans = merged
    return spans


def secret_spans(text: str, known: Iterable[str] = ()) -> list[tuple[int, int]]:
    """The (start, end) of every part of `text` that `redact` replaces, in order, merged."""
    trace: Trace = []
    _redact(text, known, trace)
    return [(s, e) for s, e, _ in _labelled(trace)]


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
