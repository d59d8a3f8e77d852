"""Real processes on loopback: the fake upstream and factrail itself (uvicorn subprocesses)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from tests.integration.processes import Stack, free_port, start, start_factrail, stop


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("home")
    port = free_port()
    fake = start(
        [sys.executable, "-m", "uvicorn", "tests.integration.fake_upstream:app",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        dict(os.environ),
        f"http://127.0.0.1:{port}/v1/models",
    )  # fmt: skip
    upstream = f"http://127.0.0.1:{port}/v1"
    try:
        url, proxy = start_factrail(upstream, home)
        try:
            yield Stack(upstream, url, home / "data")
        finally:
            stop(proxy)
    finally:
        stop(fake)
