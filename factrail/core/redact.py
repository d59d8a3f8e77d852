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


class Redacted(NamedTuple):
    """Redacted text, the number of replacements and their count per label."""

    text: str
    count: int
    families: dict[str, int]


class RedactionCounts(NamedTuple):
    """Replacement counts of a redacted JSON value, in total and per label."""

    count: int
    families: dict[str, int]


@dataclass(frozen=True, slots=True)
class _Family:
    name: str
    pattern: re.Pattern[str]
    anchors: tuple[str, ...]
    """Literals one of which must occur in the text for the pattern to match at all."""
    ignore_case: bool = False
    """Anchors are searched in the lower-cased text."""
    keeps_label: bool = False
    """Group 1 is a label that stays; only the rest of the match is replaced."""


_SK_START = r"(?<![A-Za-z0-9-])"
"""Keys of the `sk-` families stand alone: `task-…` or `desk-ant-…` is not a key."""


def _family(name: str, regex: str, *anchors: str, flags: int = 0, label: bool = False) -> _Family:
    return _Family(
        name, re.compile(regex, flags), anchors, bool(flags & re.IGNORECASE), keeps_label=label
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
    _family("sk-ant", _SK_START + r"sk-ant-[A-Za-z0-9_-]{8,}", "sk-ant-"),
    _family("sk-proj", _SK_START + r"sk-proj-[A-Za-z0-9_-]{20,}", "sk-proj-"),
    _family("sk-or-v1", _SK_START + r"sk-or-v1-[A-Za-z0-9]{30,}", "sk-or-v1-"),
    _family("sk", _SK_START + r"sk-(?:svcacct-|admin-)?[A-Za-z0-9_.-]{16,}", "sk-"),
    _family("stripe", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", "_live_", "_test_"),
    _family("github-pat", r"github_pat_[A-Za-z0-9_]{16,}", "github_pat_"),
    _family("gh-token", r"\bgh[pousr]_[A-Za-z0-9]{16,}", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    _family("glpat", r"glpat-[A-Za-z0-9_-]{20,}", "glpat-"),
    _family("hf", r"\bhf_[A-Za-z0-9]{20,}", "hf_"),
    _family("npm", r"\bnpm_[A-Za-z0-9]{20,}", "npm_"),
    _family("nia", r"\bnk_[A-Za-z0-9]{20,}", "nk_"),
    _family("google-api", r"AIza[0-9A-Za-z_-]{30,}", "AIza"),
    _family("slack", r"\bxox[abeprs]-[0-9A-Za-z-]{10,}", "xox"),
    _family(
        "aws-akia",
        r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA)[0-9A-Z]{16}\b",
        *("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA"),
    ),
    _family(
        "aws-secret",
        r"(aws_secret_access_key[\"'\s=:]+)[A-Za-z0-9/+=]{30,}",
        "aws_secret_access_key",
        flags=re.IGNORECASE,
        label=True,
    ),
    _family("nostr-nsec", r"\bnsec1[02-9ac-hj-np-z]{20,}", "nsec1"),
    _family("pplx", r"pplx-[A-Za-z0-9]{20,}", "pplx-"),
    _family("xai", r"xai-[A-Za-z0-9]{20,}", "xai-"),
    _family("groq", r"gsk_[A-Za-z0-9]{20,}", "gsk_"),
    _family("sakana", r"fish_[A-Za-z0-9_]{20,}", "fish_"),
    _family("keenable", r"keen_[A-Za-z0-9_]{20,}", "keen_"),
    _family("sendgrid", r"SG\.[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}", "SG."),
    _family("telegram", r"\b\d{8,12}:AA[A-Za-z0-9_-]{30,}", ":AA"),
)

_PROVIDER_PREFIX = re.compile(r"^[A-Za-z]+[_-](?:[a-z0-9]+-)?")
_REPEATED_TAIL = re.compile(r"^(?:[A-Za-z0-9]{1,10}[_-])*(.)\1{7,}\Z")

_AUTH = re.compile(r"\b(Bearer|Basic|Token)([ \t]{1,4})([A-Za-z0-9._~+/=-]{8,})")
_URL_PASSWORD = re.compile(
    r"(\b[a-z][a-z0-9+.-]{1,15}://[^\s/@:]{1,64}:)([^\s@/]{1,128})(@)", re.IGNORECASE
)
_SLOT_VALUE = r"[^\s\"'`<>{}()\[\],;\\]{8,}"
_NAMED_SLOT = re.compile(
    r"((?<![\w-])[\w-]{0,40}?"
    r"(?:api[_-]?key|secret|token|passw(?:or)?d|private[_-]?key|access[_-]?key)"
    r"[\w-]{0,20}[\"']?[ \t]{0,3}[:=][ \t]{0,3}[\"']?)"
    rf"({_SLOT_VALUE})",
    re.IGNORECASE,
)
_CLI_FLAG = re.compile(
    r"(--[A-Za-z0-9-]{0,30}?(?:api-?key|secret|token|passw(?:or)?d)[A-Za-z0-9-]{0,20}"
    r"(?:=|[ \t]{1,3})[\"']?)"
    rf"({_SLOT_VALUE})",
    re.IGNORECASE,
)
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


class _Tally:
    """Per-label counts gathered while one text is redacted."""

    def __init__(self) -> None:
        self.families: dict[str, int] = {}

    def add(self, label: str, n: int = 1) -> None:
        if n:
            self.families[label] = self.families.get(label, 0) + n

    def sub(
        self, pattern: re.Pattern[str], text: str, replace: Callable[[re.Match[str]], str | None]
    ) -> str:
        """`pattern.sub`, where `replace` returning None leaves the match as it was."""

        def one(m: re.Match[str]) -> str:
            new = replace(m)
            return m.group(0) if new is None else new

        return pattern.sub(one, text)


def _family_replacer(family: _Family, tally: _Tally) -> Callable[[re.Match[str]], str | None]:
    marker = _marker(family.name)

    def replace(m: re.Match[str]) -> str | None:
        label = m.group(1) if family.keeps_label else ""
        if _is_placeholder(m.group(0)[len(label) :]):
            return None
        tally.add(family.name)
        return label + marker

    return replace


def _slot_replacer(tally: _Tally) -> Callable[[re.Match[str]], str | None]:
    def replace(m: re.Match[str]) -> str | None:
        if not _is_slot_secret(m.group(2)):
            return None
        tally.add("named")
        return m.group(1) + _marker("named")

    return replace


def _auth_replacer(tally: _Tally) -> Callable[[re.Match[str]], str | None]:
    def replace(m: re.Match[str]) -> str | None:
        value = m.group(3)
        if value.isascii() and value.isalpha():
            return None
        tally.add("bearer")
        return m.group(1) + m.group(2) + _marker("bearer")

    return replace


def _url_replacer(tally: _Tally) -> Callable[[re.Match[str]], str | None]:
    def replace(m: re.Match[str]) -> str | None:
        if "[REDACTED" in m.group(2):
            return None
        tally.add("url-password")
        return m.group(1) + _marker("url-password") + m.group(3)

    return replace


def redact(text: str, known: Iterable[str] = ()) -> Redacted:
    """Replace every secret-shaped string in `text`; `known` values (≥ 8 bytes) go first."""
    tally = _Tally()
    for value in sorted({k for k in known if len(k.encode()) >= 8}, key=len, reverse=True):
        hits = text.count(value)
        if hits:
            text = text.replace(value, _marker("known"))
            tally.add("known", hits)
    lowered: str | None = None
    for family in _FAMILIES:
        if family.ignore_case:
            lowered = text.lower() if lowered is None else lowered
            present = any(a in lowered for a in family.anchors)
        else:
            present = any(a in text for a in family.anchors)
        if present:
            text = tally.sub(family.pattern, text, _family_replacer(family, tally))
    if "Bearer" in text or "Basic" in text or "Token" in text:
        text = tally.sub(_AUTH, text, _auth_replacer(tally))
    if "://" in text:
        text = tally.sub(_URL_PASSWORD, text, _url_replacer(tally))
    lowered = text.lower()
    if any(a in lowered for a in _SLOT_ANCHORS):
        text = tally.sub(_NAMED_SLOT, text, _slot_replacer(tally))
        if "--" in text:
            text = tally.sub(_CLI_FLAG, text, _slot_replacer(tally))
    return Redacted(text, sum(tally.families.values()), tally.families)


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
