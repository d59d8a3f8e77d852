"""Credentials go only where they belong, and no path climbs out of `/v1` on the upstream."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import httpx
import orjson
import pytest
import respx

from factrail.gateway import upstream
from factrail.gateway.routes.proxied import OWN_PREFIX, is_reserved
from factrail.gateway.upstream import has_dot_segment, request_headers
from factrail.settings import Settings
from tests.gateway.support import UPSTREAM, ScriptedCompactor, make_client


@pytest.mark.parametrize(
    ("path", "dotted"),
    [
        ("/v1/models", False),
        ("/v1/../../x", True),
        ("/v1/./models", True),
        ("/v1/%2e%2e/x", True),
        ("/v1/%2E./x", True),
        ("/v1/files/a..b", False),
        ("/v1/files/...", False),
    ],
)
def test_dot_segments(path: str, dotted: bool) -> None:
    assert has_dot_segment(path) is dotted


def test_anthropic_credentials_never_reach_another_upstream() -> None:
    key = "sk-ant-" + "k" * 24
    raw = [(b"x-api-key", key.encode()), (b"anthropic-version", b"2023-06-01"), (b"x-other", b"1")]
    to_openai = dict(request_headers(raw))
    assert b"x-api-key" not in to_openai and b"anthropic-version" not in to_openai
    assert to_openai[b"x-other"] == b"1"
    assert dict(request_headers(raw, anthropic=True))[b"x-api-key"] == key.encode()


def test_through_the_gateway(router: respx.MockRouter, compactor: ScriptedCompactor) -> None:
    seen: list[httpx.Request] = []

    def models(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": []})

    router.get(f"{UPSTREAM}/models").mock(side_effect=models)
    with make_client(Settings(upstream_url=UPSTREAM), router, compactor, None) as client:
        key = "sk-ant-" + "q" * 24
        got = client.get("/v1/models", headers={"x-api-key": key, "authorization": "Bearer t"})
        assert got.status_code == 200
    (request,) = seen
    assert "x-api-key" not in request.headers and request.headers["authorization"] == "Bearer t"


def test_a_dotted_path_is_rejected_before_anything_is_forwarded(
    router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    with make_client(Settings(upstream_url=UPSTREAM), router, compactor, None) as client:
        app = client.app
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "http_version": "1.1",
            "method": "GET",
            "path": "/v1/x",
            "raw_path": b"/v1/../../x",
            "query_string": b"",
            "headers": [],
            "app": app,
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 8080),
            "scheme": "http",
        }
        client.portal.call(app, scope, receive, send)  # type: ignore[union-attr]
    assert sent[0]["status"] == 400
    assert not router.calls


# -- Authorization to the Anthropic upstream -------------------------------------------------------

ANTHROPIC = "http://anthropic.test"
TRANSPORT = {"host", "content-length", "accept-encoding"}
"""Set by the client on every upstream request (`accept-encoding: identity` by factrail)."""


def sent_headers(
    mode: str, method: str, path: str, client_headers: dict[str, str], admin: str = ""
) -> dict[str, str]:
    """The headers the upstream got for one request, but the transport's own."""
    router = respx.MockRouter(assert_all_called=False)
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    router.route().mock(side_effect=record)
    settings = Settings(
        upstream_url=UPSTREAM,
        anthropic_upstream_url=ANTHROPIC,
        anthropic_authorization=mode,
        admin_key=admin,
    )
    with make_client(settings, router, ScriptedCompactor(), None) as client:
        client.headers.clear()
        body = b'{"model": "m", "messages": []}' if method == "POST" else b""
        assert client.request(method, path, content=body, headers=client_headers).is_success
    (request,) = seen
    assert request.headers["accept-encoding"] == "identity"
    return {k: v for k, v in request.headers.items() if k not in TRANSPORT}


ANTHROPIC_CALLS = [("POST", "/v1/messages"), ("POST", "/v1/messages/count_tokens")]
OPENAI_CALLS = [("POST", "/v1/chat/completions"), ("GET", "/v1/models"), ("POST", "/v1/responses")]


def bearer() -> str:
    return "tok-" + "b" * 24


def api_key() -> str:
    return "sk-ant-" + "k" * 24


@pytest.mark.parametrize(("method", "path"), ANTHROPIC_CALLS)
@pytest.mark.parametrize(
    ("mode", "client_headers", "expected"),
    [
        ("drop", {"authorization": "Bearer {b}"}, {}),
        ("drop", {"authorization": "Bearer {b}", "x-api-key": "{k}"}, {"x-api-key": "{k}"}),
        ("forward", {"authorization": "Bearer {b}"}, {"authorization": "Bearer {b}"}),
        (
            "forward",
            {"authorization": "Bearer {b}", "x-api-key": "{k}"},
            {"authorization": "Bearer {b}", "x-api-key": "{k}"},
        ),
        ("x-api-key", {"authorization": "Bearer {b}"}, {"x-api-key": "{b}"}),
        ("x-api-key", {"authorization": "bearer  {b} "}, {"x-api-key": "{b}"}),
        ("x-api-key", {"authorization": "Bearer {b}", "x-api-key": "{k}"}, {"x-api-key": "{k}"}),
        ("x-api-key", {"authorization": "Basic dXNlcjpwdw=="}, {}),
        ("drop", {"x-api-key": "{k}"}, {"x-api-key": "{k}"}),
        ("drop", {"authorization": "Bearer {k}"}, {}),
        ("anthropic", {"authorization": "Bearer {b}"}, {}),
        ("anthropic", {"authorization": "Bearer {k}"}, {"authorization": "Bearer {k}"}),
        ("anthropic", {"authorization": "Basic {k}"}, {}),
        (
            "anthropic",
            {"authorization": "Bearer {b}", "x-api-key": "{k}"},
            {"x-api-key": "{k}"},
        ),
    ],
)
def test_authorization_reaches_anthropic_only_as_the_operator_maps_it(
    method: str, path: str, mode: str, client_headers: dict[str, str], expected: dict[str, str]
) -> None:
    values = {"b": bearer(), "k": api_key()}
    extra = {"anthropic-version": "2023-06-01", "x-other": "1"}
    sent = sent_headers(
        mode, method, path, {**{k: v.format(**values) for k, v in client_headers.items()}, **extra}
    )
    want = {k: v.format(**values) for k, v in expected.items()}
    assert sent == {**want, **extra}


