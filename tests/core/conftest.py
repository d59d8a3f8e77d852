"""Fixtures shared by the engine's tests."""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def native() -> ModuleType:
    """The C kernels (the tests that need them skip when they were not built)."""
    mod: ModuleType = pytest.importorskip("factrail.core._speedups")
    return mod
