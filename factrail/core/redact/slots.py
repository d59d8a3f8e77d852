"""Secret-named slots: `name: value`, `NAME=value`, `"name": "value"`, `?name=value` and
`--…token…` flags, whose value goes when the key names a credential (`names.credential_tier`)
and the value, in whatever form it is written (`forms.VALUE_FORM`), is one
(`values.slot_value_is_secret`)."""

from __future__ import annotations

import re
import string

from factrail.core.redact.forms import VALUE_FORM, CodeContext, first_line, value_span
from factrail.core.redact.names import credential_tier, key_words
from factrail.core.redact.values import slot_value_is_secret

Edit = tuple[int, int, int, str]
"""A replacement: (start, end) in the text a pass ran over, the length of what replaced it and
the label it was counted under."""
Edits = list[Edit] | None
"""Where a pass replaced text, when traced."""
SlotPatterns = tuple[tuple[frozenset[str], re.Pattern[str]], ...]


def marker(label: str) -> str:
    """What a secret of `label` is replaced with."""
    return f"[REDACTED:{label}]"


NAMED = marker("named")
_SPELLED = ('"', "'", ":", "=", "\\", " =", " :", "  ", "\t")
"""What follows a key name: a quote, the separator (after a space or aligned by more), an
escaped quote. A single space then a word is prose (`the token is`), not a slot."""
_QUOTED = ('"', "'", ":", "=", "\\")
"""The same, for a short word seldom written `word = value` with spaces."""


def _ends(word: str, ends: tuple[str, ...] = _QUOTED, more: str = "") -> tuple[str, ...]:
    """`word` right before what ends a key (`pat=`, `sid"`) or before `more` (`auth_`)."""
    return tuple(f"{word}{c}" for c in (*ends, *more))


_SLOT_KEYWORDS = (
    (
        ("passw", "passphrase", "passcode", "passkey", *_ends("pass", _SPELLED[:7])),
        r"pass(?:w(?:or)?d|phrase|code|key|(?![a-z]))",
    ),
    (_ends("pwd"), r"pwd(?![a-z])"),
    (("secret",), r"secret"),
    (_ends("token", _SPELLED, "_-"), r"token(?!s(?![a-z]))"),
    (_ends("key", _SPELLED, "_-"), r"key(?<=[a-z0-9_.?&-]key)s?(?![a-z])"),
    (
        ("authorization", *_ends("auth", _SPELLED[:7], "_-")),
        r"auth(?:orization)?(?:code)?(?![a-z])",
    ),
    (
        ("credential", *_ends("cred"), *_ends("creds")),
        r"cred(?:entials?|s)?(?![a-z])",
    ),
    (("sessionid", "sessid", *_ends("session")), r"sess(?:ion)?(?:id)?(?![a-z])"),
    (("signature", "sig=", 'sig"', "sig:", "sig\\"), r"sig(?:nature)?(?![a-z])"),
    (_ends("dsn", _SPELLED[:7]), r"dsn(?![a-z])"),
    (("jwt",), r"jwt(?![a-z])"),
    (_ends("pat"), r"pat(?![a-z])"),
    (("sid=", 'sid"', "sid\\"), r"sid(?![a-z])"),
    (("?code=", "&code=", "#code=", ";code="), r"code(?<=[?&#;]code)(?![a-z])"),
)
"""Where a key holding a credential's word may be: one pattern per word, led by it and run
only on a text holding its lower-case literal (found in the same pass as the case-insensitive
families'), since a pattern starting with a literal is scanned for far faster than an
alternation. Whether the key names a credential is `credential_tier`'s to say. Short literals
keep the anchor pass cheap (its cost grows with the anchors sharing a first char)."""
_SLOT_REST = (
    r"(?P<suffix>[\w-]{0,24}+)"  # possessive: a separator never starts with a word char
    r"(?P<sep>(?:\\?[\"']\]?)?[ \t]{0,16}(?::=|=>|[:=])[ \t]{0,3}"
    r"(?:(?:bearer|basic|token)[ \t]+)?)"
    rf"{VALUE_FORM}"
)


