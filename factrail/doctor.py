"""`factrail doctor`: is this machine ready to run factrail? One line per check.

Checks the settings, both upstreams (a 2-second request to each base URL: any HTTP answer means
reachable), the state store (opened as the gateway opens it, one probe fetch), the outputs
folder (there or creatable, private, writable), the native kernels, and the Claude Code plugin.
Each line starts `✓` or `✗` (a `✗` says how to fix it); the plugin, which the proxy does not
need, is `–` when it is not installed. Exit status 0 when nothing is `✗`, else 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from factrail.settings import Settings, SettingsError

UPSTREAM_TIMEOUT_S = 2.0
PROBE_KEY = "factrail-doctor-probe"
"""The session key the state store is asked for (never written)."""
PLUGIN_ID = "factrail"
HOOKS_ENV = "CLAUDE_CODE_ENABLE_FUNCTION_HOOKS"
CHECKOUT_PLUGIN = Path(__file__).resolve().parents[1] / "plugin"
"""The plugin folder of a checkout (absent from an installed wheel)."""
BUILD_FIX = (
    "build them: a C compiler (apt-get install build-essential python3-dev, or xcode-select"
    " --install), then `pip install -e .` in the checkout (or reinstall factrail); without them"
    " the engine gives the same output, slower"
)


@dataclass(frozen=True)
class Check:
    """One line of the report: `ok` True (✓), False (✗) or None (– optional, not set up)."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        mark = {True: "✓", False: "✗", None: "–"}[self.ok]
        label = "fix" if self.ok is False else "to set it up"
        fix = f" — {label}: {self.fix}" if self.fix and self.ok is not True else ""
        return [f"{mark} {self.name}: {self.detail}{fix}", *(f"    {n}" for n in self.notes)]


def doctor(environ: Mapping[str, str] | None = None) -> int:
    """Run every check, print one line each on stdout: 0 when none failed, else 1."""
    env = os.environ if environ is None else environ
    checks = run_checks(env)
    for check in checks:
        for line in check.lines():
            print(line)
    return 1 if any(c.ok is False for c in checks) else 0


def run_checks(env: Mapping[str, str]) -> list[Check]:
    """Every check, in the order printed."""
    try:
        settings = Settings()
    except SettingsError as err:
        checks = [
            Check(
                "settings",
                False,
                f"{len(err.problems)} problem(s)",
                "correct each variable named below (`factrail settings --check` lists them)",
                tuple(err.problems),
            )
        ]
        unchecked = "not checked: the settings do not load"
        for name in ("OpenAI upstream", "Anthropic upstream", "state store", "outputs folder"):
            checks.append(Check(name, False, unchecked, "fix the settings first"))
    else:
        checks = [
            Check("settings", True, settings.source()),
            *asyncio.run(upstreams(settings)),
            state_store(settings),
            outputs_folder(settings),
        ]
    return [*checks, kernels(), claude_plugin(env)]


def shown_url(url: str) -> str:
    """`url` without a password in it."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


async def upstreams(settings: Settings) -> list[Check]:
    """Both upstreams, asked at once."""
    async with httpx.AsyncClient(timeout=UPSTREAM_TIMEOUT_S, trust_env=False) as client:
        return list(
            await asyncio.gather(
                _upstream(
                    client, "OpenAI upstream", settings.upstream_url, "FACTRAIL_UPSTREAM_URL"
                ),
                _upstream(
                    client,
                    "Anthropic upstream",
                    settings.anthropic_upstream_url,
                    "FACTRAIL_ANTHROPIC_UPSTREAM_URL",
                ),
            )
        )


async def _upstream(client: httpx.AsyncClient, name: str, url: str, variable: str) -> Check:
    shown = shown_url(url)
    started = time.monotonic()
    try:
        response = await client.get(url)
    except httpx.TimeoutException:
        detail = f"{shown} did not answer within {UPSTREAM_TIMEOUT_S:.0f} s"
    except httpx.HTTPError as err:
        detail = f"{shown} cannot be reached ({type(err).__name__}: {err})"
    else:
        elapsed = time.monotonic() - started
        return Check(name, True, f"{shown} answered HTTP {response.status_code} ({elapsed:.2f} s)")
    return Check(name, False, detail, f"check {variable}, and that this machine reaches it")


class _Captured(logging.Handler):
    """The messages the stores log while a check runs."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _store_log() -> Iterator[_Captured]:
    logger = logging.getLogger("factrail.stores")
    captured = _Captured()
    propagate = logger.propagate
    logger.addHandler(captured)
    logger.propagate = False
    try:
        yield captured
    finally:
        logger.removeHandler(captured)
        logger.propagate = propagate


