"""The pages of a gateway that compacted a real agent session (SWE-agent 1.x on django, from the
development corpus; skipped where the corpus is absent): replayed turn by turn through a real
gateway process, the list shows it and its page shows each compaction's notes and the original
lines they omitted, every figure equal to the JSON API's, nothing loaded from elsewhere."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from factrail.session.keys import header_key
from tests.browser.cdp import Page
from tests.browser.test_pages_browser import FIGURES, Site, assert_clean, disagreements, sign_in
from tests.integration.processes import start_factrail, start_fake, stop

pytestmark = pytest.mark.integration

Shoot = Callable[[Page, str], Path]
SESSION_FILE = "sweagent_v1__lgetter__trajs_django__django-15127.traj.json"
"""About 49k tokens in 30 tool calls: compacted several times at the tests' 6,000-token trigger,
behind a fake upstream that reports prompt tokens and cache reads as a provider would
(`fake_cache_upstream`), so the session's bill and calibration are those of a real one."""
NAME = "real-django"


def prefixes(messages: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """The transcript as its agent sent it: up to each tool result that ends a turn."""
    for i, message in enumerate(messages):
        after = messages[i + 1] if i + 1 < len(messages) else None
        if message.get("role") == "tool" and (after is None or after.get("role") != "tool"):
            yield messages[: i + 1]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory, corpus_dir: Path) -> Iterator[Site]:
    path = corpus_dir / SESSION_FILE
    if not path.is_file():
        pytest.skip(f"{SESSION_FILE} not in the corpus")
    messages = json.loads(path.read_text(encoding="utf-8"))["messages"]
    key = secrets.token_urlsafe(32)
    upstream, fake = start_fake("tests.integration.fake_cache_upstream:app")
    home = tmp_path_factory.mktemp("real")
    try:
        v1, proxy = start_factrail(
            f"{upstream}/v1", home, FACTRAIL_ADMIN_KEY=key, FACTRAIL_PRICE_PROFILE="openai"
        )
        try:
            sent = []
            headers = {"content-type": "application/json", "x-factrail-session": NAME,
                       "user-agent": "swe-agent/1.0"}  # fmt: skip
            with httpx.Client(timeout=60) as client:
                for prefix in prefixes(messages):
                    raw = json.dumps({"model": "gpt-4o", "messages": prefix}).encode()
                    answer = client.post(f"{v1}/chat/completions", content=raw, headers=headers)
                    assert answer.status_code == 200, answer.text
                    sent.append((raw, answer.headers.get("x-factrail", "")))
            yield Site(v1.removesuffix("/v1"), key, header_key(NAME), sent, [])
        finally:
            stop(proxy)
    finally:
        stop(fake)


def test_a_real_session_on_both_pages(page: Page, real: Site, screenshot: Shoot) -> None:
    assert any(outcome == "compacted" for _, outcome in real.sent), [o for _, o in real.sent]
    sign_in(page, real)
    listing = real.api("/v1/factrail/sessions")
    rows = page.evaluate("Array.from(document.querySelectorAll('tr[data-session]'))"
                         ".map(r => r.dataset.session)")  # fmt: skip
    assert real.session in rows
    by_session = {s["session"]: s for s in listing["sessions"]}
    wrong = disagreements(page.evaluate(FIGURES), lambda s: by_session[s] if s else listing)
    assert not wrong, "\n".join(wrong)
    assert_clean(page, real)
    screenshot(page, "list")

    assert page.goto(f"{real.root}/factrail/sessions/{real.session}") == 200
    report = real.api(f"/v1/factrail/sessions/{real.session}")
    assert report["compactions"] >= 1 and report["client"] == "swe-agent"
    wrong = disagreements(page.evaluate(FIGURES), lambda _: report)
    assert not wrong, "\n".join(wrong)
    shown = page.evaluate(
        """Array.from(document.querySelectorAll('[data-result]')).map(e => ({
            id: e.dataset.result,
            notes: Array.from(e.querySelectorAll('.note')).map(n => n.textContent.trim()),
            omitted: e.querySelectorAll('.omitted').length}))"""
    )
    notes: dict[str, set[str]] = {}
    for h in report["history"]:  # a result reduced again later is shown under each compaction
        for r in h["results"]:
            notes.setdefault(r["id"], set()).add(r["note"])
    assert shown
    wrong = [
        (r["id"], r["notes"], notes.get(r["id"]))
        for r in shown
        if len(r["notes"]) > 1 or not set(r["notes"]) <= notes.get(r["id"], set())
    ]
    assert not wrong
    assert any(r["omitted"] for r in shown), "no original line shown omitted"
    originals = {
        m.get("tool_call_id"): m.get("content") for m in json.loads(real.sent[-1][0])["messages"]
    }
    omitted = page.evaluate("Array.from(document.querySelectorAll('[data-result] .omitted'))"
                            ".slice(0, 50).map(n => n.textContent)")  # fmt: skip
    everything = "\n".join(str(c) for c in originals.values())
    assert all(line.strip() in everything for line in omitted if line.strip())
    assert_clean(page, real)
    screenshot(page, "session")
