"""Credentials in HTTP syntax: cookie strings wherever they are written (a `Cookie:` or
`Set-Cookie:` header, a `cookie` slot, `curl -b`/`--cookie` arguments, Netscape cookie-jar
lines) and `Authorization:` headers with any scheme word (`Bearer`, `ApiKey`, `Bot`, `SSWS`,
`Digest` with its `response=`…)."""

from __future__ import annotations

import re

from factrail.core.redact.forms import CodeContext
from factrail.core.redact.names import credential_tier, key_words
from factrail.core.redact.values import looks_random, slot_value_is_secret

Spans = list[tuple[int, int]]

_VALUE_CHARS = r"[^\s\"'`<>{}()\[\],;\\&|]"
_COOKIE_REGEX = (
    r"(?P<kw>cookies?)(?:\\?[\"'])?[ \t]{0,16}[:=][ \t]{0,3}(?:\\?[\"'])?"
    r"(?P<value>[^\n\r\"'`\\]{1,4096})"
)
COOKIE = re.compile(_COOKIE_REGEX)
"""`Cookie: a=…; b=…`, `Set-Cookie: …`, `"cookie": "…"`, `session_cookie = …`: the value of a
key whose last word is `cookie`, matched over the lower-cased text."""
COOKIE_ANY_CASE = re.compile(_COOKIE_REGEX, re.IGNORECASE)
_COOKIE_PAIR = re.compile(r"[ \t]*([^=;\s]{1,128})=([^;\s,]*)")
_COOKIE_SINGLE = re.compile(rf"{_VALUE_CHARS}+")
_COOKIE_ATTRIBUTES = frozenset(
    {"path", "domain", "expires", "max-age", "samesite", "priority", "version", "comment"}
)


def _key_before(text: str, end: int) -> str:
    """The key name ending at `end` (`Set-Cookie`, `session_cookie`, `sessionCookie`)."""
    begin = end
    while (
        begin > 0 and end - begin < 60 and (text[begin - 1].isalnum() or text[begin - 1] in "_.-")
    ):
        begin -= 1
    return text[begin:end]


def _pairs(text: str, start: int, end: int, setter: bool = False) -> tuple[Spans, bool]:
    """The secret values of a cookie string `name=value; …` in `text[start:end]` (of only its
    first pair for a `Set-Cookie:`, whose other pairs are attributes), and whether it held a
    pair at all."""
    spans: Spans = []
    at = start
    paired = False
    while at < end:
        pair = _COOKIE_PAIR.match(text, at, end)
        if pair is None:
            break
        paired = True
        v_start, v_end = pair.span(2)
        value = text[v_start:v_end]
        if pair.group(1).lower() not in _COOKIE_ATTRIBUTES and slot_value_is_secret(
            value, "secret", True
        ):
            spans.append((v_start, v_end))
        if setter or not text.startswith(";", v_end):
            break
        at = v_end + 1
    return spans, paired


def cookie_spans(text: str, m: re.Match[str], context: CodeContext) -> Spans:
    """The secret values of one cookie header or slot: every pair's of a `Cookie:` list, the
    first pair's of a `Set-Cookie:`, or the value when it is one token."""
    words = key_words(_key_before(text, m.end("kw")))
    if not words or words[-1] not in ("cookie", "cookies"):
        return []  # `fortunecookie`
    start, end = m.span("value")
    setter = words[-2:-1] == ("set",)
    spans, paired = _pairs(text, start, end, setter)
    if not paired:  # no `name=value`: a cookie held in a variable or a slot of its own
        single = _COOKIE_SINGLE.match(text, start, end)
        if (
            single is not None
            and not text.startswith("(", single.end())  # `cookie = make_cookie(…)`
            and slot_value_is_secret(single.group(), "secret", False, lambda: context.at(start))
        ):
            spans.append(single.span())
    return spans


_COOKIE_ARG_VALUE = (
    r"(?:=|[ \t]{1,4})"
    r"(?:(?P<q>\\?[\"'])(?P<quoted>[^\n]{1,4096}?)(?P=q)|(?P<bare>[^\s\"'`]{1,4096}))"
)
COOKIE_ARGS = (
    re.compile(rf"-b(?<=[ \t]-b){_COOKIE_ARG_VALUE}"),
    re.compile(rf"--cookie{_COOKIE_ARG_VALUE}"),
)
"""`curl -b 'a=…; sid=…'`, `--cookie sid=…`, `--cookie=…`: a cookie string as an argument (one
with no `=` is a cookie file)."""


