"""The trigger, its soft and hard lines, re-arm hysteresis and `due`."""

from __future__ import annotations

import math
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factrail.policy.trigger import (
    DueReason,
    Trigger,
    TriggerLines,
    by_prefix,
    due,
    rearm_gap,
    soft_line,
)

T = 180_000
FIXED = Trigger(tokens=T, percent=60, rearm=40_000)
"""An absolute trigger of 180k with a configured 40k re-arm gap and no windows."""


# -- the trigger of a model ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("windows", "percent", "tokens", "expected"),
    [
        ({"claude": 1_000_000}, 60, 180_000, 180_000),  # the absolute trigger is lower
        ({"claude": 200_000}, 60, 180_000, 120_000),  # 60 % of the window is lower
        ({}, 60, 180_000, 180_000),  # no known window: the absolute trigger alone
        ({"claude": 1_000_000}, 60, 0, 600_000),  # no absolute trigger: the window share alone
        ({"claude": 1_000_000}, 0, 180_000, 180_000),  # percent ≤ 0 ignores the window
        ({"claude": 1_000_000}, -5, 180_000, 180_000),
        ({"claude": 1_000_000}, 0, 0, 0),  # neither: never
        ({}, 60, -1, 0),
        ({"claude": 333_333}, 50, 0, 166_666),  # the window share is truncated
    ],
)
def test_for_model(windows: dict[str, int], percent: float, tokens: int, expected: int) -> None:
    """T = min(int(window × percent / 100), absolute trigger), of those that exist."""
    trigger = Trigger(tokens=tokens, percent=percent, rearm=0, windows=windows)
    assert trigger.for_model("claude-sonnet-4") == expected


def test_for_model_uses_the_family_trigger_in_place_of_tokens() -> None:
    """A `by_model` prefix replaces `tokens` (not min'd with it); a zero entry falls back."""
    trigger = Trigger(
        tokens=180_000,
        percent=60,
        rearm=0,
        windows={"claude": 1_000_000},
        by_model={"claude-opus": 300_000, "claude-haiku": 50_000, "claude-sonnet": 0},
    )
    assert trigger.for_model("claude-opus-4") == 300_000
    assert trigger.for_model("claude-haiku-3") == 50_000
    assert trigger.for_model("claude-sonnet-4") == 180_000
    assert trigger.for_model("gpt-4o") == 180_000  # no window, no family: tokens


def test_for_model_longest_prefix_case_and_provider() -> None:
    """The longest prefix wins, matching ignores case and drops a `provider/` prefix."""
    trigger = Trigger(
        tokens=0,
        percent=50,
        rearm=0,
        windows={"gpt": 100_000, "GPT-4.1": 1_000_000, "gpt-4": 8_000},
    )
    assert trigger.for_model("gpt-4.1-mini") == 500_000
    assert trigger.for_model("openai/GPT-4.1") == 500_000
    assert trigger.for_model("openrouter/openai/gpt-4o") == 4_000
    assert trigger.for_model("gpt-3.5") == 50_000
    assert trigger.for_model("xgpt-4.1") == 0  # a prefix is anchored


def test_by_prefix() -> None:
    """The value of the longest matching prefix, else None."""
    table = {"a": 1, "ab": 2, "abc": 3}
    assert by_prefix("abcd", table) == 3
    assert by_prefix("ABx", table) == 2
    assert by_prefix("p/q/a", table) == 1
    assert by_prefix("b", table) is None
    assert by_prefix("a/b", table) is None  # only the part after the last `/` is matched
    assert by_prefix("abc", {}) is None
    dated = {"claude-fable-5": "5", "claude-fable-5-2": "5.2"}
    assert by_prefix("claude-fable-5-20260609", dated) == "5"  # a prefix never splits a number
    assert by_prefix("claude-fable-5-2", dated) == "5.2"
    assert by_prefix("claude-fable-5-2-20261110", dated) == "5.2"
    assert by_prefix("qwen2.5-coder", {"qwen": 1}) == 1  # a name's number after letters


