"""The token trigger, hysteresis and the gateway's soft line (criteria 35–40; fix §9.3)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import get_args

import pytest

from factrail.policy.options import PolicyOptions
from factrail.policy.trigger import (
    DueReason,
    TriggerDecision,
    TriggerLines,
    TriggerReason,
    due,
    lines,
    rearm_gap,
    should_compact,
    soft_line,
    trigger_tokens,
)

DEFAULTS = PolicyOptions()


@pytest.mark.parametrize(
    ("window", "percent", "absolute", "expected"),
    [
        (1_000_000, 60, 180_000, 180_000),
        (200_000, 60, 180_000, 120_000),
        (None, 60, 180_000, 180_000),
        (1_000_000, 60, 0, 600_000),
        (1_000_000, 0, 0, None),
        (math.nan, 60, 0, None),
        (1_000_000, math.nan, -1, None),
    ],
)
def test_trigger_tokens(
    window: float | None, percent: float, absolute: float, expected: int | None
) -> None:
    """Criterion 35."""
    assert trigger_tokens(window, percent, absolute) == expected


def test_threshold_is_inclusive() -> None:
    """Criterion 36."""

    def at(tokens: int) -> TriggerDecision:
        return should_compact(
            tokens, percent_used=None, window=1_000_000, baseline=None, options=DEFAULTS
        )

    assert at(179_999) == TriggerDecision(False, "below-threshold", 180_000, 180_000)
    assert at(180_000) == TriggerDecision(True, "threshold", 180_000, 180_000)


def test_hysteresis_after_a_compaction() -> None:
    """Criterion 37."""
    held = should_compact(
        200_000, percent_used=None, window=None, baseline=190_000, options=DEFAULTS
    )
    assert held == TriggerDecision(False, "hysteresis", 180_000, 230_000)
    rearmed = should_compact(
        230_000, percent_used=None, window=None, baseline=190_000, options=DEFAULTS
    )
    assert rearmed.run and rearmed.reason == "threshold"
    ignored = should_compact(200_000, percent_used=None, window=None, baseline=-3, options=DEFAULTS)
    assert ignored.run and ignored.need == 180_000


def test_rearm_gap() -> None:
    """Criterion 38."""
    assert rearm_gap(180_000, 40_000) == 40_000
    assert rearm_gap(180_000, 0) == 45_000
    assert rearm_gap(10, 0) == 3
    assert rearm_gap(None, 0) == 0
    assert rearm_gap(180_000, math.nan) == 45_000


def test_without_a_token_figure() -> None:
    """Criterion 39."""

    def decide(
        percent: float | None, baseline: float | None, opts: PolicyOptions
    ) -> TriggerDecision:
        return should_compact(
            None, percent_used=percent, window=None, baseline=baseline, options=opts
        )

    assert decide(70, None, DEFAULTS).reason == "percent"
    assert decide(70, None, DEFAULTS).run
    assert decide(70, 150_000, DEFAULTS) == TriggerDecision(False, "no-usage", 180_000, 190_000)
    assert decide(50, None, DEFAULTS).reason == "no-usage"
    assert decide(None, None, DEFAULTS).reason == "no-usage"
    assert decide(math.nan, None, DEFAULTS).reason == "no-usage"


def test_a_disabled_percent_trigger_never_fires() -> None:
    """Fix §9.3: with compactAtPercent ≤ 0 the no-figure path used to fire at any percent."""
    for percent in (0, -5):
        opts = replace(DEFAULTS, compact_at_percent=percent)
        decision = should_compact(None, percent_used=99, window=None, baseline=None, options=opts)
        assert decision.reason == "no-usage"
        assert not decision.run


def test_no_trigger_at_all() -> None:
    """Criterion 40."""
    opts = replace(DEFAULTS, compact_at_percent=0, compact_at_tokens=0)
    decision = should_compact(
        5_000_000, percent_used=None, window=1_000_000, baseline=None, options=opts
    )
    assert decision == TriggerDecision(False, "below-threshold", None, None)
    assert decision.to_json() == {
        "run": False,
        "reason": "below-threshold",
        "threshold": None,
        "need": None,
    }


def test_soft_line() -> None:
    assert soft_line(180_000) == 150_000
    assert soft_line(120_000) == 100_000
    assert soft_line(7) == 5


def test_lines_before_any_compaction() -> None:
    assert lines(180_000, None, 40_000) == TriggerLines(150_000, 180_000, 150_000)
    assert lines(180_000, 0, 40_000) == TriggerLines(150_000, 180_000, 150_000)


def test_lines_after_a_compaction() -> None:
    # compacted well under the soft line: the soft line itself is what the next one waits for
    assert lines(180_000, 100_000, 40_000).need == 150_000
    # compacted to the soft line: wait for the re-arm gap
    assert lines(180_000, 130_000, 40_000).need == 170_000
    # the gap would carry past the trigger: hysteresis stops at the hard line
    assert lines(180_000, 150_000, 40_000).need == 180_000
    # the compaction could not get under the trigger: wait for the gap, not every turn
    assert lines(180_000, 190_000, 40_000).need == 230_000
    # no configured gap: a quarter of the trigger
    assert lines(180_000, 130_000, 0).need == 175_000


@pytest.mark.parametrize(
    ("tokens", "baseline", "expected"),
    [
        (149_999, None, (False, "below-soft-line")),
        (150_000, None, (True, "soft-line")),
        (179_999, None, (True, "soft-line")),
        (180_000, None, (True, "hard-line")),
        (160_000, 130_000, (False, "hysteresis")),
        (170_000, 130_000, (True, "soft-line")),
        (140_000, 130_000, (False, "below-soft-line")),
        (179_000, 150_000, (False, "hysteresis")),
        (180_000, 150_000, (True, "hard-line")),
        (200_000, 190_000, (False, "hysteresis")),
        (230_000, 190_000, (True, "hard-line")),
    ],
)
def test_due(tokens: int, baseline: int | None, expected: tuple[bool, str]) -> None:
    assert due(tokens, lines(180_000, baseline, 40_000)) == expected


def test_should_compact_against_the_soft_line() -> None:
    def soft(tokens: float, baseline: float | None) -> TriggerDecision:
        return should_compact(
            tokens,
            percent_used=None,
            window=1_000_000,
            baseline=baseline,
            options=DEFAULTS,
            soft=True,
        )

    assert soft(149_999, None) == TriggerDecision(False, "below-threshold", 150_000, 150_000)
    assert soft(150_000, None) == TriggerDecision(True, "threshold", 150_000, 150_000)
    assert soft(160_000, 130_000) == TriggerDecision(False, "hysteresis", 150_000, 170_000)
    assert soft(170_000, 130_000).run


def test_vocabulary() -> None:
    assert set(get_args(TriggerReason)) == {
        "below-threshold",
        "hysteresis",
        "threshold",
        "percent",
        "no-usage",
    }
    assert set(get_args(DueReason)) == {"below-soft-line", "hysteresis", "soft-line", "hard-line"}