def _in_curl(text: str, at: int) -> bool:
    """Whether the `-b` at `at` is an argument of `curl` (on its line or a continued one)."""
    start = max(0, at - 400)
    line = text.rfind("\n", start, at)
    while line > 0 and text[line - 1] == "\\":
        line = text.rfind("\n", start, line - 1)
    return "curl" in text[line + 1 : at]


def cookie_arg_spans(text: str, m: re.Match[str]) -> Spans:
    """The secret values of one `-b`/`--cookie` argument."""
    if m.group(0).startswith("-b") and not _in_curl(text, m.start()):
        return []
    group = "quoted" if m.group("quoted") is not None else "bare"
    start, end = m.span(group)
    return _pairs(text, start, end)[0]


COOKIE_JAR = re.compile(
    r"^(?:#HttpOnly_)?[^\s#][^\t\n]*\t(?:TRUE|FALSE)\t[^\t\n]*\t(?:TRUE|FALSE)\t-?\d+\t"
    r"[^\t\n]*\t(?P<value>[^\t\r\n]+)$",
    re.MULTILINE,
)
"""A Netscape cookie-jar line (`curl -c`, `wget --save-cookies`, browser exports): domain,
subdomains, path, secure, expiry, name, value, tab-separated."""


def cookie_jar_spans(text: str, m: re.Match[str]) -> Spans:
    start, end = m.span("value")
    return [(start, end)] if slot_value_is_secret(text[start:end], "secret", True) else []


AUTHORIZATION = re.compile(
    r"authorization(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?"
    r"(?P<scheme>[a-z][a-z0-9._+-]{0,30})[ \t]+(?=[^\s\"'`])"
)
"""`Authorization: <scheme> <credentials>` (and `Proxy-Authorization`) with any scheme word,
matched over the lower-cased text."""
_TOKEN68 = re.compile(r"[^\s\"'`<>,;\\]+")
_PARAM = re.compile(
    r"[ \t]*(?P<name>[A-Za-z][\w-]{0,40})[ \t]*=[ \t]*"
    r"(?:(?P<q>\\?\")(?P<quoted>[^\"\\\n]{0,1024})(?P=q)|(?P<bare>[^\s,\"'\\]{0,1024}))[ \t]*,?"
)
_PARAM_SCHEMES = frozenset(
    {"digest", "oauth", "signature", "hoba", "mutual", "aws4-hmac-sha256", "vapid", "keyid"}
)
"""Schemes whose credentials are `name=value` parameters."""
_SECRET_PARAMS = frozenset({"response"})
"""Parameters secret whatever their name says: Digest's `response` (a hash of the password)."""


def _param_spans(text: str, at: int, limit: int) -> Spans:
    spans: Spans = []
    while at < limit and (p := _PARAM.match(text, at, limit)) is not None and p.end() > at:
        group = "quoted" if p.group("quoted") is not None else "bare"
        start, end = p.span(group)
        name = p.group("name")
        if (
            (name.lower() in _SECRET_PARAMS or credential_tier(name) is not None)
            and end - start >= 8
            and slot_value_is_secret(text[start:end], "secret", True)
        ):
            spans.append((start, end))
        at = p.end()
    return spans


def authorization_spans(text: str, m: re.Match[str]) -> Spans:
    """The credentials of one `Authorization:` header: the value after the scheme word, or
    the secret parameters of a parameter scheme (Digest's `response`, OAuth's signature)."""
    scheme = text[m.start("scheme") : m.end("scheme")]
    if looks_random(scheme):
        return []  # no scheme: the value is the credential, a slot of its own
    start = m.end()
    line = text.find("\n", start, start + 4096)
    limit = start + 4096 if line < 0 else line
    if scheme.lower() in _PARAM_SCHEMES and _PARAM.match(text, start, limit):
        return _param_spans(text, start, limit)
    token = _TOKEN68.match(text, start, limit)
    if token is None:
        return []
    value = token.group()
    if not slot_value_is_secret(value, "secret", True) or not reads_as_key(value):
        return []
    return [token.span()]


def reads_as_key(value: str) -> bool:
    """Not a word of prose (`Authorization: Bearer authentication`, `Token based`)."""
    value = value.rstrip(".,;:")
    if ("-" in value or "_" in value) and value.isascii():
        parts = value.replace("_", "-").split("-")
        return not all(p.isalpha() and (p.islower() or p.istitle()) for p in parts)
    if not (value.isascii() and value.isalpha()):
        return True
    return len(value) > 24 or not (value.islower() or value.istitle())
