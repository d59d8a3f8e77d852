"""Pressure: 5/6 target, hard line at the trigger, the gate (engine spec §3.7)."""

from __future__ import annotations

import pytest

from factrail.core.apply import Reduction
from factrail.core.pressure import RAIL_FLOOR, pressure, reduction_for


def test_spec_example() -> None:
    p = pressure(180_000, 180_000, 190_000)
    assert p.target == pytest.approx(1 - 150 / 190)
    assert p.hard == pytest.approx(1 - 180 / 190)
    assert p.gate == p.hard


def test_overhead_is_taken_out_first() -> None:
    # 20k of system prompt and tools do not shrink: the transcript must lose more.
    with_overhead = pressure(200_000, 180_000, 180_000)
    without = pressure(180_000, 180_000, 180_000)
    assert with_overhead.target > without.target


@pytest.mark.parametrize("figures", [(None, 1.0, 1.0), (1.0, 0, 1.0), (1.0, 1.0, float("nan"))])
def test_without_figures(figures: tuple[float | None, float | None, float | None]) -> None:
    p = pressure(*figures)
    assert (p.target, p.hard, p.gate) == (RAIL_FLOOR, RAIL_FLOOR, 0.25)


def test_clamps() -> None:
    small = pressure(10_000, 180_000, 10_000)
    assert (small.target, small.hard) == (0.05, 0.0)
    huge = pressure(2_000_000, 180_000, 2_000_000)
    assert (huge.target, huge.hard) == (0.9, 0.9)
    assert reduction_for(None, None, None) == Reduction(0.3, 0.3)
