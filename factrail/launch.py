"""`factrail run -- CLIENT ARGS…`: run a coding agent through factrail, and say what it did.

A gateway is started for the run (`factrail serve` on a free loopback port, in a session of its
own so a Ctrl-C at the terminal reaches only the client), or the one `FACTRAIL_URL` names is
used. The client gets `OPENAI_BASE_URL` and `ANTHROPIC_BASE_URL` pointing at it (and, for
Codex, the `-c` overrides of a custom Responses provider), runs with the terminal attached,
and has the signals `factrail run` receives passed on to it. Its exit status is returned
(128+N when a signal ended it, as a shell says). At the end one line on stderr sums up the
run from the gateway's `/metrics`: requests, compactions, billed against sending everything,
tokens saved.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from factrail.settings import Settings
from factrail.stores.paths import cache_root, ensure_private_dir

READY_TIMEOUT_S = 20.0
"""How long the gateway may take to answer `/readyz`."""
STOP_GRACE_S = 5.0
"""How long past its own shutdown timeout the gateway may take to exit before it is killed."""
LOG_TAIL_LINES = 15
"""How much of the gateway's log a failure shows."""
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT,
             signal.SIGUSR1, signal.SIGUSR2)  # fmt: skip
"""Signals passed on to the client."""
FROM_TERMINAL = (signal.SIGINT, signal.SIGQUIT)
"""Signals a terminal sends its whole foreground group: the client has its own already."""
CODEX_PROVIDER = "factrail"
CODEX_KEY_ENV = "OPENAI_API_KEY"


@dataclass(frozen=True)
class Counters:
    """The gateway's counters that a run's summary reads (each summed over its labels)."""

    requests: float = 0.0
    compactions: float = 0.0
    tokens_saved: float = 0.0
    billed: float = 0.0
    kept_out: float = 0.0
    rewritten: float = 0.0
    projected_compactions: float = 0.0
    """Shadow mode (`FACTRAIL_MODE=shadow`): compactions decided and not sent."""
    projected_kept_out: float = 0.0
    projected_rewritten: float = 0.0

    def __sub__(self, other: Counters) -> Counters:
        return Counters(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))


_SAMPLES = {
    "factrail_requests_total": "requests",
    "factrail_compactions_total": "compactions",
    "factrail_tokens_saved_total": "tokens_saved",
    "factrail_billed_input_tokens_total": "billed",
    "factrail_projected_compactions_total": "projected_compactions",
}
_PARTS = {
    "factrail_spared_input_tokens_total": "",
    "factrail_projected_spared_input_tokens_total": "projected_",
}
"""The split counters (`part`: `kept_out`, `rewritten`), by the prefix of their fields."""


