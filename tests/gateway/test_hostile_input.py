"""Hostile request bodies: a 4xx in the provider's shape or the bytes forwarded, never our 5xx.

One test per row of the table in `factrail/gateway/request_body.py`, then a hypothesis fuzz of
the app.
"""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import respx
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from starlette.datastructures import Headers

from factrail.gateway import request_body
from factrail.gateway.request_body import Forward, Read, Reject, classify
from factrail.settings import Settings
from factrail.stores.outputs import OutputStore
from tests.gateway.support import UPSTREAM, ScriptedCompactor, make_client

ANTHROPIC = "http://anthropic.test"
LIMIT = 64 * 1024
ROUTES = {
    "/v1/chat/completions": f"{UPSTREAM}/chat/completions",
    "/v1/messages": f"{ANTHROPIC}/v1/messages",
}
PADDING = "padding " * 40
"""Makes a body large enough to leave the fast path (the trigger here is 100 tokens)."""


@pytest.fixture
def settings() -> Settings:
    """Overrides the conftest settings: both upstreams and a 64 KiB body limit."""
    return Settings(
        upstream_url=UPSTREAM,
        anthropic_upstream_url=ANTHROPIC,
        trigger_tokens=100,
        max_body_bytes=LIMIT,
        record_decisions=False,
    )


@pytest.fixture
def upstream(router: respx.MockRouter) -> dict[str, respx.Route]:
    return {
        path: router.post(url).mock(return_value=httpx.Response(200, json={"ok": True}))
        for path, url in ROUTES.items()
    }


def chat(**extra: Any) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "Run the tests. " + PADDING},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "FAILED test_x " * 20},
    ]
    return {"model": "gpt-4o", "messages": messages, **extra}


def messages_body(**extra: Any) -> dict[str, Any]:
    use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "file.py " * 40}
    messages = [
        {"role": "user", "content": "List the files. " + PADDING},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages, **extra}


def valid(path: str, **extra: Any) -> dict[str, Any]:
    return messages_body(**extra) if path == "/v1/messages" else chat(**extra)


def with_field(path: str, raw_field: bytes) -> bytes:
    """A valid body for `path` with `raw_field` (`"key": value`, as raw JSON text) added."""
    return orjson.dumps(valid(path))[:-1] + b"," + raw_field + b"}"


def assert_error_shape(path: str, response: httpx.Response, code: str) -> None:
    data = response.json()
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        assert data["type"] == "error" and set(data["error"]) == {"type", "message"}
        assert data["error"]["message"]
    else:
        assert set(data["error"]) == {"message", "type", "param", "code"}
        assert data["error"]["code"] == code and data["error"]["message"]


def assert_forwarded_as_sent(
    response: httpx.Response, route: respx.Route, raw: bytes, compactor: ScriptedCompactor
) -> None:
    assert response.status_code == 200, response.text
    assert response.headers["x-factrail"] == "passthrough"
    assert route.calls.last.request.content == raw
    assert compactor.calls == []


both_routes = pytest.mark.parametrize("path", list(ROUTES))


# -- nesting ----------------------------------------------------------------------------------


@both_routes
@pytest.mark.parametrize(
    ("opening", "closing", "depth"), [(b"[", b"]", 5000), (b'{"a":', b"}", 1500)]
)
def test_nesting_deeper_than_factrail_reads_is_forwarded_as_sent(
    client: TestClient,
    upstream: dict[str, respx.Route],
    compactor: ScriptedCompactor,
    path: str,
    opening: bytes,
    closing: bytes,
    depth: int,
) -> None:
    """Was a 500: RecursionError in the fallback parser, outside the fail-open try."""
    leaf = b"[]" if opening == b"[" else b"1"
    raw = with_field(path, b'"metadata":' + opening * depth + leaf + closing * depth)
    r = client.post(path, content=raw)
    assert_forwarded_as_sent(r, upstream[path], raw, compactor)


def test_nesting_too_deep_to_write_back_fails_open(
    client: TestClient, upstream: dict[str, respx.Route], compactor: ScriptedCompactor
) -> None:
    """orjson reads 1,024 levels but writes 254: the compaction cannot serialise and fails open."""
    raw = with_field("/v1/chat/completions", b'"metadata":' + b"[" * 300 + b"]" * 300)
    r = client.post("/v1/chat/completions", content=raw)
    assert r.status_code == 200 and r.headers["x-factrail"] == "failed-open"
    assert upstream["/v1/chat/completions"].calls.last.request.content == raw


