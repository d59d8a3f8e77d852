"""Credential redaction for everything that leaves the process or reaches disk.

`redact` replaces known values, provider key families, auth-scheme values, URL passwords, named
secret slots and secret CLI flags with `[REDACTED:<label>]`, counting each replacement per label.
Every pattern is compiled once and skipped outright when its literal anchor is absent, because
this runs over every saved output (megabytes) and every judge request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ahocorasick import Automaton

from factrail.core.kernels import active

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


@dataclass(frozen=True, slots=True)
class _Family:
    name: str
    pattern: re.Pattern[str]
    anchors: tuple[str, ...]
    """Literals one of which must occur in the text for the pattern to match at all."""
    any_case: re.Pattern[str] | None = None
    """Set for case-insensitive families: then `pattern` (lower-case) and the anchors are matched
    over the lower-cased text, and this one over text whose lower-casing changes its length."""
    keeps_label: bool = False
    """Group 1 is a label that stays; only the value, group 2, is replaced."""


def _standalone(literal: str, width: int, before: str = r"\w") -> str:
    """`literal` (matching `width` chars) not preceded by a char of class `before`. The check is
    a lookbehind placed after the literal so that the regex engine can scan for the literal; a
    leading lookbehind or `\\b` makes it try every offset of the text."""
    return f"{literal}(?<!{before}.{{{width}}})"


_SK_BEFORE = r"[A-Za-z0-9-]"
"""Keys of the `sk-` families stand alone: `task-…` or `desk-ant-…` is not a key (§9.16)."""


def _family(name: str, regex: str, *anchors: str, flags: int = 0, label: bool = False) -> _Family:
    return _Family(
        name,
        re.compile(regex, flags & ~re.IGNORECASE),
        anchors,
        re.compile(regex, flags) if flags & re.IGNORECASE else None,
        keeps_label=label,
    )


_FAMILIES: tuple[_Family, ...] = (
    _family(
        "private-key",
        r"-----BEGIN ([A-Z0-9 ]{0,40})PRIVATE KEY((?: BLOCK)?)-----"
        r".*?(?:-----END \1PRIVATE KEY\2-----|\Z)",
        "-----BEGIN ",
        flags=re.DOTALL,
    ),
    _family("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", "eyJ"),
    _family("sk-ant", _standalone("sk-ant-", 7, _SK_BEFORE) + r"[A-Za-z0-9_-]{8,}", "sk-ant-"),
    _family("sk-proj", _standalone("sk-proj-", 8, _SK_BEFORE) + r"[A-Za-z0-9_-]{20,}", "sk-proj-"),
    _family("sk-or-v1", _standalone("sk-or-v1-", 9, _SK_BEFORE) + r"[A-Za-z0-9]{30,}", "sk-or-v1-"),
    _family(
        "sk", _standalone("sk-", 3, _SK_BEFORE) + r"(?:svcacct-|admin-)?[A-Za-z0-9_.-]{16,}", "sk-"
    ),
    _family(
        "stripe", _standalone("[sr]k_(?:live|test)_", 8) + r"[A-Za-z0-9]{16,}", "_live_", "_test_"
    ),
    _family("github-pat", r"github_pat_[A-Za-z0-9_]{16,}", "github_pat_"),
    _family(
        "gh-token",
        _standalone("gh[pousr]_", 4) + r"[A-Za-z0-9]{16,}",
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
    ),
    _family("glpat", r"glpat-[A-Za-z0-9_-]{20,}", "glpat-"),
    _family("hf", _standalone("hf_", 3) + r"[A-Za-z0-9]{20,}", "hf_"),
    _family("npm", _standalone("npm_", 4) + r"[A-Za-z0-9]{20,}", "npm_"),
    _family("nia", _standalone("nk_", 3) + r"[A-Za-z0-9]{20,}", "nk_"),
    _family("google-api", r"AIza[0-9A-Za-z_-]{30,}", "AIza"),
    _family("slack", _standalone("xox[abeprs]-", 5) + r"[0-9A-Za-z-]{10,}", "xox"),
    _family(
        "aws-akia",
        _standalone("A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|NPA|NVA)", 4) + r"[0-9A-Z]{16}\b",
        *("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA"),
    ),
    _family(
        "aws-secret",
        r"(aws_secret_access_key[\"'\s=:]+)([A-Za-z0-9/+=]{30,})",
        "aws_secret_access_key",
        flags=re.IGNORECASE,
        label=True,
    ),
    _family("nostr-nsec", _standalone("nsec1", 5) + r"[02-9ac-hj-np-z]{20,}", "nsec1"),
    _family("pplx", r"pplx-[A-Za-z0-9]{20,}", "pplx-"),
    _family("xai", r"xai-[A-Za-z0-9]{20,}", "xai-"),
    _family("groq", r"gsk_[A-Za-z0-9]{20,}", "gsk_"),
    _family("sakana", r"fish_[A-Za-z0-9_]{20,}", "fish_"),
    _family("keenable", r"keen_[A-Za-z0-9_]{20,}", "keen_"),
    _family("sendgrid", r"SG\.[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}", "SG."),
    _family("telegram", r"\d(?<!\w\d)\d{7,11}:AA[A-Za-z0-9_-]{30,}", ":AA"),
)

_PROVIDER_PREFIX = re.compile(r"^[A-Za-z]+[_-](?:[a-z0-9]+-)?")
_REPEATED_TAIL = re.compile(r"^(?:[A-Za-z0-9]{1,10}[_-])*(.)\1{7,}\Z")

_AUTH = re.compile(
    rf"({_standalone('Bearer', 6)}|{_standalone('Basic', 5)}|{_standalone('Token', 5)})"
    r"([ \t]{1,4})([A-Za-z0-9._~+/=-]{8,})"
)
_URL_CREDENTIALS = re.compile(r"://[^\s/@:]{1,64}:([^\s@/]{1,128})@")
_URL_SCHEME = re.compile(r"\b[a-z][a-z0-9+.-]{1,15}\Z", re.IGNORECASE)
"""A URL scheme ending right before `://` (searched backwards from each `://` match)."""
_SLOT_VALUE = r"[^\s\"'`<>{}()\[\],;\\]{8,}"
_SLOT_LABEL = (
    r"(?:api[_-]?key|secret|token|passw(?:or)?d|private[_-]?key|access[_-]?key)"
    r"[\w-]{0,20}[\"']?[ \t]{0,3}[:=][ \t]{0,3}[\"']?"
)
_NAMED_SLOT = re.compile(rf"{_SLOT_LABEL}({_SLOT_VALUE})")
"""Matched over the lower-cased text (a case-insensitive alternation is ten times slower)."""
_NAMED_SLOT_ANY_CASE = re.compile(rf"{_SLOT_LABEL}({_SLOT_VALUE})", re.IGNORECASE)
"""For the rare text whose lower-casing changes its length (`İ`), so offsets would not map."""
_CLI_FLAG = re.compile(
    r"--([A-Za-z0-9-]{1,52}+)(?:=|[ \t]{1,3})[\"']?"  # possessive: no backtracking on the name
    rf"({_SLOT_VALUE})"
)
_FLAG_KEYWORD = re.compile(r"api-?key|secret|token|passw(?:or)?d", re.IGNORECASE)
"""A secret flag's name holds one of these (within 30 chars before and 20 after)."""
_SLOT_ANCHORS = ("key", "secret", "token", "passw")
_NOT_SECRET_WORDS = frozenset(
    {"true", "false", "null", "undefined", "none", "required", "optional", "string", "number"}
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_.]*")