def state_store(settings: Settings) -> Check:
    """Open the state store as the gateway does and fetch a probe key from it."""
    from factrail import runtime
    from factrail.stores import state_url

    url = state_url(settings.state_url)
    shown = shown_url(url)
    fix = (
        "set FACTRAIL_STATE_URL to a writable sqlite:///abs/path.db or a reachable Redis"
        " (without a store the gateway still serves, but compacts by the rules alone)"
    )
    with _store_log() as log:
        try:
            store = runtime.state_store(settings)
            try:
                _, answered = store.fetch(PROBE_KEY)
            finally:
                store.close()
        except Exception as err:  # any failure to open is what this check reports
            return Check("state store", False, f"{shown} cannot be opened: {err}", fix)
    if not answered:
        why = f": {log.messages[-1]}" if log.messages else ""
        return Check("state store", False, f"{shown} did not answer{why}", fix)
    kept = " (one process: nothing is kept across restarts)" if url.startswith("memory:") else ""
    return Check("state store", True, f"{shown} answers{kept}")


def outputs_folder(settings: Settings) -> Check:
    """The saved outputs' folder exists (or is made, 0700), is private and can be written."""
    from factrail.stores.paths import ensure_private_dir

    store = settings.output_store()
    if store is None:
        return Check(
            "outputs folder",
            False,
            "no cache folder to put it in",
            "set XDG_CACHE_HOME or HOME, or FACTRAIL_OUTPUTS_DIR",
        )
    root = Path(store.root)
    made = ""
    try:
        if not root.exists():
            ensure_private_dir(root)
            made = ", made now"
        if not root.is_dir():
            raise NotADirectoryError(f"{root} is not a folder")
        mode = stat.S_IMODE(root.stat().st_mode)
        if mode != 0o700:
            return Check(
                "outputs folder",
                False,
                f"{root} is mode {mode:04o}: saved outputs would be readable by others",
                f"chmod 700 {root}",
            )
        fd, probe = tempfile.mkstemp(prefix=".doctor-", dir=root)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        return Check(
            "outputs folder",
            False,
            f"{root} cannot be used: {err}",
            "set FACTRAIL_OUTPUTS_DIR to a folder this user can create and write",
        )
    return Check("outputs folder", True, f"{root} (0700, writable{made})")


def kernels() -> Check:
    """Whether the engine's C kernels loaded (switched off on purpose counts as fine)."""
    from factrail.core import kernels as native

    described = native.describe()
    if native.loaded().on():
        return Check("native kernels", True, described)
    if "FACTRAIL_PURE_PYTHON=1" in described:
        return Check("native kernels", True, f"{described}: switched off on purpose")
    return Check("native kernels", False, described, BUILD_FIX)


def claude_plugin(env: Mapping[str, str]) -> Check:
    """Whether Claude Code has factrail's plugin installed and could run it: an install in its
    `installed_plugins.json` (a `--plugin-dir` session leaves no trace), function hooks switched
    on, and a `factrail` command for the hooks to run."""
    name = "Claude Code plugin"
    source = CHECKOUT_PLUGIN if (CHECKOUT_PLUGIN / ".claude-plugin").is_dir() else None
    where = f"plugin folder {source}" if source else "no plugin folder (not a checkout)"
    installs = _installs(_claude_dir(env))
    if not installs:
        load = (
            f"claude --plugin-dir {source}" if source else "claude --plugin-dir <checkout>/plugin"
        )
        return Check(
            name,
            None,
            f"not installed for Claude Code ({where}); optional: the proxy needs no plugin",
            f"{load} for one session, or `claude plugin install factrail` from a marketplace"
            f" listing it; and export {HOOKS_ENV}=1",
        )
    problems = []
    if env.get(HOOKS_ENV) != "1":
        problems.append(f"export {HOOKS_ENV}=1 (function hooks are off, so the plugin never runs)")
    if shutil.which("factrail", path=env.get("PATH", os.defpath)) is None:
        problems.append("put `factrail` on PATH, or set the plugin's `binary` option to its path")
    detail = f"installed as {', '.join(installs)}; {where}"
    return Check(name, not problems, detail, "; ".join(problems))


def _claude_dir(env: Mapping[str, str]) -> Path | None:
    configured = env.get("CLAUDE_CONFIG_DIR", "")
    if configured:
        return Path(configured)
    home = env.get("HOME", "")
    return Path(home) / ".claude" if home else None


def _installs(claude: Path | None) -> list[str]:
    """The ids of factrail's installs in Claude Code's `plugins/installed_plugins.json`."""
    if claude is None:
        return []
    try:
        data: Any = json.loads((claude / "plugins" / "installed_plugins.json").read_text("utf-8"))
    except (OSError, ValueError):
        return []
    plugins = data.get("plugins", data) if isinstance(data, dict) else {}
    if not isinstance(plugins, dict):
        return []
    return sorted(k for k in plugins if isinstance(k, str) and k.split("@")[0] == PLUGIN_ID)