# -- encodings ----------------------------------------------------------------------------------


def deflate(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(wbits=wbits)
    return packer.compress(data) + packer.flush()


@both_routes
@pytest.mark.parametrize(
    ("coding", "pack"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: deflate(data, -15)),  # raw deflate, no zlib header
        ("gzip, gzip", lambda data: gzip.compress(gzip.compress(data))),
        ("identity, GZIP", gzip.compress),
    ],
)
def test_an_encoded_body_is_decoded_and_compacted_plain(
    client: TestClient, upstream: dict[str, respx.Route], path: str, coding: str, pack: Any
) -> None:
    """Was a 400 (gzip bytes read as JSON): the decoded body is compacted and goes plain."""
    original = valid(path)
    r = client.post(
        path, content=pack(orjson.dumps(original)), headers={"content-encoding": coding}
    )
    assert r.status_code == 200 and r.headers["x-factrail"] == "compacted"
    sent = upstream[path].calls.last.request
    assert "content-encoding" not in sent.headers
    assert orjson.loads(sent.content)["model"] == original["model"]
    assert b"REDUCED" in sent.content


@both_routes
def test_an_encoded_body_not_compacted_goes_as_received(
    client: TestClient, upstream: dict[str, respx.Route], compactor: ScriptedCompactor, path: str
) -> None:
    compactor.outcome = "passthrough"
    raw = gzip.compress(orjson.dumps(valid(path)))
    r = client.post(path, content=raw, headers={"content-encoding": "gzip"})
    assert r.status_code == 200 and len(compactor.calls) == 1
    sent = upstream[path].calls.last.request
    assert sent.content == raw and sent.headers["content-encoding"] == "gzip"


def test_a_small_gzip_body_is_decoded_for_the_fence(
    router: respx.MockRouter, outputs: OutputStore
) -> None:
    """Was a fence bypass: the fast path looked for fenced names in the compressed bytes."""
    route = router.post(ROUTES["/v1/chat/completions"]).mock(return_value=httpx.Response(200))
    body = chat()
    body["messages"][1]["tool_calls"][0]["function"]["name"] = "mcp__email-gateway__search"
    compactor = ScriptedCompactor()
    with make_client(Settings(upstream_url=UPSTREAM), router, compactor, outputs) as c:
        raw = gzip.compress(orjson.dumps(body))
        r = c.post("/v1/chat/completions", content=raw, headers={"content-encoding": "gzip"})
    assert r.status_code == 200 and len(compactor.calls) == 1
    assert route.called


@both_routes
def test_a_gzip_bomb_is_413_in_the_provider_shape(
    client: TestClient, upstream: dict[str, respx.Route], path: str
) -> None:
    bomb = gzip.compress(b"[" + b" " * (50 * LIMIT) + b"]")
    assert len(bomb) < LIMIT
    r = client.post(path, content=bomb, headers={"content-encoding": "gzip"})
    assert r.status_code == 413
    assert_error_shape(path, r, "body_too_large")
    assert not upstream[path].called


