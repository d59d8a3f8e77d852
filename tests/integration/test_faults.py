"""Faults on real processes: an upstream killed mid-stream, and SIGTERM during a stream.

factrail runs as `python -m factrail serve` (the real command) with its stderr in a file, so
each test can say that no traceback was printed; the fake upstream is a uvicorn process of its
own that streams slowly (`x-fake-chunks`, `x-fake-interval`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.processes import ROOT, free_port, start_fake, stop, wait_ready

pytestmark = pytest.mark.integration

GRACE_S = 3.0
"""`FACTRAIL_SHUTDOWN_TIMEOUT_S` in these tests."""
EXIT_MARGIN_S = 12.0
"""How much later than the bound the process may exit (a loaded 2-core machine)."""
STREAM = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


class Factrail:
    """`factrail serve` on a free loopback port, its stderr kept in a file."""

    def __init__(self, upstream: str, home: Path) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.stderr_path = home / "stderr.log"
        env = {
            **os.environ,
            "XDG_DATA_HOME": str(home / "data"),
            "XDG_CACHE_HOME": str(home / "cache"),
            "FACTRAIL_UPSTREAM_URL": upstream,
            "FACTRAIL_SHUTDOWN_TIMEOUT_S": str(GRACE_S),
        }
        with self.stderr_path.open("wb") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "factrail", "serve", "--port", str(port)],
                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
            )  # fmt: skip
        wait_ready(f"{self.url}/healthz", self.proc)

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def outcomes(self) -> dict[str, float]:
        text = httpx.get(f"{self.url}/metrics").text
        return {
            s.labels["outcome"]: s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "factrail_requests_total" and s.value  # the known ones start at 0
        }


@pytest.fixture
def upstream() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    root, fake = start_fake("tests.integration.fake_upstream:app")
    try:
        yield f"{root}/v1", fake
    finally:
        stop(fake)


@pytest.fixture
def factrail(upstream: tuple[str, subprocess.Popen[bytes]], tmp_path: Path) -> Iterator[Factrail]:
    server = Factrail(upstream[0], tmp_path)
    try:
        yield server
    finally:
        stop(server.proc)


def events(lines: Iterator[str]) -> Iterator[bytes]:
    """The `data:` payloads of an event stream, as they come."""
    for line in lines:
        if line.startswith("data: "):
            yield line[6:].encode()


def slow(chunks: int, interval: float) -> dict[str, str]:
    return {"x-fake-chunks": str(chunks), "x-fake-interval": str(interval)}


def test_an_upstream_killed_mid_stream_ends_the_stream_with_an_error_event(
    upstream: tuple[str, subprocess.Popen[bytes]], factrail: Factrail
) -> None:
    fake = upstream[1]
    received: list[bytes] = []
    url = f"{factrail.url}/v1/chat/completions"
    with httpx.stream("POST", url, json=STREAM, headers=slow(200, 0.1), timeout=30) as r:
        assert r.status_code == 200
        for data in events(r.iter_lines()):
            received.append(data)
            if len(received) == 2:
                fake.kill()  # SIGKILL: the connection drops mid-body
    error = orjson.loads(received[-1])["error"]
    assert error["code"] == "upstream_cut"
    assert b"[DONE]" not in received
    assert factrail.outcomes() == {"upstream-cut": 1.0}
    stderr = factrail.stderr
    assert "Traceback" not in stderr and "Exception in ASGI application" not in stderr
    cut = [line for line in stderr.splitlines() if "stream cut short" in line]
    assert len(cut) == 1 and orjson.loads(cut[0])["level"] == "warning"


def stream_then_sigterm(factrail: Factrail, chunks: int, interval: float) -> list[bytes]:
    """Start a slow stream, SIGTERM factrail once its first content arrives, read to the end."""
    received: list[bytes] = []
    url = f"{factrail.url}/v1/chat/completions"
    with httpx.stream("POST", url, json=STREAM, headers=slow(chunks, interval), timeout=60) as r:
        assert r.status_code == 200
        for data in events(r.iter_lines()):
            received.append(data)
            if len(received) == 2:
                factrail.proc.send_signal(signal.SIGTERM)
    return received


def test_sigterm_lets_a_stream_shorter_than_the_bound_finish_and_exits_0(
    factrail: Factrail,
) -> None:
    received = stream_then_sigterm(factrail, chunks=8, interval=0.1)
    assert received[-1] == b"[DONE]"
    assert sum(b'"token ' in data for data in received) == 8
    assert factrail.proc.wait(timeout=GRACE_S + EXIT_MARGIN_S) == 0
    assert "Traceback" not in factrail.stderr


def test_sigterm_cuts_a_stream_longer_than_the_bound_and_exits_0_in_time(
    factrail: Factrail,
) -> None:
    started = time.monotonic()
    received = stream_then_sigterm(factrail, chunks=600, interval=0.1)  # 60 s of stream
    assert factrail.proc.wait(timeout=GRACE_S + EXIT_MARGIN_S) == 0
    assert time.monotonic() - started < GRACE_S + EXIT_MARGIN_S
    assert orjson.loads(received[-1])["error"]["code"] == "shutting_down"
    assert 1 < sum(b'"token ' in data for data in received) < 600
    stderr = factrail.stderr
    assert "Traceback" not in stderr and "Exception in ASGI application" not in stderr


def test_sigterm_during_fifty_streams_lets_them_all_finish_and_exits_0(
    factrail: Factrail,
) -> None:
    """50 streams in flight (each 1.5 s, within the 3 s bound) when SIGTERM comes: every one
    completes with its `[DONE]`, none is cut, and the process exits 0."""
    count, started = 50, threading.Barrier(51)
    results: list[list[bytes]] = [[] for _ in range(count)]

    def one(i: int) -> None:
        url = f"{factrail.url}/v1/chat/completions"
        with httpx.stream("POST", url, json=STREAM, headers=slow(15, 0.1), timeout=60) as r:
            assert r.status_code == 200
            for n, data in enumerate(events(r.iter_lines())):
                results[i].append(data)
                if n == 0:
                    started.wait(timeout=30)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    started.wait(timeout=30)  # every stream has its first event
    factrail.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(timeout=60)
    assert factrail.proc.wait(timeout=GRACE_S + EXIT_MARGIN_S) == 0
    assert all(r and r[-1] == b"[DONE]" for r in results)
    assert all(sum(b'"token ' in d for d in r) == 15 for r in results)
    assert "Traceback" not in factrail.stderr
