"""Engine options for tests, built the way the product builds them: from `Settings`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from factrail.core.plan import CompactOptions
from factrail.session import EngineOptions
from factrail.settings import OUTPUTS_ROUTE, Settings


def engine_options(*, outputs_route: str | None = OUTPUTS_ROUTE, **settings: Any) -> EngineOptions:
    """`Settings(**settings).engine_options(...)`: every other knob at its default, but the
    minimum cut, 0 unless given (the step's tests reduce results of a few hundred chars; the
    minimum has tests of its own)."""
    settings.setdefault("min_cut_chars", 0)
    return Settings(**settings).engine_options(outputs_route=outputs_route)


def plan_options(**overrides: Any) -> CompactOptions:
    """The default plan options with `overrides` laid over them."""
    return replace(Settings().plan_options(), **overrides)
