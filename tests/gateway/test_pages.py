"""The pages under `/factrail/`: closed without the admin key, signed in by the login link or
form (a cookie that is not the key), never redirected off the gateway, never showing a
capability or the key, every figure equal to the JSON API's, and served with a strict CSP.

One session is compacted through the gateway with the real engine; another is written to the
stores directly, so its original, what was sent and its note are known line by line."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from factrail.core.reapply import PlanEntry, text_hash
from factrail.gateway.factory import create_app, default_engine
from factrail.gateway.pages.chart import Rule, Series, line_chart
from factrail.gateway.pages.compare import compare
from factrail.gateway.pages.render import CSP
from factrail.gateway.routes.admin import COOKIE, COOKIE_LABEL
from factrail.policy.taint import TAINT_SCHEMA
from factrail.session.keys import header_key
from factrail.settings import Settings
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.outputs import OutputStore
from factrail.stores.schema import COMPACTION_SCHEMA, VERSION
from factrail.stores.state import SessionState
from tests.test_session import chat

HEX32 = re.compile(r"(?<![0-9a-fA-F])[0-9a-fA-F]{32}(?![0-9a-fA-F])")
CRAFTED = "crafted-session"
TOOL_ID = "toolu_pages_1"
ORIGINAL = "\n".join(
    ["build started", "step 1 ok", "step 2 ok", "ERROR: disk full on /var", "build failed"]
)
KEPT = "ERROR: disk full on /var"


@dataclass
class Site:
    client: TestClient
    key: str
    driven: str
    """A session compacted through the gateway."""
    capabilities: set[str]
    """The folder of every saved output."""


def crafted_state(outputs: OutputStore) -> SessionState:
    """A tainted session with one reduced result: one line of five kept, the original saved."""
    output_id = outputs.save(CRAFTED, TOOL_ID, ORIGINAL).output_id
    note = (
        f"[factrail omitted 4 lines: full output saved at /v1/factrail/outputs/{output_id}"
        " (`factrail outputs get` prints it)]"
    )
    sent = f"{KEPT}\n{note}"
    record = {
        VERSION: COMPACTION_SCHEMA,
        "at_ms": int(time.time() * 1000) - 60_000,
        "line": "trigger",
        "decision": "pays",
        "turns": 7,
        "judge": "rules",
        "reason": "rules",
        "trigger": 6000,
        "tokens_before": 9100,
        "tokens_after": 4200,
        "first_changed_message": 5,
        "invalidated_tokens": 1234,
        "saved_tokens_per_turn": 4900,
        "results": [
            {
                "id": TOOL_ID,
                "tool": "Bash",
                "original_chars": len(ORIGINAL),
                "kept_chars": len(sent),
                "note": note,
                "whole": output_id,
                "arguments_briefed": False,
                "arguments_whole": None,
                "recent": False,
            }
        ],
        "results_total": 1,
        "window": None,
    }
    return SessionState(
        plan={TOOL_ID: PlanEntry(text_hash(ORIGINAL), sent)},
        compactions=1,
        bets=1,
        billed=12000.0,
        spared=3500.5,
        history=[record],
        taint={"v": TAINT_SCHEMA, "tainted": True, "count": 1, "sample": [], "at": 1},
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("pages")
    key = secrets.token_urlsafe(32)
    settings = Settings(
        state_url="memory://",
        trigger_tokens=6000,
        trigger_percent=0.0,
        price_profile="none",
        admin_key=SecretStr(key),
    )
    outputs = OutputStore(tmp / "outputs")
    state = MemoryStateStore()
    upstream = httpx.MockTransport(lambda _: httpx.Response(200, json={"choices": []}))
    app = create_app(
        settings,
        client=httpx.AsyncClient(transport=upstream),
        state=state,
        outputs=outputs,
        engine_factory=default_engine,
    )
    with TestClient(app) as client:
        body = {"model": "gpt-4o", "messages": chat(30)}
        answer = client.post(
            "/v1/chat/completions", json=body, headers={"x-factrail-session": "driven"}
        )
        assert answer.headers["x-factrail"] == "compacted"
        state.save(CRAFTED, crafted_state(outputs))
        folders = {p.name for p in (tmp / "outputs").iterdir() if p.is_dir()}
        assert len(folders) == 2
        yield Site(client, key, header_key("driven"), folders)


def bearer(site: Site) -> dict[str, str]:
    return {"authorization": f"Bearer {site.key}"}


def pages(site: Site) -> list[str]:
    return ["/factrail/", f"/factrail/sessions/{site.driven}", f"/factrail/sessions/{CRAFTED}"]


def cookie_of(response: httpx.Response) -> str:
    (line,) = response.headers.get_list("set-cookie")
    return line


def test_pages_are_refused_without_the_key_with_the_login_form(site: Site) -> None:
    c = site.client
    refused: list[dict[str, str]] = [
        {},
        {"authorization": "Bearer wrong"},
        {"authorization": f"Basic {site.key}"},
        {"cookie": f"{COOKIE}={site.key}"},
        {"cookie": f"{COOKIE}={secrets.token_hex(32)}"},
    ]
    for path in [*pages(site), "/factrail/nowhere"]:
        for headers in refused:
            r = c.get(path, headers=headers)
            assert r.status_code == 401, (path, headers)
            assert r.headers["content-type"].startswith("text/html")
            assert 'name="key"' in r.text and 'action="/factrail/login"' in r.text
            assert f'name="next" value="{path}"' in r.text
            assert "data-session" not in r.text and "data-result" not in r.text
    assert c.get(f"/factrail/?key={site.key}").status_code == 401


def test_pages_are_served_with_the_bearer_key(site: Site) -> None:
    listed = site.client.get("/factrail/", headers=bearer(site))
    assert listed.status_code == 200
    assert f'data-session="{site.driven}"' in listed.text
    assert f'data-session="{CRAFTED}"' in listed.text
    assert f'href="/factrail/sessions/{CRAFTED}"' in listed.text
    assert 'data-refresh="10"' in listed.text
    for path in pages(site)[1:]:
        assert site.client.get(path, headers=bearer(site)).status_code == 200


def test_the_login_link_sets_a_cookie_that_is_not_the_key(site: Site) -> None:
    c = site.client
    target = f"/factrail/sessions/{CRAFTED}"
    r = c.get("/factrail/login", params={"key": site.key, "next": target}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == target
    line = cookie_of(r)
    value = hmac.new(site.key.encode(), COOKIE_LABEL, hashlib.sha256).hexdigest()
    assert line.startswith(f"{COOKIE}={value};")
    assert site.key not in line
    flags = [f.strip() for f in line.split(";")[1:]]
    assert {"HttpOnly", "SameSite=Strict", "Path=/factrail"} <= set(flags)
    assert "Secure" not in flags
    c.cookies.clear()
    shown = c.get(target, headers={"cookie": f"{COOKIE}={value}"})
    assert shown.status_code == 200 and 'data-result="' in shown.text
    assert site.key not in shown.text
    over_tls = c.get(
        "https://testserver/factrail/login", params={"key": site.key}, follow_redirects=False
    )
    assert "Secure" in [f.strip() for f in cookie_of(over_tls).split(";")]
    c.cookies.clear()


def test_a_wrong_key_is_refused_with_the_form_and_no_cookie(site: Site) -> None:
    c = site.client
    wrong = secrets.token_urlsafe(32)
    for r in (
        c.get("/factrail/login", params={"key": wrong}, follow_redirects=False),
        c.post("/factrail/login", data={"key": wrong, "next": "/factrail/"}),
        c.post("/factrail/login", data={"key": site.key[:-1]}),
    ):
        assert r.status_code == 401
        assert "set-cookie" not in r.headers
        assert 'name="key"' in r.text and 'class="error"' in r.text
        assert wrong not in r.text and site.key[:-1] not in r.text
    form = c.get("/factrail/login?next=/factrail/sessions/x")
    assert form.status_code == 200 and 'name="next" value="/factrail/sessions/x"' in form.text


def test_the_login_form_signs_in_and_logout_signs_out(site: Site) -> None:
    c = site.client
    r = c.post(
        "/factrail/login",
        content=f"key={site.key}&next=%2Ffactrail%2Fsessions%2F{CRAFTED}",
        headers={"content-type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == f"/factrail/sessions/{CRAFTED}"
    value = cookie_of(r).split(";")[0].split("=", 1)[1]
    assert c.get("/factrail/", headers={"cookie": f"{COOKIE}={value}"}).status_code == 200
    out = c.post("/factrail/logout", follow_redirects=False)
    assert out.status_code == 303
    assert cookie_of(out).startswith(f"{COOKIE}=;") and "Max-Age=0" in cookie_of(out)
    big = c.post("/factrail/login", content=b"key=" + b"x" * 20000)
    assert big.status_code == 400 and "set-cookie" not in big.headers
    c.cookies.clear()


OFF_SITE = [
    "//evil.example",
    "https://evil.example",
    "http:/factrail/",
    "/\\evil.example",
    "/factrail/\\evil.example",
    "/factrail/%5Cevil.example",
    "/factrail/../v1/factrail/sessions",
    "/factrail/%2e%2e/v1",
    "/factrail/%252e%252e/v1",
    "/factrail/.",
    "%2F%2Fevil.example",
    "%252F%252Fevil.example",
    "/factrail//evil.example",
    "/factrail/%2F%2Fevil.example",
    "/factrail/%0d%0aSet-Cookie:%20x=1",
    "/factrail/\tx",
    " /factrail/",
    "/factrailx",
    "/v1/factrail/sessions",
    "javascript:alert(1)",
    "/factrail/%ff",
]


@pytest.mark.parametrize("target", OFF_SITE)
def test_next_never_leaves_the_pages(site: Site, target: str) -> None:
    c = site.client
    for r in (
        c.get("/factrail/login", params={"key": site.key, "next": target}, follow_redirects=False),
        c.post("/factrail/login", data={"key": site.key, "next": target}, follow_redirects=False),
    ):
        assert r.status_code == 303
        assert r.headers["location"] == "/factrail/", target
    c.cookies.clear()


def test_next_keeps_an_own_page(site: Site) -> None:
    for target, landed in [
        ("/factrail", "/factrail"),
        ("/factrail/sessions/h-abc", "/factrail/sessions/h-abc"),
        ("/factrail/?limit=5", "/factrail/?limit=5"),
        ("/factrail/sessions/a%20b", "/factrail/"),
    ]:
        r = site.client.get(
            "/factrail/login", params={"key": site.key, "next": target}, follow_redirects=False
        )
        assert r.headers["location"] == landed
    site.client.cookies.clear()


def test_every_page_answer_carries_the_security_headers(site: Site) -> None:
    c = site.client
    answers = [c.get(p, headers=bearer(site)) for p in pages(site)]
    answers += [c.get(p) for p in pages(site)]
    answers += [
        c.get("/factrail/login"),
        c.get("/factrail/login", params={"key": "nope"}),
        c.get("/factrail/login", params={"key": site.key}, follow_redirects=False),
        c.get("/factrail/sessions/no-such-session", headers=bearer(site)),
        c.get("/factrail/elsewhere", headers=bearer(site)),
        c.post("/factrail/logout", follow_redirects=False),
    ]
    for r in answers:
        assert r.headers["content-security-policy"] == CSP, r.url
        assert r.headers["cache-control"] == "no-store"
        assert r.headers["referrer-policy"] == "no-referrer"
        assert r.headers["x-content-type-options"] == "nosniff"
    assert "unsafe-inline" not in CSP and "default-src 'none'" in CSP
    for r in answers:
        assert "<style" not in r.text and " style=" not in r.text
        assert re.search(r"<script(?![^>]*\bsrc=)", r.text) is None
        assert re.search(r"""(src|href|action)=["']?(https?:)?//""", r.text) is None
    site.client.cookies.clear()