def test_a_gzip_bomb_never_inflates_past_the_limit() -> None:
    """256 MiB of zeros in about 250 KB of gzip: decoding stops at the 1 MiB limit."""
    packer = zlib.compressobj(9, wbits=31)
    zeros = bytes(1 << 20)
    bomb = b"".join(packer.compress(zeros) for _ in range(256)) + packer.flush()
    tracemalloc.start()
    try:
        verdict = classify(
            bomb, Headers({"content-encoding": "gzip"}), limit=1 << 20, small=lambda _: False
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(verdict, Reject) and verdict.status == 413
    assert peak < 8 * (1 << 20)


@both_routes
@pytest.mark.parametrize(
    "raw",
    [
        b"\x1f\x8b\x08\x00garbage" + b"x" * 200,
        gzip.compress(orjson.dumps(chat()))[:-12],  # truncated
        gzip.compress(orjson.dumps(chat())) + b"trailing",
        b"",
    ],
    ids=["corrupt", "truncated", "trailing", "empty"],
)
def test_a_body_that_does_not_decode_is_400(
    client: TestClient, upstream: dict[str, respx.Route], path: str, raw: bytes
) -> None:
    r = client.post(path, content=raw, headers={"content-encoding": "gzip"})
    assert r.status_code == 400
    assert_error_shape(path, r, "invalid_encoding")
    assert not upstream[path].called


@both_routes
@pytest.mark.parametrize("coding", ["br", "zstd", "compress", "gzip, br", "gzip, " * 5 + "gzip"])
def test_a_coding_factrail_cannot_decode_is_forwarded_as_sent(
    client: TestClient,
    upstream: dict[str, respx.Route],
    compactor: ScriptedCompactor,
    path: str,
    coding: str,
) -> None:
    raw = bytes(range(256)) * 4
    r = client.post(path, content=raw, headers={"content-encoding": coding})
    assert_forwarded_as_sent(r, upstream[path], raw, compactor)
    assert upstream[path].calls.last.request.headers["content-encoding"] == coding


# -- bytes and text ----------------------------------------------------------------------------


@both_routes
@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "\xff\xfe'
        + b"x" * 200
        + b'"}]}',
        b'{"model": "gpt-4o", "messages": "\xed\xa0\x80' + b"x" * 200 + b'"}',  # UTF-8 surrogate
        b'{"model": "gpt-4o", "messages": [' + b"x" * 60_000,  # one huge line, not JSON
        b'{"model": "gpt-4o", "messages": [' + b" " * 200,  # truncated
    ],
    ids=["invalid-utf8", "encoded-surrogate", "huge-line-garbage", "truncated"],
)
def test_bytes_that_are_not_json_are_400(
    client: TestClient, upstream: dict[str, respx.Route], path: str, raw: bytes
) -> None:
    r = client.post(path, content=raw)
    assert r.status_code == 400
    assert_error_shape(path, r, "invalid_json")
    assert not upstream[path].called


@both_routes
@pytest.mark.parametrize(
    "raw",
    [b"[" + b"1, " * 100 + b"1]", b'"' + b"x" * 200 + b'"', b"1" * 200, b"null" + b" " * 200],
    ids=["array", "string", "number", "null"],
)
def test_json_that_is_not_an_object_is_400(
    client: TestClient, upstream: dict[str, respx.Route], path: str, raw: bytes
) -> None:
    r = client.post(path, content=raw)
    assert r.status_code == 400
    assert_error_shape(path, r, "invalid_body")
    assert not upstream[path].called


@both_routes
def test_a_huge_single_line_is_read_like_any_body(
    client: TestClient, upstream: dict[str, respx.Route], path: str
) -> None:
    raw = with_field(path, b'"note":"' + b"y" * 60_000 + b'"')
    assert b"\n" not in raw and len(raw) < LIMIT
    r = client.post(path, content=raw)
    assert r.status_code == 200 and r.headers["x-factrail"] == "compacted"
    assert orjson.loads(upstream[path].calls.last.request.content)["note"] == "y" * 60_000


@both_routes
def test_an_empty_body_is_forwarded_as_sent(
    client: TestClient, upstream: dict[str, respx.Route], compactor: ScriptedCompactor, path: str
) -> None:
    r = client.post(path, content=b"")
    assert_forwarded_as_sent(r, upstream[path], b"", compactor)


# -- JSON only lenient parsers read ----------------------------------------------------------------


@both_routes
@pytest.mark.parametrize(
    "field",
    [
        b'"temperature": NaN',
        b'"temperature": Infinity',
        b'"temperature": -Infinity',
        b'"temperature": 1e999',
        b'"seed": ' + b"9" * 30,
        b'"seed": -' + b"9" * 20,
        b'"seed": ' + b"7" * 5000,
        b'"user": "\\ud800 lone"',
        b'"user": "\\udfff"',
    ],
    ids=["nan", "inf", "-inf", "1e999", "int-30", "int-neg-20", "int-5000", "lone-hi", "lone-lo"],
)
def test_json_factrail_cannot_write_back_is_forwarded_as_sent(
    client: TestClient,
    upstream: dict[str, respx.Route],
    compactor: ScriptedCompactor,
    path: str,
    field: bytes,
) -> None:
    """Were compacted with the value changed (NaN and 1e999 to null, 30 digits to 1e30), failed
    open through an exception (lone surrogates) or a 400 (5,000 digits: Python's int bound)."""
    raw = with_field(path, field)
    r = client.post(path, content=raw)
    assert_forwarded_as_sent(r, upstream[path], raw, compactor)


