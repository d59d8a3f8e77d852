"""Secret-named slots: `name: value`, `NAME=value`, `"name": "value"`, `?name=value`, cookie
headers and `--…token…` flags, whose value goes when the name is a credential's and the value
is one (`values.slot_value_is_secret`)."""

from __future__ import annotations

import re

from factrail.core.redact.values import slot_value_is_secret

Edits = list[tuple[int, int, int]] | None
"""Where a pass replaced text, when traced: (start, end) in the text it ran over and the
length of what replaced it."""
SlotPatterns = tuple[tuple[frozenset[str], re.Pattern[str]], ...]


def marker(label: str) -> str:
    """What a secret of `label` is replaced with."""
    return f"[REDACTED:{label}]"


_NAMED = marker("named")
_SLOT_VALUE_CHARS = r"[^\s\"'`<>{}()\[\],;\\&|]"
_ENDS_A_KEY = ('"', "'", " ", "\t", ":", "=", "\\")
"""What may follow a key name (a quote, a space, the separator): short keywords stand alone."""


def _alone(word: str) -> tuple[tuple[str, ...], str]:
    """A short keyword as a word of its own (`DB_PASS`, `?sig=`; not `bypass`, `design`)."""
    return tuple(f"{word}{c}" for c in _ENDS_A_KEY), rf"{word}(?<![a-z]{word})(?![a-z])"


_SLOT_KEYWORDS = (
    (
        ("passw", "passphrase", *_alone("pass")[0]),
        r"pass(?:w(?:or)?d|phrase|(?<![a-z]pass)(?![a-z]))",
    ),
    _alone("pwd"),
    (("secret",), r"secret"),
    (("token",), r"token"),
    (
        ("_key", "-key", "apikey", "privatekey", "accesskey"),
        r"key(?:(?<=[a-z0-9][_-]key)|(?<=apikey)|(?<=privatekey)|(?<=accesskey))",
    ),
    (
        ("authorization", "auth_", "auth-", *_alone("auth")[0]),
        r"auth(?:orization|(?<![a-z]auth)(?![a-z]))",
    ),
    (("credential",), r"credentials?"),
    (
        ("sessionid", *_alone("session")[0]),
        r"session(?<![a-z]session)(?:id)?(?![a-z])",
    ),
    (("signature", *_alone("sig")[0]), r"sig(?<![a-z]sig)(?:nature)?(?![a-z])"),
    _alone("dsn"),
)
"""A slot's keyword (`PASSWORD`, `DB_PASS`, `PWD`, `x-api-key`, `STRIPE_KEY`, `AUTH`,
`sessionid`, `X-Amz-Signature`, `SENTRY_DSN`) and the lower-case literals one of which its
match holds: one pattern each, each run only on a text holding one of its literals (found in
the same pass as the case-insensitive families'), since a pattern starting with a literal is
scanned for far faster than an alternation."""
_SLOT_REST = (
    r"(?P<suffix>[\w-]{0,24}?)"
    r"(?P<sep>(?:\\?[\"']\]?)?[ \t]{0,16}(?::=|=>|[:=])[ \t]{0,3}"
    r"(?:(?:bearer|basic|token|digest)[ \t]+)?)"
    r"(?P<quote>\\?[\"'`])?"
    rf"(?P<value>[^\s\"'`<>{{}}()\[\],;\\&|:]{_SLOT_VALUE_CHARS}{{3,}})"
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
COOKIE_ANCHOR = "cookie"
SLOT_ANCHORS = frozenset(a for anchors, _ in _SLOT_KEYWORDS for a in anchors)
LOWER_ANCHORS = (*dict.fromkeys(a for anchors, _ in _SLOT_KEYWORDS for a in anchors), COOKIE_ANCHOR)
"""The literals the lower-cased text is searched for on behalf of the slots."""

_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "pass", "passphrase"})
_BARE_WORDS = frozenset({"pass", "session", "signature"})
"""Keywords that, alone before an unquoted `:` and not in capitals, are prose or a heading
(`First pass: x`, `session: 3 of 5`, a CACHEDIR.TAG's `Signature:`); `PASS:`, `db_pass:`,
`"pass":`, `pass=` and `X-Signature:` are slots."""
_STRONG_KEY_WORDS = re.compile(
    r"(?:^|[_.-])(?:api|access|private|secret|client|encryption|encrypt|signing|sign|master|"
    r"auth|app|account|license|service|webhook|admin|session|jwt|hmac|cookie|crypto|aes|"
    r"consumer|merchant)[_.-]?$"
)
"""Words that make a bare `*_KEY` name a credential's (`ENCRYPTION_KEY`, `app_key`, `apikey`)."""
_NOT_CREDENTIAL_NAME = re.compile(
    r"[_.-](?:id|ids|name|names|type|types|url|uri|urls|endpoint|file|files|path|paths|dir|"
    r"length|len|size|count|limit|max|min|expiry|expires|expiration|expire|ttl|field|header|"
    r"env|var|label|prefix|suffix|format|hint|policy|usage|budget|provider|mode|kind|source|"
    r"store|manager|location|ref|arn|version|algorithm|alg|scope|scopes|index|enabled|"
    r"required|regex|pattern|rotation|created|updated|reset|strength|rule|rules|placeholder|"
    r"input|help|description|title|message|error|generator|hash|hashed|fingerprint|pub|"
    r"public|timeout|timeouts|lifetime|duration|age|jar|domain|secure|samesite|httponly|"
    r"backend|engine|factory|class|handler|middleware|serializer|interval|delay|retries|"
    r"attempts|number|num|state|status|cache|log|logs|stats|method|methods|exposure|"
    r"resolver|getter|loader|callback|hook|hooks|builder|cls)(?=$|[_.-])"
)
"""A part after the keyword that names something about a credential, not the credential
(`token_count`, `password_reset_url`, `secret_name`, `api_key_id`, `session_timeout`)."""
_NOT_CREDENTIAL_PREFIX = re.compile(
    r"(?:^|[_.-])(?:public|primary|foreign|sort|partition|cache|page|next|prev|previous|"
    r"continuation|cursor|pagination|max|min|num|total|input|output|prompt|completion|bos|"
    r"eos|pad|unk|mask|sep|cls|special|idempotency|row|column|unique|composite|lookup|dict|"
    r"map|hash|range|registry|ssh|gpg|pgp|public[_.-]?key|file|object|s3|node|item|record|"
    r"dedupe|group|lock|table|i18n|translation|message|storage|redis|routing|shard|bucket|"
    r"event|list|query|search|index|order|state|data|entity|model|field|attr|prop|react|sub|"
    r"parent)[_.-]?(?:key|token|keys|tokens)$"
)
"""Key names for what is not a credential although it ends in `key`/`token` (`cache_key`,
`next_page_token`, `eos_token`, `primary_key`)."""
_SUFFIX_OK = ("", "key", "keys", "token", "secret", "value", "str", "string", "b64", "base64")
_KEY_DATA = ("-data", "_data")
"""`client-key-data` (a kubeconfig's private key), `private_key_data`."""