def parse_counters(text: str) -> Counters:
    """The summary's counters in a Prometheus text exposition."""
    values = dict.fromkeys((f.name for f in fields(Counters)), 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = _SAMPLES.get(sample.name)
            prefix = _PARTS.get(sample.name)
            part = sample.labels.get("part", "")
            if prefix is not None and part in ("kept_out", "rewritten"):
                name = prefix + part
            if name is not None:
                values[name] += sample.value
    return Counters(**values)


def summary_line(c: Counters) -> str:
    """`factrail: 14 requests, 2 compactions, billed 0.78 of sent whole, 41,230 tokens saved`
    (`n/a` when no turn was billed): the whole is what was billed plus what the compactions
    kept out, less what they re-wrote."""
    whole = c.billed + c.kept_out - c.rewritten
    ratio = f"{c.billed / whole:.2f}" if c.billed > 0 and whole > 0 else "n/a"
    line = (
        f"factrail: {_count(c.requests, 'request')}, {_count(c.compactions, 'compaction')},"
        f" billed {ratio} of sent whole, {round(c.tokens_saved):,} tokens saved"
    )
    if not c.projected_compactions:
        return line
    projected = c.billed - c.projected_kept_out + c.projected_rewritten
    shadow = f"{projected / c.billed:.2f}" if c.billed > 0 else "n/a"
    return (
        f"{line}; shadow mode: {_count(c.projected_compactions, 'compaction')} not sent,"
        f" would have billed {shadow} of what was sent"
    )


def _count(value: float, noun: str) -> str:
    n = round(value)
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def client_argv(argv: Sequence[str], root: str) -> list[str]:
    """The client's command line: Codex (`codex`) gets, right after the program, the overrides
    that make factrail (`root`) its model provider over the Responses API, with its key from
    `OPENAI_API_KEY`; any other client is run as given."""
    if not is_codex(argv):
        return list(argv)
    provider = f"model_providers.{CODEX_PROVIDER}"
    values = {
        "model_provider": CODEX_PROVIDER,
        f"{provider}.name": CODEX_PROVIDER,
        f"{provider}.base_url": f"{root}/v1",
        f"{provider}.wire_api": "responses",
        f"{provider}.env_key": CODEX_KEY_ENV,
    }
    overrides = [
        arg for key, value in values.items() for arg in ("-c", f"{key}={json.dumps(value)}")
    ]
    return [argv[0], *overrides, *argv[1:]]


def is_codex(argv: Sequence[str]) -> bool:
    """Whether the client is the Codex CLI (its program is named `codex`)."""
    return bool(argv) and Path(argv[0]).name == "codex"


def client_env(environ: Mapping[str, str], root: str) -> dict[str, str]:
    """The client's environment: `environ` with both base URLs (and `FACTRAIL_URL`) at `root`."""
    return {
        **environ,
        "OPENAI_BASE_URL": f"{root}/v1",
        "ANTHROPIC_BASE_URL": root,
        "FACTRAIL_URL": root,
    }


def gateway_root(url: str) -> str:
    """A gateway's root URL from `FACTRAIL_URL` (which may end in `/` or `/v1`)."""
    return url.rstrip("/").removesuffix("/v1").rstrip("/")


def free_port() -> int:
    """A loopback port nothing holds now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def read_counters(root: str) -> Counters | None:
    """The summary's counters from the gateway's `/metrics` (None: it did not answer)."""
    try:
        response = httpx.get(f"{root}/metrics", timeout=5.0)
        response.raise_for_status()
        return parse_counters(response.text)
    except (httpx.HTTPError, ValueError):
        return None


class _Signals:
    """While a run lasts: the signals it receives, remembered until a client runs, then passed
    on to it (SIGINT and SIGQUIT only when the terminal did not already send them to it)."""

    def __init__(self) -> None:
        self.client: subprocess.Popen[bytes] | None = None
        self.received: int | None = None
        self._saved: dict[signal.Signals, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.client is None:
            self.received = self.received or int(signum)
            return
        if signum in FROM_TERMINAL and _terminal_foreground():
            return
        with contextlib.suppress(ProcessLookupError):
            self.client.send_signal(signum)

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Signals]:
        for sig in FORWARDED:
            self._saved[sig] = signal.signal(sig, self._handle)
        try:
            yield self
        finally:
            for sig, previous in self._saved.items():
                signal.signal(sig, previous)


def _terminal_foreground() -> bool:
    """Whether this process's group is its terminal's foreground group (a key the user typed
    then signalled the client too)."""
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
    return False


class _Gateway:
    """A `factrail serve` started for the run, its output in a log file."""

    def __init__(self, port: int, stop_timeout_s: float) -> None:
        self.root = f"http://127.0.0.1:{port}"
        self.log = _log_file(port)
        self.stop_timeout_s = stop_timeout_s
        with self.log.open("ab") as out:
            command = [sys.executable, "-m", "factrail", "serve", "--host", "127.0.0.1"]
            self.proc = subprocess.Popen(
                [*command, "--port", str(port)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                preexec_fn=_stop_with(os.getpid()) if sys.platform == "linux" else None,
            )

    def stop(self) -> int | None:
        """SIGTERM, a bounded wait, then SIGKILL: its exit status (None: it had to be killed)."""
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait()
                return None
        return self.proc.returncode

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def tail(self) -> str:
        """The last lines of its log."""
        try:
            lines = self.log.read_text("utf-8", "replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-LOG_TAIL_LINES:])


PR_SET_PDEATHSIG = 1


def _stop_with(parent: int) -> Callable[[], None]:
    """In the gateway before it runs (Linux): ask for SIGTERM when `factrail run` dies, even
    by SIGKILL, so no gateway outlives its run."""

    def arm() -> None:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # it died before the request took hold
            os._exit(1)

    return arm


def _log_file(port: int) -> Path:
    """A new private file for the gateway's log: under `<cache root>/run`, else the temp folder."""
    folder: Path | None = None
    cache = cache_root()
    if cache is not None:
        with contextlib.suppress(OSError):
            folder = ensure_private_dir(cache / "run")
    fd, name = tempfile.mkstemp(prefix=f"gateway-{port}-", suffix=".log", dir=folder)
    os.close(fd)
    return Path(name)


def wait_ready(
    root: str, proc: subprocess.Popen[bytes] | None, signals: _Signals, timeout_s: float
) -> bool:
    """Whether `root/readyz` answers 200 within `timeout_s`; False as soon as `proc` exits or a
    signal arrives."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=1.0) as http:
        while time.monotonic() < deadline and signals.received is None:
            if proc is not None and proc.poll() is not None:
                return False
            with contextlib.suppress(httpx.HTTPError):
                if http.get(f"{root}/readyz").status_code == 200:
                    return True
            time.sleep(0.1)
    return False


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(argv: Sequence[str], port: int | None, settings: Settings) -> int:
    """Run the client `argv` through factrail (a gateway on `port`, a free one, or the one
    `settings.url` names) and return its exit status: 127 when it is not found, 1 when no
    gateway could be had, 2 when the command line is wrong."""
    argv = list(argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        _say("factrail: name the client to run: factrail run -- claude (or codex, or any command)")
        return 2
    if port is not None and settings.url:
        _say("factrail: --port starts a gateway but FACTRAIL_URL names one: give only one")
        return 2
    environ = dict(os.environ)
    if shutil.which(argv[0], path=environ.get("PATH", os.defpath)) is None:
        _say(f"factrail: {argv[0]}: command not found")
        return 127
    with _Signals().installed() as signals:
        if settings.url:
            return _run_with(argv, environ, gateway_root(settings.url), None, signals)
        gateway = _Gateway(port or free_port(), settings.shutdown_timeout_s + STOP_GRACE_S)
        return _run_with(argv, environ, gateway.root, gateway, signals)


def _run_with(
    argv: list[str],
    environ: dict[str, str],
    root: str,
    gateway: _Gateway | None,
    signals: _Signals,
) -> int:
    try:
        proc = gateway.proc if gateway else None
        if not wait_ready(root, proc, signals, READY_TIMEOUT_S):
            if signals.received is not None:
                if gateway is not None:
                    gateway.stop()
                    gateway.log.unlink(missing_ok=True)
                return 128 + signals.received
            _not_ready(root, gateway)
            return 1
        before = Counters() if gateway else read_counters(root)
        if before is None:
            _say(f"factrail: {root}/metrics does not answer (FACTRAIL_URL)")
            return 1
        status = _client(argv, environ, root, signals)
        after = read_counters(root)
        if gateway is None:
            _say(
                summary_line(after - before)
                if after
                else f"factrail: {root}/metrics did not answer"
            )
            return status
        crashed = gateway.proc.poll()
        stopped = gateway.stop()
        trouble = _trouble(crashed, stopped, after is not None)
        if trouble:
            line = f"{summary_line(after)}; " if after else "factrail: "
            _say(f"{line}the gateway {trouble}; its log: {gateway.log}")
        else:
            _say(summary_line(after or Counters()))
            gateway.log.unlink(missing_ok=True)
        return status
    finally:
        if gateway is not None and gateway.proc.poll() is None:
            gateway.stop()


def _trouble(crashed: int | None, stopped: int | None, answered: bool) -> str:
    """What went wrong with a run's gateway, in words (empty: nothing)."""
    if crashed is not None:
        return f"exited with status {crashed} during the run"
    if not answered:
        return "did not answer /metrics"
    if stopped is None:
        return "did not stop in time and was killed"
    return f"exited with status {stopped} when stopped" if stopped else ""


def _not_ready(root: str, gateway: _Gateway | None) -> None:
    if gateway is None:
        _say(
            f"factrail: no gateway is ready at {root} (FACTRAIL_URL): start one with `factrail"
            " serve`, or unset FACTRAIL_URL to have `factrail run` start its own"
        )
        return
    code = gateway.proc.poll()
    how = f"exited with status {code}" if code is not None else "was not ready in time"
    tail = gateway.tail()
    _say(f"factrail: the gateway {how}; its log: {gateway.log}" + (f"\n{tail}" if tail else ""))


def _client(argv: list[str], environ: dict[str, str], root: str, signals: _Signals) -> int:
    """Run the client to its end with the terminal attached: its exit status, shell-style."""
    env = client_env(environ, root)
    if is_codex(argv) and not env.get(CODEX_KEY_ENV):
        _say(f"factrail: {CODEX_KEY_ENV} is not set: Codex sends it as its key through factrail")
    if signals.received is not None:
        return 128 + signals.received
    try:
        child = subprocess.Popen(client_argv(argv, root), env=env)
    except FileNotFoundError:
        _say(f"factrail: {argv[0]}: command not found")
        return 127
    except PermissionError:
        _say(f"factrail: {argv[0]}: permission denied")
        return 126
    signals.client = child
    if signals.received is not None:  # arrived while the client was being started
        child.send_signal(signals.received)
    code = child.wait()
    return 128 - code if code < 0 else code