@both_routes
def test_a_byte_order_mark_is_forwarded_as_sent(
    client: TestClient, upstream: dict[str, respx.Route], compactor: ScriptedCompactor, path: str
) -> None:
    raw = b"\xef\xbb\xbf" + orjson.dumps(valid(path))
    r = client.post(path, content=raw)
    assert_forwarded_as_sent(r, upstream[path], raw, compactor)


@both_routes
def test_integers_orjson_reads_exactly_are_still_compacted(
    client: TestClient, upstream: dict[str, respx.Route], path: str
) -> None:
    raw = with_field(path, b'"seed": 18446744073709551615, "floor": -9223372036854775808')
    r = client.post(path, content=raw)
    assert r.status_code == 200 and r.headers["x-factrail"] == "compacted"
    sent = upstream[path].calls.last.request.content
    assert b'"seed":18446744073709551615,"floor":-9223372036854775808' in sent


@both_routes
@pytest.mark.parametrize(
    "field",
    [b'"user": "id 123456789012345678901234"', b'"user": "id:123456789012345678901234"'],
    ids=["plain", "after-colon"],
)
def test_long_digit_runs_inside_strings_are_still_compacted(
    client: TestClient, upstream: dict[str, respx.Route], path: str, field: bytes
) -> None:
    r = client.post(path, content=with_field(path, field))
    assert r.status_code == 200 and r.headers["x-factrail"] == "compacted"


@pytest.mark.parametrize(
    ("raw", "may"),
    [
        (b'{"a":12345678901234567890}', True),
        (b'{"a": [1, -1234567890123456789]}', True),
        (b'{"a":\n\t -1234567890123456789}', True),
        (b'{"a":"12345678901234567890"}', False),
        (b'{"a":"x 12345678901234567890"}', False),
        (b'{"a":123456789012345678}', False),
    ],
)
def test_the_wide_integer_prefilter(raw: bytes, may: bool) -> None:
    assert request_body._may_hold_wide_int(raw) is may


@both_routes
def test_duplicate_keys_read_last_wins_and_a_rewrite_holds_each_once(
    client: TestClient, upstream: dict[str, respx.Route], compactor: ScriptedCompactor, path: str
) -> None:
    decoy = b'"messages": [{"role": "user", "content": "first"}], "model": "first-model", '
    raw = b"{" + decoy + orjson.dumps(valid(path))[1:]
    r = client.post(path, content=raw)
    assert r.status_code == 200 and r.headers["x-factrail"] == "compacted"
    sent = upstream[path].calls.last.request.content
    assert sent.count(b'"messages"') == 1 and sent.count(b'"model"') == 1
    assert orjson.loads(sent)["model"] == valid(path)["model"]
    compactor.outcome = "passthrough"
    r = client.post(path, content=raw)
    assert r.headers["x-factrail"] == "passthrough"
    assert upstream[path].calls.last.request.content == raw


# -- media types ---------------------------------------------------------------------------------


@both_routes
@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json; charset=utf-16",
        "application/xml",
    ],
)
def test_a_body_not_declared_json_is_forwarded_as_sent(
    client: TestClient,
    upstream: dict[str, respx.Route],
    compactor: ScriptedCompactor,
    path: str,
    content_type: str,
) -> None:
    """Was parsed and compacted whatever the client declared."""
    raw = orjson.dumps(valid(path))
    r = client.post(path, content=raw, headers={"content-type": content_type})
    assert_forwarded_as_sent(r, upstream[path], raw, compactor)


