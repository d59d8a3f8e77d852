"""Start and stop the real processes of the integration tests (uvicorn on loopback)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
TRIGGER_TOKENS = 6000


def wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(200):
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=0.5).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


def start(args: list[str], env: dict[str, str], ready: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_ready(ready, proc)
    except RuntimeError:
        proc.kill()
        raise
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()


def start_fake(app: str) -> tuple[str, subprocess.Popen[bytes]]:
    """Serve the fake server `app` (`module:attribute`) on a free port: its root URL and process."""
    port = free_port()
    args = [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "warning"]  # fmt: skip
    root = f"http://127.0.0.1:{port}"
    return root, start(args, dict(os.environ), f"{root}/_records")


@dataclass
class Stack:
    upstream: str
    """Base URL of the fake upstream (ends in /v1)."""
    factrail: str
    """Base URL of factrail (ends in /v1)."""
    data_home: Path

    def records(self) -> list[dict[str, str]]:
        records: list[dict[str, str]] = httpx.get(self.upstream[:-3] + "/_records").json()
        return records

    def reset(self) -> None:
        httpx.post(self.upstream[:-3] + "/_reset")


Process = subprocess.Popen[bytes]


def factrail_env(upstream: str, home: Path, **env_extra: str) -> dict[str, str]:
    """The environment of a test's factrail: its own XDG folders, the upstream, a small trigger."""
    return {
        **os.environ,
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "FACTRAIL_UPSTREAM_URL": upstream,
        "FACTRAIL_TRIGGER_TOKENS": str(TRIGGER_TOKENS),
        "FACTRAIL_REARM_TOKENS": "1000",
        "FACTRAIL_READ_TIMEOUT_S": "2",
        "FACTRAIL_PRICE_PROFILE": "none",  # compact at the soft line unless a test asks
        **env_extra,
    }


def serve_cli(env: dict[str, str], *args: str) -> tuple[str, Process]:
    """`python -m factrail serve` (the real command) on a free port: its root URL and process."""
    port = free_port()
    command = [sys.executable, "-m", "factrail", "serve", "--port", str(port), *args]
    proc = start(command, env, f"http://127.0.0.1:{port}/healthz")
    return f"http://127.0.0.1:{port}", proc


def start_factrail(upstream: str, home: Path, **env_extra: str) -> tuple[str, Process]:
    port = free_port()
    env = factrail_env(upstream, home, **env_extra)
    code = f"from factrail.gateway.factory import serve; serve('127.0.0.1', {port})"
    proc = start([sys.executable, "-c", code], env, f"http://127.0.0.1:{port}/healthz")
    return f"http://127.0.0.1:{port}/v1", proc


def metric_total(text: str, name: str, **labels: str) -> float:
    """The sum of the samples named `name` (with these labels) in a `/metrics` text (0: none)."""
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )
