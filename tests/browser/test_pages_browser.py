"""The pages under `/factrail/` in headless Chromium, served by a real gateway process that has
compacted a session sent turn by turn through it (a fake upstream on loopback behind it).

Each page: refused without the admin key and served with it (the login link, or the login form
typed into and clicked), no console error or uncaught exception, nothing requested from another
origin, every `data-field` figure equal to the JSON API's, and a full-page screenshot kept under
`test-artifacts/screenshots/`. In shadow mode the upstream gets the client's exact bytes while
the session's JSON projects the compactions it would have made.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest

from factrail.session.keys import header_key
from tests.browser.cdp import Page
from tests.integration.processes import start_factrail, start_fake, stop

pytestmark = pytest.mark.integration

Shoot = Callable[[Page, str], Path]
SESSION = "browser-pages"
"""The `X-Factrail-Session` of the session driven through the gateway."""
CALLS = 14
"""Tool calls in the session: past the test trigger (6,000 tokens) after a few."""

FIGURES = """(() => Array.from(document.querySelectorAll('[data-field]')).map(e => {
    const row = e.closest('tr[data-session]');
    return {field: e.dataset.field, value: e.dataset.value === undefined ? null : e.dataset.value,
            text: e.textContent.trim(), session: row ? row.dataset.session : null};
}))()"""
"""Every figure on a page: its JSON path, its raw JSON value, what it shows, and the session
row it sits in (None outside the list's rows)."""


def output(call: int) -> str:
    """The output of the session's tool call `call`: pytest lines with one failure among them."""
    lines = [f"tests/test_mod{call}.py::test_case_{j} PASSED [{j}%]" for j in range(60)]
    lines.insert(30, f"ERROR: assertion failed in module {call}: expected 4{call}1 got 4{call}2")
    return "\n".join(lines)


def turn(calls: int) -> list[dict[str, Any]]:
    """The messages an agent sends once its first `calls` tool calls have answered."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Find out why the build fails and fix it."},
    ]
    for i in range(calls):
        arguments = orjson.dumps({"cmd": f"pytest tests/test_mod{i}.py -x"}).decode()
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": "bash", "arguments": arguments}}  # fmt: skip
        messages.append(
            {"role": "assistant", "content": f"Running step {i}.", "tool_calls": [call]}
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": output(i)})
    return messages


def body(calls: int) -> bytes:
    """A request's exact bytes, spaced and escaped as no re-encoding would write them again."""
    data = {"model": "gpt-4o", "messages": turn(calls), "temperature": 0.0}
    return json.dumps(data, indent=1, ensure_ascii=True).encode()


def drive(v1: str) -> list[tuple[bytes, str]]:
    """Send the session turn by turn, each turn's body as bytes: what was sent, and how the
    gateway says it forwarded it (`x-factrail`)."""
    sent = []
    headers = {"content-type": "application/json", "x-factrail-session": SESSION,
               "user-agent": "openai-python/1.40.0"}  # fmt: skip
    with httpx.Client(timeout=30) as client:
        for calls in range(1, CALLS + 1):
            raw = body(calls)
            answer = client.post(f"{v1}/chat/completions", content=raw, headers=headers)
            assert answer.status_code == 200, answer.text
            sent.append((raw, answer.headers.get("x-factrail", "")))
    return sent


@dataclass
class Site:
    """A gateway that has served the session, and what it and its upstream saw."""

    root: str
    """The gateway's origin (`http://127.0.0.1:<port>`)."""
    key: str = field(repr=False)
    """Its admin key, made for this run."""
    session: str
    sent: list[tuple[bytes, str]] = field(repr=False)
    upstream_records: list[dict[str, str]] = field(repr=False)
    """The bodies the fake upstream received, in order."""

    def api(self, path: str) -> Any:
        answer = httpx.get(
            self.root + path, headers={"authorization": f"Bearer {self.key}"}, timeout=10
        )
        assert answer.status_code == 200, f"{path}: {answer.status_code} {answer.text}"
        return answer.json()

    def login_link(self, next_path: str = "/factrail/") -> str:
        return f"{self.root}/factrail/login?key={quote(self.key)}&next={quote(next_path)}"


def gateway(home: Path, **env: str) -> Iterator[Site]:
    """A fake upstream and a gateway in front of it (`env` added to its environment), the
    session driven through them."""
    key = secrets.token_urlsafe(32)
    upstream, fake = start_fake("tests.integration.fake_upstream:app")
    try:
        v1, proxy = start_factrail(f"{upstream}/v1", home, FACTRAIL_ADMIN_KEY=key, **env)
        try:
            sent = drive(v1)
            records = httpx.get(f"{upstream}/_records", timeout=10).json()
            yield Site(v1.removesuffix("/v1"), key, header_key(SESSION), sent, records)
        finally:
            stop(proxy)
    finally:
        stop(fake)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The gateway in its default mode, having compacted the session."""
    yield from gateway(tmp_path_factory.mktemp("pages"))


@pytest.fixture(scope="module")
def shadow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """A gateway in shadow mode, having forwarded the session untouched."""
    yield from gateway(tmp_path_factory.mktemp("shadow"), FACTRAIL_MODE="shadow")


# -- what every page is held to -----------------------------------------------------------------


def at(data: Any, path: str) -> Any:
    """The value at a dotted JSON path (`bill.ratio`, `history.0.invalidated_tokens`)."""
    for part in path.split("."):
        if isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        else:
            raise KeyError(path)
    return data


def disagreements(figures: list[dict[str, Any]], of: Callable[[str | None], Any]) -> list[str]:
    """Each figure whose value is not the JSON's at its path (`of(session row)` is the JSON the
    path is read in), or that shows nothing."""
    wrong = []
    for f in figures:
        where = f"{f['field']} (row {f['session']})" if f["session"] else f["field"]
        if f["value"] is None:
            wrong.append(f"{where}: no data-value")
            continue
        try:
            expected = at(of(f["session"]), f["field"])
        except KeyError:
            wrong.append(f"{where}: no such path in the JSON")
            continue
        if json.loads(f["value"]) != expected:
            wrong.append(f"{where}: page {f['value']}, JSON {json.dumps(expected)}")
        elif not f["text"]:
            wrong.append(f"{where}: shows nothing")
    return wrong


def assert_clean(page: Page, site: Site, *, problems: bool = True) -> None:
    """Nothing requested from anywhere but the gateway; with `problems`, no console error or
    warning, no uncaught exception, no failed load either."""
    if problems:
        seen = page.problems()
        assert not seen, "\n".join(seen)
    elsewhere = [
        url
        for url in page.requested_urls()
        if not url.startswith((site.root + "/", "data:", "about:"))
    ]
    assert elsewhere == []
    assert any(url.startswith(site.root + "/factrail/") for url in page.requested_urls())


def sign_in(page: Page, site: Site, next_path: str = "/factrail/") -> None:
    """Enter through the login link: the page `next_path` is shown, the key gone from the
    address bar."""
    assert page.goto(site.login_link(next_path)) == 200
    assert page.evaluate("location.pathname") == next_path
    assert site.key not in page.evaluate("location.href")


def row_selector(site: Site) -> str:
    return f"tr[data-session={json.dumps(site.session)}]"


# -- the gateway that compacted ------------------------------------------------------------------


def test_the_session_was_compacted_on_its_way(site: Site) -> None:
    ways = [way for _, way in site.sent]
    assert "passthrough" in ways
    assert "compacted" in ways
    assert ways[-1] in ("compacted", "reapplied")


def test_without_the_key_the_list_is_refused(page: Page, site: Site, screenshot: Shoot) -> None:
    listing = f"{site.root}/v1/factrail/sessions"
    assert httpx.get(listing, timeout=10).status_code == 401
    wrong = {"authorization": f"Bearer not-{site.key}"}
    assert httpx.get(listing, headers=wrong, timeout=10).status_code == 401

    for path, label in (("/factrail/", "list"), (f"/factrail/sessions/{site.session}", "session")):
        page.forget()
        assert page.goto(site.root + path) == 401
        assert page.evaluate("document.querySelectorAll('form input[name=key]').length") == 1
        assert (
            page.evaluate("document.querySelectorAll('[data-session], [data-result]').length") == 0
        )
        assert site.session not in page.evaluate("document.body.innerText")
        own_status = [p for p in page.problems() if "401" in p and p.endswith(site.root + path)]
        assert page.problems() == own_status  # Chromium logs the document's own 401, nothing else
        assert_clean(page, site, problems=False)
        screenshot(page, label)


def test_the_login_link_opens_the_list_with_the_json_figures(
    page: Page, site: Site, screenshot: Shoot
) -> None:
    sign_in(page, site)
    listing = site.api("/v1/factrail/sessions")
    rows = {row["session"]: row for row in listing["sessions"]}
    assert list(rows) == [site.session]
    assert page.evaluate(f"document.querySelectorAll({json.dumps(row_selector(site))}).length") == 1

    figures = page.evaluate(FIGURES)
    wrong = disagreements(figures, lambda row: listing if row is None else rows[row])
    assert not wrong, "\n".join(wrong)
    shown = {f["field"] for f in figures if f["session"] == site.session}
    assert {"bill.billed", "bill.whole", "bill.ratio", "compactions", "turns"} <= shown
    assert rows[site.session]["compactions"] >= 1
    assert_clean(page, site)
    screenshot(page, "")


def test_the_session_page_shows_the_note_and_the_omitted_lines(
    page: Page, site: Site, screenshot: Shoot
) -> None:
    sign_in(page, site)
    link = f"{row_selector(site)} a[href]"
    assert page.click(link, navigates=True) == 200
    assert page.evaluate("location.pathname") == f"/factrail/sessions/{site.session}"
    report = site.api(f"/v1/factrail/sessions/{site.session}")

    figures = page.evaluate(FIGURES)
    wrong = disagreements(figures, lambda _: report)
    assert not wrong, "\n".join(wrong)
    ends = {f["field"].rsplit(".", 1)[-1] for f in figures}
    assert {"first_changed_message", "invalidated_tokens", "saved_tokens_per_turn"} <= ends

    results = page.evaluate(
        """Array.from(document.querySelectorAll('[data-result]')).map(e => ({
            id: e.dataset.result,
            notes: Array.from(e.querySelectorAll('.note')).map(n => n.textContent.trim()),
            omitted: Array.from(e.querySelectorAll('.omitted')).map(n => n.textContent)}))"""
    )
    notes = {r["id"]: r["note"] for h in report["history"] for r in h["results"]}
    assert results
    assert {r["id"] for r in results} <= set(notes)
    compared = [r for r in results if r["omitted"]]
    assert compared, "no reduced result shows the original lines it omitted"
    forwarded = orjson.loads(site.upstream_records[-1]["body"])["messages"]
    sent_text = {m["tool_call_id"]: m["content"] for m in forwarded if m["role"] == "tool"}
    for result in compared:
        assert result["notes"] == [notes[result["id"]]]
        original = output(int(result["id"].removeprefix("call_"))).split("\n")
        sent_lines = set(sent_text[result["id"]].split("\n"))
        lines = [line.strip() for o in result["omitted"] for line in o.split("\n") if line.strip()]
        assert lines
        assert set(lines) <= set(original), "an omitted line is not in the original output"
        assert not set(lines) & sent_lines, "a line shown omitted was sent"
    assert_clean(page, site)
    screenshot(page, "")


def test_the_login_form_signs_in_with_the_typed_key(
    page: Page, site: Site, screenshot: Shoot
) -> None:
    submit = "form:has(input[name=key]) [type=submit]"
    assert page.goto(f"{site.root}/factrail/") == 401
    page.type("input[name=key]", "not-" + site.key)
    assert page.click(submit, navigates=True) == 401
    assert page.evaluate("document.querySelectorAll('tr[data-session]').length") == 0

    page.forget()
    page.type("input[name=key]", site.key)
    screenshot(page, "typed")
    assert page.click(submit, navigates=True) == 200
    assert page.evaluate("location.pathname") == "/factrail/"
    assert site.key not in page.evaluate("location.href")
    assert page.evaluate(f"document.querySelectorAll({json.dumps(row_selector(site))}).length") == 1
    assert_clean(page, site)
    screenshot(page, "signed-in")


# -- shadow mode ---------------------------------------------------------------------------------


def test_in_shadow_mode_the_upstream_gets_the_exact_bytes_and_the_json_projects(
    shadow: Site,
) -> None:
    assert [
        record["body"].encode("utf-8", "surrogateescape") for record in shadow.upstream_records
    ] == [raw for raw, _ in shadow.sent]
    listing = shadow.api("/v1/factrail/sessions")
    assert listing["mode"] == "shadow"
    report = shadow.api(f"/v1/factrail/sessions/{shadow.session}")
    assert report["compactions"] == 0
    assert report["projected"] is not None
    assert report["projected"]["compactions"] >= 1


def test_in_shadow_mode_the_list_shows_the_projected_figures(
    page: Page, shadow: Site, screenshot: Shoot
) -> None:
    sign_in(page, shadow)
    listing = shadow.api("/v1/factrail/sessions")
    rows = {row["session"]: row for row in listing["sessions"]}
    figures = page.evaluate(FIGURES)
    wrong = disagreements(figures, lambda row: listing if row is None else rows[row])
    assert not wrong, "\n".join(wrong)
    shown = {f["field"] for f in figures if f["session"] == shadow.session}
    assert any(field.startswith("projected.") for field in shown)
    assert_clean(page, shadow)
    screenshot(page, "")


def test_in_shadow_mode_the_session_page_shows_what_would_have_been_sent(
    page: Page, shadow: Site, screenshot: Shoot
) -> None:
    sign_in(page, shadow, f"/factrail/sessions/{shadow.session}")
    report = shadow.api(f"/v1/factrail/sessions/{shadow.session}")
    wrong = disagreements(page.evaluate(FIGURES), lambda _: report)
    assert not wrong, "\n".join(wrong)
    text = page.evaluate("document.body.innerText")
    assert "as factrail would have sent them" in text
    assert "Compactions shadow mode decided, none sent" in text
    assert page.evaluate("document.querySelectorAll('[data-result] .omitted').length") > 0
    assert_clean(page, shadow)
    screenshot(page, "")
