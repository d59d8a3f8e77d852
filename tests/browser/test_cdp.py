"""The DevTools client itself, on local files: what it reports, types, clicks and captures."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.browser.cdp import CdpError, Page

FORM = """<!doctype html><html><head><meta charset="utf-8"><title>form</title>
<link rel="icon" href="data:,"></head>
<body style="margin:0"><div style="height:2400px">tall</div>
<form action="answer.html" method="get"><input name="key"><button id="go">Go</button></form>
<script>console.error("said " + "boom"); setTimeout(() => { throw new Error("late"); }, 0);</script>
</body></html>"""
ANSWER = """<!doctype html><html><head><link rel="icon" href="data:,"></head><body>
<p id="query"></p><script>document.getElementById("query").textContent = location.search;</script>
<img src="http://elsewhere.invalid/pixel.png" alt=""></body></html>"""


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_a_form_is_typed_into_and_submitted_with_the_mouse(page: Page, tmp_path: Path) -> None:
    (tmp_path / "form.html").write_text(FORM)
    (tmp_path / "answer.html").write_text(ANSWER)
    page.goto((tmp_path / "form.html").as_uri())
    page.evaluate("new Promise(r => setTimeout(r, 0))")  # the page's own timer has run
    said, thrown = page.problems()
    assert said == "console.error: said boom"
    assert thrown.startswith("exception: Error: late\n    at " + (tmp_path / "form.html").as_uri())

    page.forget()
    page.type("input[name=key]", "sé cret")
    page.click("#go", navigates=True)
    assert page.evaluate("document.getElementById('query').textContent") == "?key=s%C3%A9+cret"
    assert page.requested_urls() == [
        (tmp_path / "answer.html").as_uri() + "?key=s%C3%A9+cret",
        "http://elsewhere.invalid/pixel.png",
    ]
    assert any(p.startswith("load failed: net::ERR_NAME_NOT_RESOLVED") for p in page.problems())


def test_a_screenshot_holds_the_whole_page(
    page: Page, tmp_path: Path, screenshot: Callable[[Page, str], Path]
) -> None:
    (tmp_path / "form.html").write_text(FORM)
    page.goto((tmp_path / "form.html").as_uri())
    shot = screenshot(page, "")
    assert shot.name == "test_a_screenshot_holds_the_whole_page.png"
    width, height = png_size(shot)
    assert width >= 1200
    assert height > 2400


def test_missing_elements_and_script_errors_raise(page: Page) -> None:
    page.goto("about:blank")
    with pytest.raises(CdpError, match="no visible element"):
        page.click("#absent")
    with pytest.raises(CdpError, match="no focusable element"):
        page.type("#absent", "x")
    with pytest.raises(CdpError, match="ReferenceError"):
        page.evaluate("not_defined_anywhere")
