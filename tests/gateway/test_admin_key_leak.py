"""The admin key never leaves: in no header, cookie, query parameter or path, however spelled.

Every request the upstream gets is recorded and searched for the key by decoding, not by the
spellings sent: raw in any case, percent-decoded (repeatedly), backslash-unescaped, and every
base64 / base64url run decoded at each offset. Keys are made at run time.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import re
import secrets
from collections.abc import Callable, Iterator
from urllib.parse import quote, unquote_to_bytes

import httpx
import pytest
import respx

from factrail.gateway.logging import JsonFormatter
from factrail.gateway.upstream import carries_secret, withhold_query
from factrail.settings import Settings
from factrail.stores import admin_key
from tests.gateway.support import UPSTREAM, ScriptedCompactor, make_client

ANTHROPIC = "http://anthropic.test"
Spelling = Callable[[str], tuple[list[tuple[str, str]], str]]
"""A way to send the key: the request's extra headers and its query string."""


def b64(text: str, urlsafe: bool = False) -> str:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return encode(text.encode()).decode()


def every_char_encoded(text: str) -> str:
    return "".join(f"%{b:02X}" for b in text.encode())


def header(name: str, value: Callable[[str], str]) -> Spelling:
    return lambda k: ([(name, value(k))], "")


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
}
ROUTES = [
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/models"),
    ("POST", "/v1/messages"),
]


def decoded_views(raw: bytes) -> set[bytes]:
    """`raw` and what it decodes to: percent-decoding (repeated, `+` read both ways),
    backslash escapes, and every base64 / base64url run at each offset, twice over."""
    views = {raw}
    for _ in range(2):
        for view in list(views):
            for plus in (False, True):
                current = view
                for _ in range(4):
                    current = unquote_to_bytes(current.replace(b"+", b" ") if plus else current)
                    views.add(current)
            views.add(
                re.sub(
                    rb"\\u([0-9a-fA-F]{4})",
                    lambda m: chr(int(m[1], 16)).encode(),
                    view,
                )
            )
            for run in re.findall(rb"[A-Za-z0-9+/_=-]{4,}", view):
                for start in range(4):
                    chunk = run[start:].rstrip(b"=")
                    chunk = chunk[: len(chunk) // 4 * 4]
                    for alt in (b"+/", b"-_"):
                        with contextlib.suppress(binascii.Error, ValueError):
                            views.add(base64.b64decode(chunk, altchars=alt, validate=True))
    return views


def holds_key(raw: bytes, key: str) -> bool:
    """Whether `raw` holds the key under any decoding `decoded_views` knows (any case)."""
    needle = key.lower().encode()
    return any(needle in view.lower() for view in decoded_views(raw))


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
        sent = client.request(method, url, content=body, headers=[*headers, ("x-kept", "1")])
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
        carries_secret(n.encode(), secret) or carries_secret(v.encode(), secret) for n, v in headers
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
    for value in ("\\ud800" * 8 + key[:-1], "%" * 50, "\\x" * 30, "%ZZ" * 20 + "+" * 30):
        assert not carries_secret(value.encode(), key.encode())
    assert carries_secret(("\\ud800" + key).encode(), key.encode())


def test_carries_secret_finds_base64_at_every_alignment(key: str) -> None:
    for prefix in ("", "a", "ab", "abc"):
        for suffix in ("", "x", "xy"):
            for urlsafe in (False, True):
                value = b64(prefix + key + suffix, urlsafe).rstrip("=")
                assert carries_secret(value.encode(), key.encode()), (prefix, suffix, urlsafe)
