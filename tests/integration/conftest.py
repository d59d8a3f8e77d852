"""Real processes on loopback: the fake upstream and factrail itself (uvicorn subprocesses)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.processes import Stack, start_factrail, start_fake, stop


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("home")
    root, fake = start_fake("tests.integration.fake_upstream:app")
    upstream = f"{root}/v1"
    try:
        url, proxy = start_factrail(upstream, home)
        try:
            yield Stack(upstream, url, home / "data")
        finally:
            stop(proxy)
    finally:
        stop(fake)


@pytest.fixture(scope="module")
def chat_upstream() -> Iterator[str]:
    """The fake OpenAI upstream (a real process) for a module's tests: its `/v1` base URL."""
    url, proc = start_fake("tests.integration.fake_upstream:app")
    try:
        yield url + "/v1"
    finally:
        stop(proc)