def test_no_page_shows_a_capability_or_the_key(site: Site) -> None:
    c = site.client
    shown = [c.get(p, headers=bearer(site)).text for p in pages(site)]
    shown += [c.get(p).text for p in pages(site)]
    shown += [c.get("/factrail/login", params={"key": site.key, "next": "/factrail/"}).text]
    c.cookies.clear()
    for html in shown:
        assert site.key not in html
        assert HEX32.findall(html) == []
        assert not [cap for cap in site.capabilities if cap in html]
    assert "&lt;capability&gt;" in shown[2]


VOID = frozenset({"br", "hr", "img", "input", "link", "meta"})


class Figures(HTMLParser):
    """Every `data-field` with its `data-value`, under the session row (if any) it lies in;
    and the text of each element of class `note`, and of each line of a result."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: list[tuple[str | None, str, str | None]] = []
        self.row: str | None = None
        self.texts: list[tuple[str, str]] = []
        self._open: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr":
            self.row = a.get("data-session")
        if "data-field" in a:
            self.figures.append((self.row, a["data-field"] or "", a.get("data-value")))
        if tag in VOID:
            return
        classes = (a.get("class") or "").split()
        self._open.append(next((c for c in ("note", "omitted", "kept") if c in classes), None))
        if self._open[-1] is not None:
            self.texts.append((self._open[-1], ""))

    def handle_endtag(self, tag: str) -> None:
        if tag not in VOID and self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        if self._open and self._open[-1] is not None:
            kind, text = self.texts[-1]
            self.texts[-1] = (kind, text + data)


def parsed(html: str) -> Figures:
    p = Figures()
    p.feed(html)
    return p


MISSING = object()


def at(value: Any, path: str) -> Any:
    """`value` at a dotted JSON path (`MISSING` when the JSON has no such key)."""
    for part in path.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return MISSING
    return value


def test_the_figures_on_the_pages_are_the_json_api_values(site: Site) -> None:
    """Every `data-field` lies at a path of the JSON API's answer and holds its value there."""
    c = site.client
    listing = c.get("/v1/factrail/sessions", headers=bearer(site)).json()
    rows = {s["session"]: s for s in listing["sessions"]}
    figures = parsed(c.get("/factrail/", headers=bearer(site)).text).figures
    for row, field, raw in figures:
        expected = at(rows[row] if row else listing, field)
        assert expected is not MISSING, (row, field)
        assert raw is not None and json.loads(raw) == expected, (row, field)
    crafted = {f for row, f, _ in figures if row == CRAFTED}
    assert {"bill.billed", "bill.whole", "bill.spared", "bill.ratio", "compactions"} <= crafted
    assert {"turns", "client", "model", "tainted", "updated_ms"} <= crafted
    assert {"summary.spared", "summary.ratio", "mode"} <= {f for row, f, _ in figures if not row}
    for session in (site.driven, CRAFTED):
        data = c.get(f"/v1/factrail/sessions/{session}", headers=bearer(site)).json()
        page = c.get(f"/factrail/sessions/{session}", headers=bearer(site)).text
        fields = {f: raw for _, f, raw in parsed(page).figures}
        for field, raw in fields.items():
            expected = at(data, field)
            assert expected is not MISSING, (session, field)
            assert raw is not None and json.loads(raw) == expected, (session, field)
        for name in ("first_changed_message", "invalidated_tokens", "saved_tokens_per_turn"):
            assert f"history.0.{name}" in fields
        assert {"compactions", "bets", "forced", "cold", "reduced_results"} <= set(fields)
        assert ("bill.billed" in fields) == (data["bill"] is not None)
    assert data["bill"] is not None