@pytest.mark.parametrize(("method", "path"), OPENAI_CALLS)
@pytest.mark.parametrize("mode", ["anthropic", "drop", "forward", "x-api-key"])
def test_the_openai_upstream_gets_authorization_and_never_anthropic_headers(
    method: str, path: str, mode: str
) -> None:
    client_headers = {
        "authorization": f"Bearer {bearer()}",
        "x-api-key": api_key(),
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "x",
        "openai-organization": "org-1",
    }
    sent = sent_headers(mode, method, path, client_headers)
    want = {"authorization": f"Bearer {bearer()}", "openai-organization": "org-1"}
    assert sent == want


@pytest.mark.parametrize(("method", "path"), ANTHROPIC_CALLS + OPENAI_CALLS)
def test_a_header_carrying_the_admin_key_never_leaves(method: str, path: str) -> None:
    admin = "adm-" + "a" * 20
    client_headers = {
        "authorization": f"Bearer {admin}",
        "x-api-key": admin,
        "x-other": admin,
        "x-kept": "1",
    }
    assert sent_headers("forward", method, path, client_headers, admin=admin) == {"x-kept": "1"}


def test_a_dropped_authorization_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    upstream._note_dropped_authorization.cache_clear()
    raw = [(b"authorization", b"Bearer t")]
    for _ in range(3):
        request_headers(raw, anthropic=True)
    said = [r for r in caplog.records if "FACTRAIL_ANTHROPIC_AUTHORIZATION" in r.getMessage()]
    assert len(said) == 1


# -- everything under /v1/factrail is factrail's own ----------------------------------------------

RESERVED = [
    "/v1/factrail",
    "/v1/factrail/",
    "/v1/factrail/outputs",
    "/v1/factrail/outputs/",
    "/v1/factrail/outputs/sess/call_1",
    "/v1/factrail/sessions",
    "/v1/factrail/anything/else",
    "/v1//factrail/outputs/sess/call_1",
    "/v1///factrail",
    "//v1/factrail/sessions",
    "/v1/factrail//outputs/x",
    "/v1/%66actrail/outputs/sess/call_1",
    "/v1/%46ACTRAIL/sessions",
    "/v1/factrail%2Foutputs%2Fsess",
    "/v1/FACTRAIL/outputs/sess/call_1",
    "/v1/FaCtRaIl",
    "/v1/Factrail/",
]
METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "PROPFIND"]


def call_raw(
    client: Any, method: str, raw_path: str, headers: list[tuple[bytes, bytes]]
) -> dict[str, Any]:
    """One request with the path exactly as a server would see it: `raw_path` as sent and
    `path` percent-decoded (as uvicorn does)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "path": unquote(raw_path),
        "raw_path": raw_path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "app": client.app,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8080),
        "scheme": "http",
    }
    client.portal.call(client.app, scope, receive, send)
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return {"status": start["status"], "body": body}


@pytest.mark.parametrize("path", RESERVED)
def test_everything_under_v1_factrail_is_reserved_for_every_method(
    router: respx.MockRouter, compactor: ScriptedCompactor, path: str
) -> None:
    """Was forwarded upstream with the admin bearer: `/v1//factrail/…`, other cases."""
    router.route().mock(return_value=httpx.Response(200, json={}))
    admin = "adm-" + "r" * 20
    settings = Settings(upstream_url=UPSTREAM, admin_key=admin)
    headers = [(b"authorization", f"Bearer {admin}".encode())]
    with make_client(settings, router, compactor, None) as client:
        for method in METHODS:
            answer = call_raw(client, method, path, headers)
            assert answer["status"] < 500, (method, answer)
            decoded = unquote(path)
            if decoded.startswith(OWN_PREFIX) and "//" not in decoded:
                continue  # factrail's own routes (FastAPI) answer the canonical spelling
            assert answer["status"] == 404, (method, answer)
            if method != "HEAD":
                assert orjson.loads(answer["body"])["error"]["code"] == "not_found"
    assert not router.calls


@pytest.mark.parametrize(
    ("path", "reserved"),
    [
        ("/v1/factrail", True),
        ("/v1/FACTRAIL/x", True),
        ("//v1//factrail", True),
        ("/v1/factrailx", False),
        ("/v1/factrail-outputs", False),
        ("/v1/models/factrail", False),
        ("/v2/factrail", False),
    ],
)
def test_which_paths_are_reserved(path: str, reserved: bool) -> None:
    assert is_reserved(path) is reserved


def test_near_misses_still_pass_through(
    router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    route = router.get(f"{UPSTREAM}/factrailx").mock(return_value=httpx.Response(200, json={}))
    with make_client(Settings(upstream_url=UPSTREAM), router, compactor, None) as client:
        assert client.get("/v1/factrailx").status_code == 200
    assert route.called