NAMED_SLOTS: SlotPatterns = tuple(
    (frozenset(anchors), re.compile(f"(?P<kw>{kw}){_SLOT_REST}")) for anchors, kw in _SLOT_KEYWORDS
)
"""Matched over the lower-cased text (a case-insensitive pattern is far slower)."""
NAMED_SLOTS_ANY_CASE: SlotPatterns = tuple(
    (frozenset(anchors), re.compile(f"(?P<kw>{kw}){_SLOT_REST}", re.IGNORECASE))
    for anchors, kw in _SLOT_KEYWORDS
)
"""For the rare text whose lower-casing changes its length (`İ`), so offsets would not map."""
SLOT_ANCHORS = frozenset(a for anchors, _ in NAMED_SLOTS for a in anchors)
LOWER_ANCHORS = tuple(sorted(SLOT_ANCHORS))
"""The literals the lower-cased text is searched for on behalf of the slots."""

_BARE_WORDS = frozenset({"pass", "session", "signature", "pat", "sid", "cred", "creds"})
"""Keys that, alone before an unquoted `:` and not in capitals, are prose or a heading
(`First pass: x`, `session: 3 of 5`, a CACHEDIR.TAG's `Signature:`, `Pat: hi`); `PASS:`,
`db_pass:`, `"pass":`, `pass=` and `X-Signature:` are slots."""


_NAME_CHARS = string.ascii_letters + string.digits + "_.-"


def key_name(text: str, start: int, end: int) -> tuple[int, str]:
    """Where the whole key name around the keyword at `start` begins, and the name as written
    (`DB_PASSWORD`, `x-api-key`)."""
    head = text[max(0, start - 60) : start]
    begin = start - len(head) + len(head.rstrip(_NAME_CHARS))
    name = text[begin:end].lstrip("._-")
    return end - len(name), name


_PROSE_AFTER = re.compile(r"[ \t]+[A-Za-z]{2,}[ \t]+[A-Za-z]")
"""Words going on after an unquoted value: prose (a docstring), not an assignment."""
_SCHEME_AFTER = re.compile(r"[ \t]+[^\s\"'`]")


_BY_ANCHOR: dict[str, tuple[int, ...]] = {}
for _i, (_anchors, _) in enumerate(_SLOT_KEYWORDS):
    for _a in _anchors:
        _BY_ANCHOR[_a] = (*_BY_ANCHOR.get(_a, ()), _i)


def _run(present: set[str]) -> list[int]:
    """The patterns one of whose literals is `present`, in order."""
    return sorted({i for a in present for i in _BY_ANCHOR.get(a, ())})


def _slot_matches(scan: str, patterns: SlotPatterns, present: set[str]) -> list[re.Match[str]]:
    """The slot matches in `scan` (lower-cased unless `patterns` ignore case) of the patterns
    one of whose literals is `present`, in text order."""
    found = [m for i in _run(present) for m in patterns[i][1].finditer(scan)]
    if len(found) > 1:
        found.sort(key=lambda m: m.start())
    return found


