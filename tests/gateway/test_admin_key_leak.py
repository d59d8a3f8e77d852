"""The admin key never leaves: in no header, cookie, query parameter or path, however spelled.

Every request the upstream gets is recorded and searched for the key by decoding, not by the
spellings sent: raw in any case, percent-decoded (repeatedly), backslash-unescaped, HTML
entities, hex with separators, Unicode compatibility forms, UTF-16, and every base64 / base64url
run decoded at each offset, three times over; and for any 12 characters of it, so a key split
over headers or parameters counts. Keys are made at run time.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import html
import json
import logging
import re
import secrets
import unicodedata
from collections.abc import Callable, Iterator
from urllib.parse import quote, unquote_to_bytes

import httpx
import pytest
import respx
from hypothesis import assume, given
from hypothesis import strategies as st

from factrail.gateway.logging import JsonFormatter
from factrail.gateway.secret_search import WINDOW
from factrail.gateway.upstream import carries_secret, withhold_query
from factrail.settings import Settings
from factrail.stores import admin_key
from tests.gateway.support import UPSTREAM, ScriptedCompactor, make_client

ANTHROPIC = "http://anthropic.test"
Spelling = Callable[[str], tuple[list[tuple[str, str | bytes]], str]]
"""A way to send the key: the request's extra headers (a value not ASCII as UTF-8 bytes) and
its query string."""


def b64(text: str, urlsafe: bool = False) -> str:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return encode(text.encode()).decode()


def every_char_encoded(text: str) -> str:
    return "".join(f"%{b:02X}" for b in text.encode())


def header(name: str, value: Callable[[str], str | bytes]) -> Spelling:
    return lambda k: ([(name, value(k))], "")


def text(value: str) -> bytes:
    """A header value that is not ASCII, as the client's UTF-8 bytes."""
    return value.encode()


def each_char(k: str, spell: Callable[[int], str]) -> str:
    return "".join(spell(b) for b in k.encode())


def thirds(k: str) -> list[str]:
    cut = len(k) // 3
    return [k[:cut], k[cut : 2 * cut], k[2 * cut :]]


BLOB = bytes(range(7, 40))
"""Binary bytes around the key inside a payload."""


def query(value: Callable[[str], str]) -> Spelling:
    return lambda k: ([], value(k))


