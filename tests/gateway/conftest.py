"""Fixtures for the gateway unit tests: a respx upstream, a scripted engine, a test client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import respx
from fastapi.testclient import TestClient

from factrail.settings import Settings
from factrail.stores.outputs import OutputStore
from tests.gateway.support import UPSTREAM, ScriptedCompactor, make_client


@pytest.fixture
def router() -> respx.MockRouter:
    return respx.MockRouter(assert_all_called=False)


@pytest.fixture
def compactor() -> ScriptedCompactor:
    return ScriptedCompactor()


@pytest.fixture
def settings() -> Settings:
    return Settings(upstream_url=UPSTREAM, trigger_tokens=100, max_body_bytes=4096)


@pytest.fixture
def outputs(tmp_path: Path) -> OutputStore:
    return OutputStore(tmp_path / "outputs")


@pytest.fixture
def client(
    settings: Settings,
    router: respx.MockRouter,
    compactor: ScriptedCompactor,
    outputs: OutputStore,
) -> Iterator[TestClient]:
    with make_client(settings, router, compactor, outputs) as c:
        yield c