def _secret_span(text: str, m: re.Match[str], context: CodeContext) -> tuple[int, int] | None:
    """Where the secret of one slot match lies in `text`, or None when it holds none."""
    begin, name = key_name(text, m.start(), m.end("suffix"))
    before = text[begin - 1 : begin]
    tier = credential_tier(name, "query" if before in ("?", "&", "#", ";") else "slot")
    if tier is None:
        return None
    quote, sep, deco = m.group("quote"), m.group("sep"), m.group("deco")
    words = key_words(name)
    yaml_colon = not quote and sep.lstrip(" \t\\\"']")[:1] == ":"
    if yaml_colon and len(words) == 1 and words[0] in _BARE_WORDS and not name.isupper():
        return None  # `First pass: x`, unlike `PASS:`, `"pass":`, `pass=`
    span = value_span(text, m, begin)
    if span is None:
        return None
    start, end = span
    if (m.group("block") is not None or "|" in deco or ">" in deco) and ":" not in sep:
        return None  # `sig =>` (an arrow function): a block indicator only follows a YAML `:`
    if m.group("value") is None:  # a block scalar or a multi-line string: data
        value = first_line(text, start, end)
        if len(value.split()) != 1:  # prose or code (a docstring), not a credential
            return None
        return span if slot_value_is_secret(value, tier, True) else None
    if not quote:
        if text.startswith("(", end):
            return None  # `token = b64encode(…)`: a call
        if _PROSE_AFTER.match(text, end) and context.at(start):
            return None  # `encryption_key: Fernet-derived master key, …` in a docstring
        if "authorization" in words and not deco and _SCHEME_AFTER.match(text, end):
            return None  # `Authorization: ApiKey …`: a scheme word, `headers` reads on
        first = text[start]
        if first in "*!" and yaml_colon:
            return None  # a YAML alias (`*pw`) or a local tag (`!Ref DbPassword`)
        if first == "#" and (sep[-1:] in " \t" or deco):
            return None  # `password: # set me`: a comment
    elif tier == "password":  # a quoted password may hold a few spaces
        close = text.find(quote, end, end + 64)
        if close > end and "\n" not in text[end:close] and text.count(" ", end, close) <= 4:
            end = close
    literal = (
        bool(quote)
        or before in ("?", "&", "#")  # a URL's query or fragment
        or (sep.strip() in ("=", ":") and name.isupper() and not (" " in sep and context.at(start)))
    )
    if not slot_value_is_secret(text[start:end], tier, literal, lambda: context.at(start)):
        return None
    return start, end


def named_slots(
    text: str,
    scan: str,
    patterns: SlotPatterns,
    present: set[str],
    context: CodeContext,
) -> list[tuple[int, int]]:
    """The credential values of `name: value`, `NAME=value`, `"name": "value"` slots."""
    spans: list[tuple[int, int]] = []
    last = 0
    for m in _slot_matches(scan, patterns, present):
        span = _secret_span(text, m, context)
        if span is None or span[0] < last:
            continue
        spans.append(span)
        last = span[1]
    return spans


_SLOT_VALUE = r"[^\s\"'`<>{}()\[\],;\\]{8,}"
CLI_FLAG = re.compile(
    r"--([A-Za-z0-9-]{1,52}+)(?:=|[ \t]{1,3})[\"']?"  # possessive: no backtracking on the name
    rf"({_SLOT_VALUE})"
)
FLAG_ANCHORS = tuple(f"-{w} " for w in ("token", "key", "secret", "password", "pass", "pat"))
"""`--api-key VALUE`, `--db-password VALUE`: a flag's name, then a space."""
_FLAG_KEYWORD = re.compile(
    r"api-?key|secret|token|pass(?:w(?:or)?d|phrase|code)?|pwd|pat|jwt|cred|cookie|dsn",
    re.IGNORECASE,
)
"""A secret flag's name holds one of these (within 30 chars before and 20 after)."""
_NOT_FLAG_WORDS = frozenset({"session", "auth", "sig", "sid", "cookie", "cookies"})
"""Flags named by these take other things (`--session NAME`, `--auth basic`) or a cookie
string, which `headers` reads pair by pair."""


def flag_replacer(text: str, m: re.Match[str]) -> str | None:
    """A `--…token…` flag's value, when the flag names a credential (`--password`,
    `--github-pat`; not `--tokenizer`, `--secret-name`, `--max-tokens`)."""
    name = m.group(1)
    hit = _FLAG_KEYWORD.search(name)
    if hit is None or hit.start() > 30 or len(name) - hit.end() > 20:
        return None
    words = key_words(name)
    tier = credential_tier(name)
    if tier is None or words[-1] in _NOT_FLAG_WORDS:
        return None
    start, end = m.span(2)
    if not slot_value_is_secret(text[start:end], tier, literal=True):
        return None
    return text[m.start() : start] + NAMED + text[end : m.end()]