def _slot_tier(kw: str, name: str, suffix: str) -> str | None:
    """The tier of a named slot from its keyword, full key name and what follows the keyword
    in it, or None for a name that is not a credential's (`token_count`, `cache_key`)."""
    if _NOT_CREDENTIAL_NAME.search(suffix) or _NOT_CREDENTIAL_PREFIX.search(name):
        return None
    if kw in _PASSWORD_WORDS or kw.startswith("passw"):
        return "password"
    if kw == "key":
        prefix = name[: len(name) - len(suffix) - len("key")]
        return "secret" if _STRONG_KEY_WORDS.search(prefix) else "key"
    return "secret"


def _key_name(text: str, start: int, end: int) -> tuple[int, str]:
    """Where the whole key name around the keyword at `start` begins, and the name as written
    (`DB_PASSWORD`, `x-api-key`)."""
    begin = start
    while (
        begin > 0 and start - begin < 60 and (text[begin - 1].isalnum() or text[begin - 1] in "_.-")
    ):
        begin -= 1
    name = text[begin:end].lstrip("._-")
    return end - len(name), name


_CODE_MARKERS = (
    "def ", "import ", "class ", "return ", "function ", "const ", "let ", "var ", "self.",
    "this.", "=>", "();", "):\n", ") {", "fn ", "func ", "#include", "package ",
    ".py:", ".ts:", ".js:", ".go:", ".rs:", ".java:", ".rb:", ".php:",
)  # fmt: skip
"""What marks a text as code (a statement, `self.`, `=>`, a call, a `grep -n` hit in a source
file), where a bare name after `token =` is a variable; elsewhere (`.env`, INI, YAML, a URL, a
header) it is the value. Plain substring tests: this runs on any text holding a slot."""


