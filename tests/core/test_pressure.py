"""Pressure: aim at a line, evict only past the hard line (engine spec §3.7)."""

from __future__ import annotations

import pytest

from factrail.core.apply import Reduction
from factrail.core.pressure import RAIL_FLOOR, pressure


def test_spec_example() -> None:
    r = pressure(180_000, 190_000, aim=150_000, hard=180_000)
    assert r.target == pytest.approx(1 - 150 / 190)
    assert r.hard == pytest.approx(1 - 180 / 190)


def test_overhead_is_taken_out_first() -> None:
    # 20k of system prompt and tools do not shrink: the transcript must lose more.
    with_overhead = pressure(200_000, 180_000, aim=150_000, hard=180_000)
    without = pressure(180_000, 180_000, aim=150_000, hard=180_000)
    assert with_overhead.target > without.target


@pytest.mark.parametrize(
    "figures", [(None, 1.0, 1.0), (1.0, 1.0, 0.0), (1.0, float("nan"), 1.0), (0.0, 1.0, 1.0)]
)
def test_without_figures(figures: tuple[float | None, float, float]) -> None:
    context, transcript, hard = figures
    assert pressure(context, transcript, aim=1.0, hard=hard) == Reduction(RAIL_FLOOR, RAIL_FLOOR)


def test_clamps() -> None:
    small = pressure(10_000, 10_000, aim=150_000, hard=180_000)
    assert (small.target, small.hard) == (0.05, 0.0)
    huge = pressure(2_000_000, 2_000_000, aim=150_000, hard=180_000)
    assert (huge.target, huge.hard) == (0.9, 0.9)
