"""Cache-warm timing (criteria 41–45)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from factrail.policy.cache import (
    SESSION_KEY_TTL_MS,
    cache_ttl_seconds,
    expired_session_keys,
    nudge_delay_ms,
    parse_cache_warm,
    should_arm_nudge,
)
from factrail.policy.options import PolicyOptions


def test_ttl_detection() -> None:
    assert cache_ttl_seconds(900, rate_limits=True, has_api_key=True) == 900
    assert cache_ttl_seconds(0, rate_limits=True, has_api_key=True) == 3600
    assert cache_ttl_seconds(0, rate_limits=False, has_api_key=True) == 300
    assert cache_ttl_seconds(-5, rate_limits=False, has_api_key=False) == 3600
    assert cache_ttl_seconds(math.nan, rate_limits=False, has_api_key=True) == 300


@pytest.mark.parametrize(
    ("ttl", "margin", "expected"),
    [
        (3600, 300, 3_300_000),
        (300, 300, 150_000),
        (math.nan, 300, 0),
        (-10, -10, 0),
        (1.0005, 0, 1001),  # half away from zero, not banker's rounding
        (2.0005, 0, 2001),
        (600, math.nan, 600_000),
    ],
)
def test_nudge_delay(ttl: float, margin: float, expected: int) -> None:
    assert nudge_delay_ms(ttl, margin) == expected


def test_nudge_arming() -> None:
    assert not should_arm_nudge(90_000, floor=100_000)
    assert should_arm_nudge(120_000, floor=100_000)
    assert not should_arm_nudge(120_000, floor=100_000, baseline=110_000, gap=40_000)
    assert should_arm_nudge(150_000, floor=100_000, baseline=110_000, gap=40_000)
    assert not should_arm_nudge(None)
    assert not should_arm_nudge(math.nan)
    assert should_arm_nudge(100_000)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "compact"),
        ("OFF", "off"),
        (False, "off"),
        (0, "off"),
        ("none", "off"),
        ("notify", "notify"),
        (" nudge ", "notify"),
        ("toast", "notify"),
        ("whatever", "compact"),
    ],
)
def test_cache_warm_mode(value: Any, expected: str) -> None:
    assert parse_cache_warm(value) == expected


def test_cache_warm_through_options() -> None:
    assert PolicyOptions.from_mapping({})[0].cache_warm == "compact"
    assert PolicyOptions.from_mapping({"cacheWarm": None})[0].cache_warm == "compact"
    assert PolicyOptions.from_mapping({"cacheWarm": "none"})[0].cache_warm == "off"
    options, warnings = PolicyOptions.from_mapping({"cacheWarm": "whatever"})
    assert options.cache_warm == "compact"
    assert len(warnings) == 1


def test_expired_session_keys() -> None:
    assert SESSION_KEY_TTL_MS == 2_592_000_000
    now = 2 * SESSION_KEY_TTL_MS
    entries = {
        "taint:old": {"tainted": True, "at": 0},
        "taint:new": {"tainted": True, "at": now - 1000},
        "baseline:junk": {"tokens": 5},
        "baseline:string-at": {"tokens": 5, "at": str(now - 10)},
        "baseline:not-an-object": 7,
        "enabled": {"at": 0},
        "last": "x",
    }
    assert expired_session_keys(entries, now) == [
        "taint:old",
        "baseline:junk",
        "baseline:not-an-object",
    ]
    assert expired_session_keys(entries, now, ttl_ms=now) == [
        "baseline:junk",
        "baseline:not-an-object",
    ]