def test_the_session_page_shows_the_note_and_the_omitted_lines(site: Site) -> None:
    page = site.client.get(f"/factrail/sessions/{CRAFTED}", headers=bearer(site)).text
    assert f'data-result="{TOOL_ID}"' in page
    texts = parsed(page).texts
    notes = [t for kind, t in texts if kind == "note"]
    assert len(notes) == 1 and "[factrail omitted 4 lines" in notes[0]
    assert "/v1/factrail/outputs/<capability>/" in notes[0]
    omitted = [t for kind, t in texts if kind == "omitted"]
    kept = [t for kind, t in texts if kind == "kept"]
    assert omitted == ["build started", "step 1 ok", "step 2 ok", "build failed"]
    assert kept == [KEPT]
    assert "Fenced." in page and "pays back its cache break" in page
    assert "12,000" in page and "+3,500" in page and "0.77×" in page
    driven = site.client.get(f"/factrail/sessions/{site.driven}", headers=bearer(site)).text
    assert driven.count("data-result=") >= 1 and 'class="line omitted"' in driven
    assert "Fenced." not in driven


def test_an_unknown_session_is_a_404_page(site: Site) -> None:
    r = site.client.get("/factrail/sessions/no-such-session", headers=bearer(site))
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("text/html") and "Not found" in r.text


