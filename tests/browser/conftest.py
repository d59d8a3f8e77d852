"""One headless Chromium for the browser tests (Debian's `chromium`; `make chromium` installs it
where apt-get can run). Without it they skip, unless FACTRAIL_REQUIRE_CHROMIUM=1 (`.ci/run`)
makes them fail. Screenshots are kept under `test-artifacts/screenshots/` at the repository root.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.browser.cdp import Browser, Page, find_chromium

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Headless Chromium, started once for the run (or this xdist worker)."""
    binary = find_chromium()
    if binary is None:
        if os.environ.get("FACTRAIL_REQUIRE_CHROMIUM") == "1":
            pytest.fail(
                "FACTRAIL_REQUIRE_CHROMIUM=1 but no chromium or chromium-browser is installed:"
                " `make chromium` (apt-get install chromium)"
            )
        pytest.skip("chromium not installed (`make chromium`, or apt-get install chromium)")
    started = Browser(binary)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A tab in a fresh browser context: no cookies from another test."""
    opened = browser.new_page()
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def screenshot(request: pytest.FixtureRequest) -> Callable[[Page, str], Path]:
    """Save a full-page PNG as `test-artifacts/screenshots/<test name>[-<label>].png`."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-")

    def take(page: Page, label: str = "") -> Path:
        return page.screenshot(SCREENSHOTS / f"{name}{'-' + label if label else ''}.png")

    return take
