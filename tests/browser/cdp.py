"""A small client of the Chrome DevTools protocol, enough to test pages in headless Chromium.

One Chromium process per `Browser`, one websocket to it; each `Page` is a tab in a browser
context of its own (its own cookies), attached with a flat session. Commands wait for their reply,
events are kept per page: console errors and warnings, uncaught exceptions, error log entries,
every URL the page requested and every load that failed. Each wait is bounded and raises
`CdpError` saying what did not arrive.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

TIMEOUT_S = 30.0
"""The longest a command, a page load or Chromium's start may take."""

FLAGS = (
    "--headless=new",
    "--disable-gpu",
    "--remote-debugging-port=0",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-sync",
    "--disable-extensions",
    "--metrics-recording-only",
    "--mute-audio",
    "--window-size=1280,900",
    # Names other than loopback resolve nowhere: nothing a page asks for can leave the machine.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
)


CONSOLE_PROBLEMS = ("error", "warning", "assert")
"""The console calls a page is faulted for."""


class CdpError(RuntimeError):
    """A command answered with an error, or something awaited did not arrive in time."""


def find_chromium() -> str | None:
    """The path of Debian's `chromium` (or a `chromium-browser`) on PATH; None without one."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Event:
    method: str
    params: dict[str, Any]


@dataclass
class Page:
    """A tab in a browser context of its own, attached over the browser's websocket."""

    browser: Browser = field(repr=False)
    target_id: str
    session_id: str
    context_id: str
    events: list[Event] = field(default_factory=list, repr=False)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Run a command in this page and return its result."""
        return self.browser.send(method, params, session_id=self.session_id)

    # -- what the page did ----------------------------------------------------------------------

    def requested_urls(self) -> list[str]:
        """Every URL the page requested, redirects included, in order."""
        return [
            e.params["request"]["url"]
            for e in self.events
            if e.method == "Network.requestWillBeSent"
        ]

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, error log entries and failed loads,
        each as one line."""
        found: list[str] = []
        for e in self.events:
            p = e.params
            if e.method == "Runtime.consoleAPICalled" and p["type"] in CONSOLE_PROBLEMS:
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
                found.append(f"console.{p['type']}: {text}")
            elif e.method == "Runtime.exceptionThrown":
                details = p["exceptionDetails"]
                exception = details.get("exception", {})
                found.append(f"exception: {exception.get('description') or details.get('text')}")
            elif e.method == "Log.entryAdded" and p["entry"]["level"] == "error":
                entry = p["entry"]
                found.append(f"log ({entry['source']}): {entry['text']} {entry.get('url', '')}")
            elif e.method == "Network.loadingFailed" and not p.get("canceled"):
                found.append(f"load failed: {p['errorText']} ({p.get('type', '?')})")
        return found

    def forget(self) -> None:
        """Drop the events seen so far (so the next page's are judged alone)."""
        self.events.clear()

    # -- driving it ----------------------------------------------------------------------------

    def goto(self, url: str) -> int | None:
        """Open `url` and wait for its load event: the HTTP status of the document shown (after
        any redirects), None when none was seen."""
        mark = len(self.events)
        result = self.send("Page.navigate", url=url)
        if result.get("errorText"):
            raise CdpError(f"navigating to {url}: {result['errorText']}")
        return self._loaded(mark, f"the load of {url}")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CdpError(f"evaluating {expression!r}: {text}")
        return result["result"].get("value")

    def type(self, selector: str, text: str) -> None:
        """Focus the element `selector` and type `text` into it, as a keyboard would insert it."""
        found = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return false; e.focus(); return document.activeElement === e; })()"
        )
        if not found:
            raise CdpError(f"no focusable element {selector!r} to type into")
        self.send("Input.insertText", text=text)

    def click(self, selector: str, navigates: bool = False) -> int | None:
        """Click the middle of the element `selector` with the mouse; with `navigates`, wait for
        the document it leads to and return that document's HTTP status."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return null; e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2, r.width * r.height]; })()"
        )
        if not box or box[2] <= 0:
            raise CdpError(f"no visible element {selector!r} to click")
        x, y = box[0], box[1]
        mark = len(self.events)
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)
        return self._loaded(mark, f"the page {selector!r} leads to") if navigates else None

    def screenshot(self, path: Path) -> Path:
        """Save a PNG of the whole page (beyond the viewport) at `path`."""
        metrics = self.send("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        width, height = max(int(size["width"]), 1), max(int(size["height"]), 1)
        shot = self.send(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        """Close the tab and its browser context (its cookies go with it)."""
        self.browser.send("Target.closeTarget", {"targetId": self.target_id})
        self.browser.send("Target.disposeBrowserContext", {"browserContextId": self.context_id})
        self.browser.pages.pop(self.session_id, None)

    def _loaded(self, mark: int, what: str) -> int | None:
        """Wait for the main frame to navigate after event `mark` and for that document's load
        event; the status of the last main document response seen since `mark`."""

        def navigated() -> int | None:
            for n in range(mark, len(self.events)):
                e = self.events[n]
                if e.method == "Page.frameNavigated" and e.params["frame"]["id"] == self.target_id:
                    return n
            return None

        def done() -> bool:
            start = navigated()
            return start is not None and any(
                e.method == "Page.loadEventFired" for e in self.events[start:]
            )

        self.browser.wait(done, what)
        statuses = [
            e.params["response"]["status"]
            for e in self.events[mark:]
            if e.method == "Network.responseReceived"
            and e.params.get("type") == "Document"
            and e.params.get("frameId") == self.target_id
        ]
        return int(statuses[-1]) if statuses else None


class Browser:
    """A headless Chromium process with a fresh profile, driven over its browser websocket."""

    def __init__(self, binary: str, timeout_s: float = TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.profile = Path(tempfile.mkdtemp(prefix="factrail-chromium-"))
        self.pages: dict[str, Page] = {}
        self._ids = itertools.count(1)
        self._replies: dict[int, dict[str, Any]] = {}
        flags = [*FLAGS, f"--user-data-dir={self.profile}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            flags.append("--no-sandbox")  # Chromium refuses to start its sandbox as root
        self.process = subprocess.Popen(
            [binary, *flags, "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._closing = contextlib.ExitStack()
        try:
            self.ws: ClientConnection = self._closing.enter_context(
                connect(self._endpoint(), max_size=None, open_timeout=timeout_s, ping_interval=None)
            )
        except BaseException:
            self._stop_process(polite=False)
            raise

    def _endpoint(self) -> str:
        """The browser websocket's URL, from the DevToolsActivePort file Chromium writes."""
        active = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise CdpError(f"chromium exited with {self.process.returncode} on start")
            lines = active.read_text().split("\n") if active.exists() else []
            if len(lines) >= 2 and lines[0].isdigit() and lines[1].startswith("/devtools/"):
                return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            time.sleep(0.05)
        raise CdpError(f"chromium wrote no DevToolsActivePort within {self.timeout_s} s")

    def new_page(self) -> Page:
        """A blank tab in a new browser context (no cookies), its events recorded."""
        context = self.send("Target.createBrowserContext", {"disposeOnDetach": True})
        context_id = context["browserContextId"]
        target = self.send(
            "Target.createTarget", {"url": "about:blank", "browserContextId": context_id}
        )
        target_id = target["targetId"]
        attached = self.send("Target.attachToTarget", {"targetId": target_id, "flatten": True})
        page = Page(self, target_id, attached["sessionId"], context_id)
        self.pages[page.session_id] = page
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        return page

    def send(
        self, method: str, params: dict[str, Any] | None = None, session_id: str | None = None
    ) -> dict[str, Any]:
        """Send a command (to a page when `session_id` names one) and wait for its reply."""
        number = next(self._ids)
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        self.ws.send(json.dumps(message))
        self.wait(lambda: number in self._replies, f"the reply to {method}")
        reply = self._replies.pop(number)
        if "error" in reply:
            raise CdpError(f"{method}: {reply['error'].get('message')} ({reply['error']})")
        result: dict[str, Any] = reply.get("result", {})
        return result

    def wait(self, done: Callable[[], bool], what: str) -> None:
        """Read messages until `done()` holds; CdpError after the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError(f"waited {self.timeout_s} s for {what}")
            try:
                raw = self.ws.recv(timeout=left)
            except TimeoutError:
                continue
            except ConnectionClosed as closed:
                raise CdpError(f"chromium closed the DevTools connection: {closed}") from None
            self._dispatch(json.loads(raw))

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "id" in message:
            self._replies[message["id"]] = message
            return
        page = self.pages.get(message.get("sessionId", ""))
        if page is not None:
            page.events.append(Event(message["method"], message.get("params", {})))

    def close(self) -> None:
        """Close Chromium (politely, then by signal) and remove its profile."""
        try:
            self.ws.send(json.dumps({"id": next(self._ids), "method": "Browser.close"}))
            self._closing.close()
        except (ConnectionClosed, OSError):
            pass
        finally:
            self._stop_process()

    def _stop_process(self, polite: bool = True) -> None:
        """Wait for Chromium to exit (after Browser.close), else end it; then end any helper
        process left in its group, and remove the profile."""
        try:
            self.process.wait(timeout=5 if polite else 0.01)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)  # the group Popen started for it
        shutil.rmtree(self.profile, ignore_errors=True)