def test_only_the_shipped_static_files_are_served(site: Site) -> None:
    c = site.client
    css = c.get("/factrail/static/pages.css")
    js = c.get("/factrail/static/pages.js")
    assert css.status_code == 200 and css.headers["content-type"] == "text/css; charset=utf-8"
    assert js.status_code == 200
    assert js.headers["content-type"] == "text/javascript; charset=utf-8"
    assert "max-age=31536000" in css.headers["cache-control"]
    assert "prefers-color-scheme: dark" in css.text and "visibilitychange" in js.text
    assert len(css.content) < 10_000 and len(js.content) < 4_000
    for name in (
        "../settings.py",
        "%2e%2e%2fsettings.py",
        "..%2F__init__.py",
        "__init__.py",
        "base.html",
        "pages.css.map",
        "",
    ):
        r = c.get(f"/factrail/static/{name}")
        assert r.status_code in (401, 404), name
        assert "css" not in r.headers.get("content-type", "")
        assert "router" not in r.text and "import" not in r.text


def test_the_tokens_chart_draws_its_lines_and_marks() -> None:
    svg = str(
        line_chart(
            [Series("whole", [(1, 100), (2, 9000), (3, 14000)]), Series("sent", [(1, 100)])],
            [Rule("trigger", 6000), Rule("danger", 12000)],
            [2],
            label="tokens <per> turn",
        )
    )
    assert svg.startswith("<svg") and svg.count("<polyline") == 2
    assert 'class="rule rule-danger"' in svg and svg.count('class="mark"') == 1
    assert "tokens &lt;per&gt; turn" in svg and "12k" in svg
    assert str(line_chart([Series("sent", [])], label="none")) == ""


def test_a_result_beside_its_original_is_cut_and_hides_capabilities() -> None:
    capability = secrets.token_hex(16)
    original = "\n".join(f"row {i}" for i in range(1000))
    sent = f"row 3\nrow 999\nsaved at /v1/factrail/outputs/{capability}/t1"
    shown = compare(original, sent, f"{capability}/t1", cap=400)
    assert shown.original is not None and len(shown.original) == 400
    assert shown.original_more == 600 and shown.omitted == 998
    assert [line for line, kept in shown.original if kept] == ["row 3"]
    assert shown.sent is not None and capability not in "".join(shown.sent)
    assert compare(None, "x", None).original is None


def test_the_bare_prefix_leads_to_the_list(site: Site) -> None:
    r = site.client.get("/factrail", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/factrail/"