SPELLINGS: dict[str, Spelling] = {
    "bearer": header("authorization", lambda k: f"Bearer {k}"),
    "bearer-tab": header("authorization", lambda k: f"Bearer\t{k}"),
    "bearer-list": header("authorization", lambda k: f"Bearer {k}, Bearer x"),
    "bearer-extra": header("authorization", lambda k: f"Bearer {k} extra"),
    "bearer-lower": header("authorization", lambda k: f"bearer {k}"),
    "bearer-upper": header("authorization", lambda k: f"BEARER   {k}  "),
    "bearer-quoted": header("authorization", lambda k: f'Bearer "{k}"'),
    "bearer-semicolon": header("authorization", lambda k: f"Bearer {k};"),
    "basic-user": header("authorization", lambda k: "Basic " + b64(f"user:{k}")),
    "basic-password-only": header("authorization", lambda k: "basic " + b64(f":{k}")),
    "basic-key-user": header("authorization", lambda k: "Basic " + b64(f"{k}:x")),
    "two-authorizations": lambda k: (
        [("authorization", "Bearer other"), ("authorization", f"Bearer {k}")],
        "",
    ),
    "x-api-key": header("x-api-key", lambda k: k),
    "cookie": header("cookie", lambda k: f"session=abc; factrail_admin={k}; theme=dark"),
    "cookie-encoded": header("cookie", lambda k: f"a={every_char_encoded(k)}"),
    "quoted-header": header("x-admin-key", lambda k: f'"{k}"'),
    "semicolon-header": header("x-custom", lambda k: f"token={k};path=/"),
    "percent-encoded": header("x-custom", lambda k: every_char_encoded(k)),
    "double-percent-encoded": header("x-custom", lambda k: quote(every_char_encoded(k))),
    "upper-cased": header("x-custom", lambda k: k.upper()),
    "base64url": header("x-token", lambda k: b64("k=" + k, urlsafe=True).rstrip("=")),
    "base64-offset": header("x-token", lambda k: b64("ab" + k + "c")),
    "hex": header("x-debug", lambda k: k.encode().hex()),
    "json-escaped": header("x-meta", lambda k: '{"k":"' + "".join(f"\\u{ord(c):04x}" for c in k)),
    "referer": header("referer", lambda k: f"http://127.0.0.1:8080/factrail/login?key={k}"),
    "header-name": lambda k: ([(k, "1")], ""),
    "query-admin-key": query(lambda k: f"admin_key={k}"),
    "query-encoded": query(lambda k: f"x=1&key={every_char_encoded(k)}&y=2"),
    "query-bearer-plus": query(lambda k: f"auth=Bearer+{k}"),
    "query-bearer-space": query(lambda k: f"auth=Bearer%20{k}"),
    "query-bare": query(lambda k: k),
    "query-base64": query(lambda k: f"t={quote(b64('u:' + k))}"),
    "query-semicolon": query(lambda k: f"a=1;k={k}"),
    "query-name": query(lambda k: f"{k}=1"),
    # spellings of the rules' own: each is one normalisation or decoding, or a few in a row
    "hex-0x-commas": header("x-debug", lambda k: ", ".join(f"0x{b:02x}" for b in k.encode())),
    "hex-dashes-upper": header("x-debug", lambda k: "-".join(f"{b:02X}" for b in k.encode())),
    "html-decimal": header("x-meta", lambda k: each_char(k, lambda b: f"&#{b};")),
    "html-mixed": header("x-meta", lambda k: "".join(c if i % 2 else f"&#x{ord(c):X};"
                                                     for i, c in enumerate(k))),
    "u-brace-escapes": header("x-meta", lambda k: each_char(k, lambda b: f"\\u{{{b:x}}}")),
    "octal-escapes": header("x-meta", lambda k: each_char(k, lambda b: f"\\{b:03o}")),
    "base64url-of-base64": header("x-token", lambda k: b64(b64(k), urlsafe=True)),
    "base64-of-json-of-hex": header("x-token", lambda k: b64(json.dumps({"v": k.encode().hex()}))),
    "base64-every-6": header("x-token", lambda k: " ".join(re.findall(".{1,6}", b64(k)))),
    "base64-of-binary": header("x-token", lambda k: base64.b64encode(BLOB + k.encode() + BLOB)
                               .decode()),
    "percent-base64-hex": header("x-token", lambda k: every_char_encoded(b64(k.encode().hex()))),
    "base64-utf16be-bom": header("x-token", lambda k: base64.b64encode(k.encode("utf-16"))
                                 .decode()),
    "percent-utf16le": header("x-token", lambda k: "".join(f"%{b:02x}"
                                                           for b in k.encode("utf-16-le"))),
    "word-joiners": header("x-trace", lambda k: text("\u2060".join(k))),
    "soft-hyphens": header("x-trace", lambda k: text("\u00ad".join(k))),
    "combining-marks": header("x-trace", lambda k: text("\u0301".join(k))),
    "math-bold": header("x-trace", lambda k: text("".join(
        chr(0x1D41A + ord(c) - 97) if "a" <= c <= "z" else c for c in k))),
    "full-width-base64": header("x-trace", lambda k: text("".join(
        chr(ord(c) + 0xFEE0) for c in b64(k)))),
    "dotted": header("x-trace", lambda k: ".".join(k)),
    "split-three-headers": lambda k: ([(f"x-part-{i}", p) for i, p in enumerate(thirds(k))], ""),
    "split-cookie-and-query": lambda k: (
        [("cookie", "a=" + k[: len(k) // 2])], "b=" + k[len(k) // 2 :]),
    "query-html-entities": query(lambda k: "t=" + each_char(k, lambda b: f"&#x{b:x};")),
    "query-hex-colons": query(lambda k: "t=" + ":".join(f"{b:02x}" for b in k.encode())),
    "query-split-in-five": query(lambda k: "&".join(
        f"p{i}={k[i * 9 : i * 9 + 9]}" for i in range(5))),
}  # fmt: skip
ROUTES = [
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/models"),
    ("POST", "/v1/messages"),
]


def decoded_views(raw: bytes) -> set[bytes]:
    """`raw` and what it decodes to: percent-decoding (repeated, `+` read both ways),
    backslash escapes (`\\u`, `\\u{}`, octal), HTML entities, hex (separators and `0x`
    removed), NUL bytes removed, Unicode NFKD without format characters and marks, a query's
    values run together, and every base64 / base64url run at each offset (spaces removed too),
    three times over."""
    views = {raw, b"".join(p.partition(b"=")[2] for p in raw.partition(b"?")[2].split(b"&"))}
    for _ in range(3):
        for view in list(views):
            if len(views) > 2000:
                break
            views.add(view.replace(b"\0", b""))
            readable = view.decode("utf-8", "replace")
            views.add(html.unescape(readable).encode())
            folded = unicodedata.normalize("NFKD", readable)
            views.add(
                "".join(
                    c
                    for c in folded
                    if unicodedata.category(c)[0] != "M" and unicodedata.category(c) != "Cf"
                ).encode()
            )
            for run in re.findall(
                rb"(?:[0-9a-fA-F]{2}[^0-9a-zA-Z]{0,2})+", view.replace(b"0x", b"")
            ):
                hexa = re.sub(rb"[^0-9a-fA-F]", b"", run)
                with contextlib.suppress(ValueError):
                    views.add(bytes.fromhex(hexa[: len(hexa) // 2 * 2].decode()))
            for plus in (False, True):
                current = view
                for _ in range(4):
                    current = unquote_to_bytes(current.replace(b"+", b" ") if plus else current)
                    views.add(current)
            views.add(
                re.sub(
                    rb"\\(?:u\{?([0-9a-fA-F]{1,4})\}?|([0-7]{3}))",
                    lambda m: chr(int(m[1], 16) if m[1] else int(m[2], 8)).encode(),
                    view,
                )
            )
            for run in re.findall(rb"[A-Za-z0-9+/_=-]{4,}", re.sub(rb"\s+", b"", view)):
                for start in range(4):
                    chunk = run[start:].rstrip(b"=")
                    chunk = chunk[: len(chunk) // 4 * 4]
                    for alt in (b"+/", b"-_"):
                        with contextlib.suppress(binascii.Error, ValueError):
                            views.add(base64.b64decode(chunk, altchars=alt, validate=True))
    return views


def as_bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def holds_key(raw: bytes, key: str) -> bool:
    """Whether `raw` holds any `WINDOW` characters of the key in a row, under any decoding
    `decoded_views` knows (any case, separators between the characters or not)."""
    pieces = {key.lower()[i : i + WINDOW].encode() for i in range(len(key) - WINDOW + 1)}
    for view in decoded_views(raw):
        lower = view.lower()
        bare = re.sub(rb"[^0-9a-z]", b"", lower)
        if any(piece in lower or re.sub(rb"[^0-9a-z]", b"", piece) in bare for piece in pieces):
            return True
    return False


def recorded(settings: Settings) -> tuple[respx.MockRouter, list[httpx.Request]]:
    router = respx.MockRouter(assert_all_called=False)
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    router.route().mock(side_effect=record)
    return router, seen


def forwarded(
    key: str, spelling: Spelling, method: str, path: str, settings: Settings
) -> list[httpx.Request]:
    router, seen = recorded(settings)
    headers, query_string = spelling(key)
    with make_client(settings, router, ScriptedCompactor(), None) as client:  # type: ignore[arg-type]
        client.headers.clear()
        body = b'{"model": "m", "messages": []}' if method == "POST" else b""
        url = f"{path}?{query_string}" if query_string else path
        raw = [(n.encode(), as_bytes(v)) for n, v in [*headers, ("x-kept", "1")]]
        sent = client.request(method, url, content=body, headers=raw)
        assert sent.status_code == 200, sent.text
    return seen


def keyed_settings(key: str) -> Settings:
    return Settings(
        upstream_url=UPSTREAM,
        anthropic_upstream_url=ANTHROPIC,
        anthropic_authorization="forward",  # the mode that forwards the most
        admin_key=key,
    )


@pytest.fixture
def key() -> str:
    return secrets.token_urlsafe(32)


@pytest.fixture
def logged() -> Iterator[list[str]]:
    """Every log line of factrail's loggers, as the JSON formatter writes it."""
    lines: list[str] = []
    formatter = JsonFormatter()

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(formatter.format(record))

    handler = Keep(logging.DEBUG)
    root = logging.getLogger("factrail")
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_the_admin_key_never_reaches_the_upstream(
    key: str, name: str, method: str, path: str, logged: list[str]
) -> None:
    (request,) = forwarded(key, SPELLINGS[name], method, path, keyed_settings(key))
    for header_name, value in request.headers.raw:
        assert not holds_key(header_name, key), (name, header_name)
        assert not holds_key(value, key), (name, header_name)
    assert not holds_key(request.url.raw_path, key), name
    assert not holds_key(str(request.url).encode(), key), name
    assert request.headers["x-kept"] == "1"  # the other headers go on
    assert not any(holds_key(line.encode(), key) for line in logged)


def test_the_parameters_around_a_withheld_one_are_forwarded(key: str) -> None:
    spelling = query(lambda k: f"x=1&admin_key={k}&y=%2F")
    (request,) = forwarded(key, spelling, "GET", "/v1/models", keyed_settings(key))
    assert request.url.query == b"x=1&y=%2F"


def test_a_generated_key_is_withheld_as_well() -> None:
    settings = Settings(upstream_url=UPSTREAM)
    router, seen = recorded(settings)
    with make_client(settings, router, ScriptedCompactor(), None) as client:  # type: ignore[arg-type]
        generated = admin_key.read(settings)
        assert generated is not None
        client.get(f"/v1/models?k={generated}", headers={"cookie": f"a={generated}"})
    (request,) = seen
    assert "cookie" not in request.headers and request.url.query == b""


def test_a_path_carrying_the_key_is_refused_before_anything_is_sent(key: str) -> None:
    settings = keyed_settings(key)
    router, seen = recorded(settings)
    with make_client(settings, router, ScriptedCompactor(), None) as client:  # type: ignore[arg-type]
        assert client.get(f"/v1/models/{key}").status_code == 400
        assert client.get(f"/v1/files/{every_char_encoded(key)}/content").status_code == 400
    assert seen == []


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_carries_secret_finds_every_spelling(key: str, name: str) -> None:
    headers, query_string = SPELLINGS[name](key)
    secret = key.encode()
    found = [
        carries_secret(n.encode(), secret) or carries_secret(as_bytes(v), secret)
        for n, v in headers
    ]
    if query_string:
        found.append(withhold_query(query_string.encode(), (secret,)) != query_string.encode())
    assert any(found), name


@pytest.mark.parametrize(
    "value",
    [
        "Bearer sk-" + "a" * 40,
        "application/json",
        "session=abc; theme=dark",
        "Basic " + b64("user:" + "pass" * 4),
    ],
)
def test_carries_secret_leaves_other_values(key: str, value: str) -> None:
    assert not carries_secret(value.encode(), key.encode())
    assert not carries_secret(value.encode(), b"")


def test_carries_secret_reads_any_escape_without_failing(key: str) -> None:
    short = key[: WINDOW - 1]
    for value in ("\\ud800" * 8 + short, "%" * 50, "\\x" * 30, "%ZZ" * 20 + "+" * 30, "&#" * 40):
        assert not carries_secret(value.encode(), key.encode())
    assert carries_secret(("\\ud800" + key).encode(), key.encode())
    assert carries_secret(("\\ud800" + key[-WINDOW:]).encode(), key.encode())  # a piece


def test_carries_secret_finds_base64_at_every_alignment(key: str) -> None:
    for prefix in ("", "a", "ab", "abc"):
        for suffix in ("", "x", "xy"):
            for urlsafe in (False, True):
                value = b64(prefix + key + suffix, urlsafe).rstrip("=")
                assert carries_secret(value.encode(), key.encode()), (prefix, suffix, urlsafe)


Encoder = Callable[[bytes], bytes]
LAYERS: dict[str, Encoder] = {
    "percent": lambda d: "".join(f"%{b:02X}" for b in d).encode(),
    "base64": base64.b64encode,
    "base64url-unpadded": lambda d: base64.urlsafe_b64encode(d).rstrip(b"="),
    "hex": lambda d: d.hex().encode(),
    "hex-colons-upper": lambda d: b":".join(b"%02X" % b for b in d),
    "html": lambda d: b"".join(b"&#x%x;" % b for b in d),
    "escapes": lambda d: b"".join(b"\\x%02x" % b for b in d),
}
"""Encodings, each one layer of the search."""
FORMS: dict[str, Encoder] = {
    "full-width": lambda d: "".join(chr(b + 0xFEE0) if 0x21 <= b <= 0x7E else chr(b)
                                    for b in d).encode(),
    "zero-width": lambda d: "\u200b".join(d.decode("latin-1")).encode(),
    "utf-16": lambda d: d.decode("latin-1").encode("utf-16-le"),
}  # fmt: skip
"""Ways to write ASCII text, which the search normalises at no cost of a layer."""
BINARY_SAFE = ("percent", "base64", "base64url-unpadded", "hex", "hex-colons-upper")
"""The layers that carry any bytes (HTML has no entity for NUL)."""


@given(
    layers=st.lists(st.sampled_from(sorted(LAYERS)), max_size=3),
    form=st.sampled_from([None, *sorted(FORMS)]),
    at=st.integers(0, 3),
    wrap=st.sampled_from(["{}", "Bearer {}", "a=1; t={}; b=2", '{{"k": "{}"}}']),
)
def test_any_chain_of_encodings_is_found(
    layers: list[str], form: str | None, at: int, wrap: str
) -> None:
    """Up to three encodings in a row, with a Unicode or UTF-16 form of the text at any point,
    inside any header-like text: found; the same chain of another key: not."""
    key, other = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    at = min(at, len(layers))
    if form == "utf-16":
        assume(all(name in BINARY_SAFE for name in layers[at:]))
    elif form is not None:
        assume(not layers[at:])  # the forms write text; only an encoding of bytes may follow
    steps = [LAYERS[name] for name in layers]
    steps[at:at] = [FORMS[form]] if form else []
    values = []
    for secret in (key, other):
        data = secret.encode()
        for step in steps:
            data = step(data)
        held = wrap.format(data.decode("utf-8", "surrogateescape"))
        values.append(held.encode("utf-8", "surrogateescape"))
    assert carries_secret(values[0], key.encode()), (layers, form, at)
    assert not carries_secret(values[1], key.encode()), (layers, form, at)


@given(
    value=st.one_of(
        st.binary(max_size=3000),
        st.text(alphabet=st.sampled_from("%&#;\\xu{}0aF=+/ -_:\x00\u200b\uff41"), max_size=600).map(
            str.encode
        ),
    )
)
def test_any_value_is_searched_without_failing(value: bytes) -> None:
    """Bytes of any kind, and text made of every character the decodings look for, get an
    answer, never an exception."""
    assert carries_secret(value, b"z" * 11 + b"Q") in (True, False)