@both_routes
@pytest.mark.parametrize(
    "content_type",
    [None, "application/json", "Application/JSON; charset=UTF-8", "application/vnd.x+json"],
)
def test_json_media_types_and_none_are_read(
    client: TestClient, upstream: dict[str, respx.Route], path: str, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    r = client.post(path, content=orjson.dumps(valid(path)), headers=headers)
    assert r.status_code == 200 and r.headers["x-factrail"] == "compacted"


# -- the classifier itself ------------------------------------------------------------------------


def test_the_classifier_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(_: bytes) -> Any:
        raise MemoryError("no memory for this one")

    monkeypatch.setattr(request_body.orjson, "loads", broken)
    verdict = classify(b'{"a": 1}', Headers({}), limit=LIMIT, small=lambda _: False)
    assert verdict == Forward("classification failed")


def test_the_classifier_reads_an_object() -> None:
    headers = Headers({"content-type": "application/json"})
    assert classify(b'{"a": 1}', headers, limit=LIMIT, small=lambda _: False) == Read({"a": 1})
    assert isinstance(classify(b"{", headers, limit=LIMIT, small=lambda _: True), Forward)


# -- the fuzz --------------------------------------------------------------------------------------

UPSTREAM_MARK = "x-mock-upstream"
"""Set on every mocked upstream answer: a response without it was made by factrail."""
FUZZ_PATHS = [
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/models",
    "/v1//factrail/outputs/s/c",  # reserved: an OpenAI-shaped 404, never forwarded
    "/v1/FACTRAIL/sessions",
]
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)


@st.composite
def nested(draw: st.DrawFn) -> bytes:
    """JSON (or nearly) nested to a random depth, arrays or objects, closed or not."""
    depth = draw(st.integers(min_value=1, max_value=6000))
    if draw(st.booleans()):
        opening, closing = b"[", b"]"
    else:
        opening, closing = b'{"k":', b"}"
    closed = draw(st.sampled_from([depth, depth - 1, depth + 1, 0]))
    inner = opening * depth + b"1" + closing * max(closed, 0)
    if draw(st.booleans()):
        return b'{"model": "gpt-4o", "messages": [], "x": ' + inner + b"}"
    return inner


tool_inputs = st.one_of(json_values, st.text(max_size=30))


@st.composite
def chat_bodies(draw: st.DrawFn) -> bytes:
    """Valid chat bodies whose tool calls take random shapes."""
    messages: list[Any] = [{"role": "user", "content": draw(st.text(max_size=200))}]
    for i in range(draw(st.integers(min_value=0, max_value=3))):
        function = {"name": draw(st.text(max_size=12)), "arguments": draw(tool_inputs)}
        call = draw(st.sampled_from([{"id": f"c{i}", "type": "function", "function": function},
                                     {"id": f"c{i}", "function": draw(json_values)},
                                     draw(json_values)]))  # fmt: skip
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        content = draw(st.one_of(st.text(max_size=300), json_values))
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": content})
    body = {"model": draw(st.sampled_from(["gpt-4o", "gpt-4", "o3", ""])), "messages": messages}
    return orjson.dumps(body)


@st.composite
def messages_bodies(draw: st.DrawFn) -> bytes:
    """Valid Anthropic bodies with random tool_use / tool_result shapes."""
    messages: list[Any] = [{"role": "user", "content": draw(st.text(max_size=200))}]
    for i in range(draw(st.integers(min_value=0, max_value=3))):
        use = {"type": "tool_use", "id": f"t{i}", "name": draw(st.text(max_size=12)),
               "input": draw(tool_inputs)}  # fmt: skip
        if draw(st.booleans()):
            kind = draw(st.sampled_from(["tool_use", "mcp_tool_use", "x"]))
            use = {
                "type": kind,
                **draw(st.dictionaries(st.text(max_size=6), json_values, max_size=3)),
            }
        result = {"type": "tool_result", "tool_use_id": f"t{i}",
                  "content": draw(st.one_of(st.text(max_size=300), json_values))}  # fmt: skip
        messages.append({"role": "assistant", "content": [use]})
        messages.append({"role": "user", "content": [result]})
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": messages}
    if draw(st.booleans()):
        body["system"] = draw(st.one_of(st.text(max_size=40), json_values))
    return orjson.dumps(body)


def responses_body(text: str) -> bytes:
    return orjson.dumps({"model": "gpt-4o", "input": text})