def test_smallest() -> None:
    """The least positive trigger over windows (by percent), by_model and tokens."""
    base = Trigger(tokens=180_000, percent=60, rearm=0)
    assert base.smallest() == 180_000
    windowed = Trigger(180_000, 60, 0, windows={"a": 1_000_000, "b": 200_000, "c": 0})
    assert windowed.smallest() == 120_000
    family = Trigger(180_000, 60, 0, windows={"a": 1_000_000}, by_model={"x": 90_000, "y": 0})
    assert family.smallest() == 90_000
    assert Trigger(0, 60, 0, windows={"a": 1_000_000}).smallest() == 600_000
    assert Trigger(0, 0, 0, windows={"a": 1_000_000}).smallest() == 0
    assert Trigger(-5, 60, 0).smallest() == 0


@given(
    tokens=st.integers(-10, 10**7),
    percent=st.floats(-10, 100, allow_nan=False),
    windows=st.dictionaries(st.sampled_from(["a", "ab", "b", "c"]), st.integers(0, 10**7)),
    by_model=st.dictionaries(st.sampled_from(["a", "abc", "b"]), st.integers(0, 10**7)),
    model=st.sampled_from(["a", "ab", "abc", "abcd", "b", "c", "z", "p/ab"]),
)
def test_smallest_bounds_every_model(
    tokens: int, percent: float, windows: dict[str, int], by_model: dict[str, int], model: str
) -> None:
    """No model's positive trigger is below `smallest()`, so the fast path is safe."""
    trigger = Trigger(tokens, percent, 0, windows=windows, by_model=by_model)
    t = trigger.for_model(model)
    assert t >= 0
    if t > 0:
        assert trigger.smallest() <= t


# -- the lines ----------------------------------------------------------------------------------


def test_soft_line() -> None:
    """Five sixths of the trigger."""
    assert soft_line(180_000) == 150_000
    assert soft_line(120_000) == 100_000
    assert soft_line(6) == 5
    assert soft_line(7) == pytest.approx(35 / 6)


def test_rearm_gap() -> None:
    """The configured gap when positive, else an eighth of the trigger rounded up."""
    assert rearm_gap(180_000, 40_000) == 40_000
    assert rearm_gap(180_000, 0) == 22_500
    assert rearm_gap(180_000, -1) == 22_500
    assert rearm_gap(10, 0) == 2
    assert rearm_gap(0, 0) == 0
    assert rearm_gap(0, 5) == 5
    assert Trigger(T, 60, 0).gap(T) == 22_500
    assert FIXED.gap(T) == 40_000


@pytest.mark.parametrize("baseline", [None, 0, -3, math.nan, math.inf, -math.inf])
def test_lines_without_a_baseline(baseline: float | None) -> None:
    """No (usable) baseline: the next compaction waits for the soft line only."""
    assert FIXED.lines(T, baseline) == TriggerLines(150_000, T, 150_000)


def test_lines_soft_is_floored() -> None:
    """The soft line is floor(5/6 T)."""
    assert FIXED.lines(7, None) == TriggerLines(5, 7, 5)
    assert FIXED.lines(0, None) == TriggerLines(0, 0, 0)


@pytest.mark.parametrize(
    ("baseline", "rearm", "need"),
    [
        (100_000, 40_000, 150_000),  # compacted well under the soft line: the soft line
        (130_000, 40_000, 170_000),  # compacted to near the soft line: wait for the gap
        (150_000, 40_000, T),  # the gap would carry past T: held at the hard line
        (179_999, 40_000, T),
        (T, 40_000, 220_000),  # could not get under T: wait for the gap, not every turn
        (190_000, 40_000, 230_000),
        (130_000, 0, 152_500),  # no configured gap: an eighth of T
        (130_000.2, 40_000, 170_001),  # the need is rounded up
    ],
)
def test_lines_after_a_compaction(baseline: float, rearm: int, need: int) -> None:
    """need = max(soft, min(baseline + gap, T)), or baseline + gap once baseline ≥ T."""
    assert Trigger(T, 60, rearm).lines(T, baseline) == TriggerLines(150_000, T, need)