FAMILY_LABELS: tuple[str, ...] = (
    "known",
    *(f.name for f in _FAMILIES),
    "bearer",
    "url-password",
    "named",
)
"""Every label `redact` can count: a bounded set, fit for a metric label."""


def _marker(label: str) -> str:
    return f"[REDACTED:{label}]"


def _is_placeholder(body: str) -> bool:
    """`sk-xxxxxxxx…`-style stand-ins: nothing, or one repeated character, after the prefix."""
    rest = _PROVIDER_PREFIX.sub("", body, count=1)
    return len(set(rest)) <= 1 or _REPEATED_TAIL.match(body) is not None


def _is_slot_secret(value: str) -> bool:
    """Whether a named-slot or CLI-flag value looks like a real secret (not `$VAR`, `true`…)."""
    if value[0] in "$%/~." or value.lower() in _NOT_SECRET_WORDS:
        return False
    return _IDENTIFIER.fullmatch(value) is None and len(set(value)) > 1


Replace = Callable[[str, re.Match[str]], str | None]
"""The replacement of a match (positions taken in `text`), or None to leave it as it is."""


def _sub(
    pattern: re.Pattern[str],
    text: str,
    replace: Replace,
    label: str,
    tally: dict[str, int],
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
    return "".join((*pieces, text[last:])) if pieces else text


def _value_replacer(group: int, is_secret: Callable[[str], bool], label: str) -> Replace:
    """Keep what precedes `group`, replace the group with the marker when `is_secret`."""
    marker = _marker(label)

    def replace(text: str, m: re.Match[str]) -> str | None:
        start, end = m.span(group)
        if not is_secret(text[start:end]):
            return None
        return text[m.start() : start] + marker + text[end : m.end()]

    return replace


def _url_is_credential(text: str, m: re.Match[str]) -> bool:
    start = m.start()
    return _URL_SCHEME.search(text, max(0, start - 16), start) is not None


def _url_replacer() -> Replace:
    password = _value_replacer(1, lambda v: "[REDACTED" not in v, "url-password")

    def replace(text: str, m: re.Match[str]) -> str | None:
        return password(text, m) if _url_is_credential(text, m) else None

    return replace


def _family_replacer(family: _Family) -> Replace:
    if family.keeps_label:
        return _value_replacer(2, lambda v: not _is_placeholder(v), family.name)
    marker = _marker(family.name)
    return lambda text, m: None if _is_placeholder(text[m.start() : m.end()]) else marker


def _auth_value_is_secret(value: str) -> bool:
    """An auth-scheme value is a credential unless it reads as a word (`Bearer authentication`,
    `Token based`): all ASCII letters, and either short or in one ordinary case."""
    if not (value.isascii() and value.isalpha()):
        return True
    return len(value) > 24 or not (value.islower() or value.istitle() or len(value) <= 16)


_AUTH_REPLACER = _value_replacer(3, _auth_value_is_secret, "bearer")
_SLOT_REPLACER = _value_replacer(1, _is_slot_secret, "named")
_FLAG_VALUE_REPLACER = _value_replacer(2, _is_slot_secret, "named")


def _flag_replacer(text: str, m: re.Match[str]) -> str | None:
    """A `--…token…` flag's value, when the name holds a keyword at the allowed distances."""
    name = m.group(1)
    hit = _FLAG_KEYWORD.search(name)
    if hit is None or hit.start() > 30 or len(name) - hit.end() > 20:
        return None
    return _FLAG_VALUE_REPLACER(text, m)


_URL_REPLACER = _url_replacer()


_CASE_ANCHOR_LIST = tuple(
    dict.fromkeys(a for f in _FAMILIES if f.any_case is None for a in f.anchors)
)
"""The anchors of the case-sensitive families (ASCII, 2 chars or more)."""


def _case_anchor_automaton() -> Automaton:
    auto = Automaton()
    for anchor in _CASE_ANCHOR_LIST:
        auto.add_word(anchor, anchor)
    auto.make_automaton()
    return auto


_CASE_ANCHORS = _case_anchor_automaton()
"""The same anchors found in one pass (most outputs hold none), when the C kernel is absent."""


def _anchors_in(text: str) -> set[str]:
    """The case-sensitive families' anchors that occur in `text`."""
    if (kernel := _K.anchors_in) is not None:
        return kernel(text, _CASE_ANCHOR_LIST)
    return {anchor for _, anchor in _CASE_ANCHORS.iter(text)}


def redact(text: str, known: Iterable[str] = ()) -> Redacted:
    """Replace every secret-shaped string in `text`; `known` values (≥ 8 bytes) go first."""
    tally: dict[str, int] = {}
    for value in sorted({k for k in known if len(k.encode()) >= 8}, key=len, reverse=True):
        hits = text.count(value)
        if hits:
            text = text.replace(value, _marker("known"))
            tally["known"] = tally.get("known", 0) + hits
    present = _anchors_in(text)
    for family in _FAMILIES:
        if family.any_case is None:
            if present.isdisjoint(family.anchors):
                continue
            scan = text
        else:
            scan = text.lower()
            if not any(a in scan for a in family.anchors):
                continue
        before = text
        pattern = family.pattern
        if family.any_case is not None and len(scan) != len(text):  # `İ` moved the offsets
            pattern, scan = family.any_case, text
        text = _sub(pattern, text, _family_replacer(family), family.name, tally, scan)
        if text is not before:
            present = _anchors_in(text)
    if "Bearer" in text or "Basic" in text or "Token" in text:
        text = _sub(_AUTH, text, _AUTH_REPLACER, "bearer", tally)
    if "://" in text:
        text = _sub(_URL_CREDENTIALS, text, _URL_REPLACER, "url-password", tally)
    lowered = text.lower()
    if any(a in lowered for a in _SLOT_ANCHORS):
        if len(lowered) == len(text):
            text = _sub(_NAMED_SLOT, text, _SLOT_REPLACER, "named", tally, scan=lowered)
        else:
            text = _sub(_NAMED_SLOT_ANY_CASE, text, _SLOT_REPLACER, "named", tally)
        if "--" in text:
            text = _sub(_CLI_FLAG, text, _flag_replacer, "named", tally)
    return Redacted(text, sum(tally.values()), tally)


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