def looks_like_code(text: str) -> bool:
    """Whether `text` holds one of the `_CODE_MARKERS`."""
    return any(marker in text for marker in _CODE_MARKERS)


_PROSE_AFTER = re.compile(r"[ \t]+[A-Za-z]{2,}[ \t]+[A-Za-z]")
"""Words going on after an unquoted value: prose (a docstring), not an assignment."""


class _Context:
    """Whether the text slots are read in is code, found once and only when a slot needs it."""

    __slots__ = ("_code", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._code: bool | None = None

    def code(self) -> bool:
        if self._code is None:
            self._code = looks_like_code(self._text)
        return self._code


def _slot_matches(scan: str, patterns: SlotPatterns, present: set[str]) -> list[re.Match[str]]:
    """The slot matches in `scan` (lower-cased unless `patterns` ignore case) of the patterns
    one of whose literals is `present`, in text order."""
    found = [
        m for anchors, p in patterns if not anchors.isdisjoint(present) for m in p.finditer(scan)
    ]
    if len(found) > 1:
        found.sort(key=lambda m: m.start())
    return found


def _secret_span(text: str, m: re.Match[str], context: _Context) -> tuple[int, int] | None:
    """Where the secret of one slot match lies in `text`, or None when it holds none."""
    suffix = m.group("suffix")
    if suffix and suffix[0] not in "_.-" and suffix.lower() not in _SUFFIX_OK:
        return None
    begin, name = _key_name(text, m.start(), m.end("suffix"))
    kw = m.group("kw").lower()
    tier = _slot_tier(kw, name.lower(), suffix.lower())
    if tier is None:
        return None
    start, end = m.span("value")
    quote = m.group("quote")
    sep = m.group("sep")
    if kw in ("pass", "pwd") and suffix:
        return None  # `pass_fds: x`
    if kw == "sig" and name.lower() != kw:
        return None  # `?sig=`, unlike `utf_8_sig`, `text_sig`
    bare = kw in _BARE_WORDS and name.lower() == kw and not name.isupper()
    if bare and not quote and sep.lstrip(" \t")[:1] == ":":
        return None  # `First pass: x`, unlike `PASS:`, `"pass":`, `pass=`
    if not quote and text.startswith("(", end):
        return None  # `token = b64encode(…)`: a call
    if quote and tier == "password":  # a quoted password may hold a few spaces
        close = text.find(quote[-1], end, end + 64)
        if close > end and "\n" not in text[end:close] and text.count(" ", end, close) <= 4:
            end = close
    if not quote and _PROSE_AFTER.match(text, end) and context.code():
        return None  # `encryption_key: Fernet-derived master key, …` in a docstring
    literal = (
        bool(quote)
        or (sep.strip() in ("=", ":") and name.isupper() and not (" " in sep and context.code()))
        or text[begin - 1 : begin] in ("?", "&", "#")  # a URL's query or fragment
    )
    if not slot_value_is_secret(text[start:end], tier, literal, context.code()):
        return None
    return start, end


def named_slots(
    text: str,
    scan: str,
    patterns: SlotPatterns,
    present: set[str],
    tally: dict[str, int],
    edits: Edits,
) -> str:
    """Replace the credential values of `name: value`, `NAME=value`, `"name": "value"` slots."""
    pieces: list[str] = []
    last = 0
    context = _Context(text)
    for m in _slot_matches(scan, patterns, present):
        span = _secret_span(text, m, context)
        if span is None or span[0] < last:
            continue
        start, end = span
        pieces += (text[last:start], _NAMED)
        last = end
        tally["named"] = tally.get("named", 0) + 1
        if edits is not None:
            edits.append((start, end, len(_NAMED)))
    return "".join((*pieces, text[last:])) if pieces else text


_COOKIE_REGEX = (
    r"cookie(?<![a-z0-9]cookie)(?:\\?[\"'])?[ \t]{0,16}[:=][ \t]{0,3}(?:\\?[\"'])?"
    r"(?P<value>[^\n\r\"'`\\]{1,4096})"
)
COOKIE = re.compile(_COOKIE_REGEX)
"""`Cookie: a=…; b=…`, `Set-Cookie: …`, `"cookie": "…"`, `cookie = …`: the header's value,
matched over the lower-cased text."""
COOKIE_ANY_CASE = re.compile(_COOKIE_REGEX, re.IGNORECASE)
_COOKIE_PAIR = re.compile(r"[ \t]*([^=;\s]{1,128})=([^;\s,]*)")
_COOKIE_SINGLE = re.compile(rf"{_SLOT_VALUE_CHARS}+")
_COOKIE_ATTRIBUTES = frozenset(
    {"path", "domain", "expires", "max-age", "samesite", "priority", "version", "comment"}
)


def _cookie_spans(text: str, m: re.Match[str]) -> list[tuple[int, int]]:
    """The secret values of one cookie header: every pair's of a `Cookie:` list, the first
    pair's of a `Set-Cookie:` (the rest are attributes), or the value when it is one token."""
    start, end = m.span("value")
    setter = text[max(0, m.start() - 4) : m.start()].lower() == "set-"
    spans: list[tuple[int, int]] = []
    at = start
    paired = False
    while at < end:
        pair = _COOKIE_PAIR.match(text, at, end)
        if pair is None:
            break
        paired = True
        v_start, v_end = pair.span(2)
        name = pair.group(1).lower()
        value = text[v_start:v_end]
        if name not in _COOKIE_ATTRIBUTES and slot_value_is_secret(value, "secret", True):
            spans.append((v_start, v_end))
        if setter or not text.startswith(";", v_end):
            break
        at = v_end + 1
    if not paired:  # no `name=value`: a cookie held in a variable or a slot of its own
        single = _COOKIE_SINGLE.match(text, start, end)
        if (
            single is not None
            and not text.startswith("(", single.end())  # `cookie = make_cookie(…)`
            and slot_value_is_secret(single.group(), "secret", False, looks_like_code(text))
        ):
            spans.append(single.span())
    return spans


def cookies(
    text: str, scan: str, pattern: re.Pattern[str], tally: dict[str, int], edits: Edits
) -> str:
    """Replace the values of cookie headers (`Cookie:`, `Set-Cookie:`, a `cookie` slot) found
    in `scan` (`text` lower-cased, unless `pattern` ignores case)."""
    pieces: list[str] = []
    last = 0
    for m in pattern.finditer(scan):
        for start, end in _cookie_spans(text, m):
            if start < last:
                continue
            pieces += (text[last:start], _NAMED)
            last = end
            tally["named"] = tally.get("named", 0) + 1
            if edits is not None:
                edits.append((start, end, len(_NAMED)))
    return "".join((*pieces, text[last:])) if pieces else text


_SLOT_VALUE = r"[^\s\"'`<>{}()\[\],;\\]{8,}"
CLI_FLAG = re.compile(
    r"--([A-Za-z0-9-]{1,52}+)(?:=|[ \t]{1,3})[\"']?"  # possessive: no backtracking on the name
    rf"({_SLOT_VALUE})"
)
_FLAG_KEYWORD = re.compile(r"api-?key|secret|token|passw(?:or)?d|cookie", re.IGNORECASE)
"""A secret flag's name holds one of these (within 30 chars before and 20 after)."""


def flag_replacer(text: str, m: re.Match[str]) -> str | None:
    """A `--…token…` flag's value, when the name holds a keyword at the allowed distances, as a
    word of its own (`--tokenizer` is no token), and names no credential's attribute
    (`--secret-name`)."""
    name = m.group(1)
    hit = _FLAG_KEYWORD.search(name)
    if hit is None or hit.start() > 30 or len(name) - hit.end() > 20:
        return None
    rest = name[hit.end() :].lower()
    if (rest and rest[0] != "-") or _NOT_CREDENTIAL_NAME.search(rest):
        return None
    start, end = m.span(2)
    tier = "password" if hit.group().lower().startswith("passw") else "secret"
    if not slot_value_is_secret(text[start:end], tier, literal=True):
        return None
    return text[m.start() : start] + _NAMED + text[end : m.end()]