valid_bodies = st.one_of(
    chat_bodies(), messages_bodies(), st.text(max_size=200).map(responses_body)
)
hostile_bodies = st.one_of(
    st.binary(max_size=600),
    nested(),
    json_values.map(orjson.dumps),
    valid_bodies.map(lambda raw: raw[:-1] + b',"t": NaN}'),
    valid_bodies.map(lambda raw: raw[:-1] + b',"u": "\\ud800"}'),
    valid_bodies.map(lambda raw: raw[:-1] + b',"seed": ' + b"9" * 40 + b"}"),
    st.binary(min_size=1, max_size=60).map(lambda raw: raw * 1200),  # up to and past the limit
)
codings = st.sampled_from([None, "gzip", "deflate", "br", "identity", "gzip, gzip", "x-gzip", "%"])
content_types = st.sampled_from(
    [None, "application/json", "text/plain", "application/json; charset=latin-1", "*/*", ""]
)
header_text = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20
).map(str.strip)


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    is_valid = draw(st.booleans())
    body = draw(valid_bodies if is_valid else hostile_bodies)
    coding = draw(codings)
    packed = body
    if coding in ("gzip", "x-gzip") and draw(st.booleans()):
        packed = gzip.compress(body)
    elif coding == "deflate" and draw(st.booleans()):
        packed = zlib.compress(body)
    elif coding == "gzip, gzip" and draw(st.booleans()):
        packed = gzip.compress(gzip.compress(body))
    headers = {"x-fuzz": draw(header_text)}
    if coding is not None:
        headers["content-encoding"] = coding
    content_type = draw(content_types)
    if content_type is not None:
        headers["content-type"] = content_type
    if draw(st.booleans()):
        headers["x-factrail-session"] = draw(header_text)
    return {
        "path": draw(st.sampled_from(FUZZ_PATHS)),
        "method": draw(st.sampled_from(["POST", "POST", "POST", "PUT", "GET"])),
        "content": packed,
        "headers": headers,
        "valid": is_valid,
        "compacts": draw(st.sampled_from(["compacted", "passthrough", "fails"])),
        "upstream_status": draw(st.sampled_from([200, 200, 400, 500, 503])),
    }


@pytest.fixture
def fuzz_client(
    router: respx.MockRouter, outputs: OutputStore, compactor: ScriptedCompactor
) -> Iterator[tuple[TestClient, list[httpx.Request], dict[str, int]]]:
    seen: list[httpx.Request] = []
    status = {"code": 200}

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status["code"], json={"ok": True}, headers={UPSTREAM_MARK: "1"})

    router.route().mock(side_effect=answer)
    admin = "adm-" + "z" * 20
    settings = Settings(
        upstream_url=UPSTREAM,
        anthropic_upstream_url=ANTHROPIC,
        trigger_tokens=100,
        max_body_bytes=LIMIT,
        record_decisions=False,
        admin_key=admin,
    )
    with make_client(settings, router, compactor, outputs) as c:
        c.headers["authorization"] = f"Bearer {admin}"
        yield c, seen, status


def test_fuzz_never_a_5xx_of_ours(
    fuzz_client: tuple[TestClient, list[httpx.Request], dict[str, int]],
    compactor: ScriptedCompactor,
) -> None:
    client, seen, status = fuzz_client

    @hypothesis_settings(
        max_examples=300,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(requests())
    def one(request: dict[str, Any]) -> None:
        seen.clear()
        compactor.calls.clear()
        compactor.outcome = "passthrough" if request["compacts"] == "passthrough" else "compacted"
        compactor.fail = request["compacts"] == "fails"
        status["code"] = request["upstream_status"]
        path, content = request["path"], request["content"]
        r = client.request(request["method"], path, content=content, headers=request["headers"])
        relayed = r.headers.get(UPSTREAM_MARK) == "1"
        assert relayed or r.status_code < 500, (r.status_code, r.text)
        if not relayed:
            assert 400 <= r.status_code < 500 and not seen
            assert_error_shape(path, r, r.json().get("error", {}).get("code", ""))
            return
        (sent,) = seen
        assert "authorization" not in sent.headers  # the admin bearer never leaves
        changed = r.headers.get("x-factrail") == "compacted"
        if not changed:
            assert sent.content == content  # the exact bytes, whatever they were
        else:
            assert isinstance(orjson.loads(sent.content), dict)
            assert sent.headers.get("content-encoding", "identity") == "identity"
        if request["valid"] and request["compacts"] != "compacted":
            assert sent.content == content

    one()
