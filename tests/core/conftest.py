"""Fixtures shared by the engine's tests."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def native() -> ModuleType:
    """The C kernels. The tests that need them skip when they were not built, unless
    `FACTRAIL_REQUIRE_NATIVE=1` (the interpreter matrix), where they fail."""
    if os.environ.get("FACTRAIL_REQUIRE_NATIVE") == "1":
        return importlib.import_module("factrail.core._speedups")
    mod: ModuleType = pytest.importorskip("factrail.core._speedups")
    return mod