@given(
    trigger=st.integers(0, 10**7),
    rearm=st.integers(-10, 10**6),
    baseline=st.none() | st.floats(-1e7, 1e8) | st.sampled_from([math.nan, math.inf, -math.inf]),
)
def test_lines_invariants(trigger: int, rearm: int, baseline: float | None) -> None:
    """soft ≤ need, soft ≤ hard = T; need ≤ T unless the baseline itself reached T."""
    lines = Trigger(trigger, 60, rearm).lines(trigger, baseline)
    assert lines.hard == trigger
    assert lines.soft == trigger * 5 // 6 <= trigger
    assert lines.need >= lines.soft
    if baseline is None or not math.isfinite(baseline) or baseline <= 0:
        assert lines.need == lines.soft
    elif baseline < trigger:
        assert lines.need <= trigger
    else:
        assert lines.need >= baseline


# -- due ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "baseline", "expected"),
    [
        (149_999, None, (False, "below-soft-line")),
        (150_000, None, (True, "soft-line")),
        (179_999, None, (True, "soft-line")),
        (180_000, None, (True, "hard-line")),
        (140_000, 130_000, (False, "below-soft-line")),
        (160_000, 130_000, (False, "hysteresis")),
        (170_000, 130_000, (True, "soft-line")),
        (179_000, 150_000, (False, "hysteresis")),
        (180_000, 150_000, (True, "hard-line")),
        (200_000, 190_000, (False, "hysteresis")),
        (229_999, 190_000, (False, "hysteresis")),
        (230_000, 190_000, (True, "hard-line")),
    ],
)
def test_due(tokens: int, baseline: int | None, expected: tuple[bool, str]) -> None:
    """Below the soft line, held by hysteresis, or due at the soft or the hard line."""
    assert due(tokens, FIXED.lines(T, baseline)) == expected


def test_due_vocabulary() -> None:
    """The four reasons `due` can give."""
    assert set(get_args(DueReason)) == {"below-soft-line", "hysteresis", "soft-line", "hard-line"}


lines_st = st.builds(
    lambda t, r, b: Trigger(t, 60, r).lines(t, b),
    st.integers(0, 10**6),
    st.integers(0, 10**5),
    st.none() | st.integers(-10, 2 * 10**6),
)


@given(lines=lines_st, a=st.integers(0, 3 * 10**6), b=st.integers(0, 3 * 10**6))
def test_due_is_monotone_in_tokens(lines: TriggerLines, a: int, b: int) -> None:
    """More tokens never makes a due transcript not due."""
    lo, hi = sorted((a, b))
    if due(lo, lines)[0]:
        assert due(hi, lines)[0]


@given(lines=lines_st, tokens=st.integers(0, 3 * 10**6))
def test_due_agrees_with_the_lines(lines: TriggerLines, tokens: int) -> None:
    """Due exactly from `need` on; the reason names the line that was crossed."""
    run, reason = due(tokens, lines)
    assert run == (tokens >= lines.need)
    if run:
        assert reason == ("hard-line" if tokens >= lines.hard else "soft-line")
    else:
        assert reason == ("below-soft-line" if tokens < lines.soft else "hysteresis")


@pytest.mark.parametrize(
    ("trigger", "window", "danger", "fit"),
    [
        (120_000, 200_000, 160_000, 180_000),  # halfway to the window
        (190_000, 200_000, 180_000, 180_000),  # halfway would leave no room: the fit line
        (120_000, None, 144_000, None),  # window unknown: a fifth past the trigger
        (180_000, 1_000_000, 360_000, 900_000),  # a window many times the trigger: twice it
        (16_000, 200_000, 32_000, 180_000),
    ],
)
def test_the_danger_line_never_passes_where_the_request_stops_fitting(
    trigger: int, window: int | None, danger: int, fit: int | None
) -> None:
    lines = Trigger(tokens=trigger, percent=0, rearm=0)
    assert lines.danger("m", trigger, window) == danger
    assert lines.fit("m", window) == fit
