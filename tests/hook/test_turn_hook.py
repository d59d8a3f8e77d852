"""`factrail hook turn`: the trigger with hysteresis, the danger line, the cache-warm nudge."""

from __future__ import annotations

import json
from typing import Any

import pytest

from factrail.hook import run_hook
from factrail.hook.turn import nudge_delay_ms

NOW = 1_800_000_000_000
WINDOW = 1_000_000
CONFIG = {"compactAtTokens": 180_000, "compactAtPercent": 60, "rearmTokens": 40_000}


def turn(tokens: float | None, **fields: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "protocol": 1,
        "config": CONFIG,
        "usage": {"tokens": tokens, "percent": None, "window": WINDOW},
        "baseline": None,
        "rateLimits": 0,
        "hasApiKey": True,
        "event": {"reason": "answer", "agentId": None},
        "tools": [],
        "store": {"taint": None, "enabled": None},
        "now": NOW,
    }
    request.update(fields)
    body = run_hook("turn", json.dumps(request).encode())
    assert body["ok"] is True, body
    return body


def test_below_the_soft_line_waits() -> None:
    body = turn(149_999)
    assert body["compact"] is False and body["reason"] == "below-soft-line"
    assert body["threshold"] == 180_000 and body["need"] == 150_000
    assert body["nudge"] is None


def test_past_the_soft_line_is_due_and_arms_the_nudge() -> None:
    body = turn(150_000)
    assert body["compact"] is True and body["reason"] == "soft-line"
    assert body["nudge"] == {
        "delayMs": 150_000,
        "mode": "compact",
        "tokens": 150_000,
        "ttlSeconds": 300.0,
    }


def test_past_the_trigger_and_the_danger_line() -> None:
    assert turn(180_000)["reason"] == "hard-line"
    # the danger line: halfway from the trigger to the window, never past twice the trigger
    assert turn(359_999)["reason"] == "hard-line"
    assert turn(360_000)["reason"] == "danger-line"


def test_the_threshold_is_the_smaller_of_percent_and_tokens() -> None:
    body = turn(100_000, usage={"tokens": 100_000, "window": 200_000})
    assert body["threshold"] == 120_000 and body["compact"] is True  # 60% of 200k, soft 100k


def test_hysteresis_after_a_compaction() -> None:
    body = turn(160_000, baseline={"tokens": 140_000, "at": NOW - 1})
    assert body["compact"] is False and body["reason"] == "hysteresis"
    assert body["need"] == 180_000
    assert "holding until 180000" in body["log"]
    assert turn(180_000, baseline={"tokens": 140_000, "at": NOW - 1})["compact"] is True


def test_a_pending_baseline_takes_this_turns_size() -> None:
    body = turn(120_000, baseline={"pending": True, "at": NOW - 5})
    assert body["baseline"] == {"tokens": 120_000, "at": NOW}
    assert body["compact"] is False


def test_only_the_main_loops_answers_may_trigger() -> None:
    for event in (
        {"reason": "aborted", "agentId": None},
        {"reason": "error"},
        {"reason": "answer", "agentId": "a1"},
        {},
    ):
        body = turn(500_000, event=event)
        assert body["compact"] is False and body["reason"] == "not-an-answer"


def test_switched_off() -> None:
    assert turn(500_000, store={"enabled": False})["reason"] == "switched-off"
    off = {**CONFIG, "enabledByDefault": "off"}
    assert turn(500_000, config=off)["reason"] == "switched-off"
    assert turn(500_000, config=off, store={"enabled": True})["compact"] is True


def test_no_usage_figure() -> None:
    assert turn(None)["reason"] == "no-usage"
    body = turn(None, usage={"tokens": None, "percent": 20, "window": WINDOW})
    assert body["compact"] is True  # 20% of 1M is 200k


def test_the_nudge() -> None:
    assert turn(150_000, config={**CONFIG, "cacheWarm": "off"})["nudge"] is None
    notify = turn(150_000, config={**CONFIG, "cacheWarm": " Notify "})["nudge"]
    assert notify["mode"] == "notify"
    assert turn(150_000, config={**CONFIG, "cacheWarmFloorTokens": 160_000})["nudge"] is None
    # a subscription session's cache lives an hour; an explicit TTL wins
    assert turn(150_000, rateLimits=2)["nudge"]["delayMs"] == 3_300_000
    assert turn(150_000, config={**CONFIG, "cacheTtlSeconds": "900"})["nudge"]["delayMs"] == 600_000


@pytest.mark.parametrize(
    ("ttl", "margin", "delay"),
    [
        (3600, 300, 3_300_000),
        (300, 300, 150_000),
        (float("nan"), 300, 0),
        (-10, -10, 0),
        (1.0005, 0, 1001),
    ],
)
def test_nudge_delay(ttl: float, margin: float, delay: int) -> None:
    assert nudge_delay_ms(ttl, margin) == delay


def test_taint_is_written_from_the_tools_list() -> None:
    tools = [{"tool": "Read", "skill": None}, {"tool": "Skill", "skill": "email-search"}]
    body = turn(10, tools=tools)
    assert body["taint"] == {"v": 2, "tainted": True, "count": 1, "sample": ["Skill"], "at": NOW}
    sticky = {"tainted": True, "count": 1, "sample": ["Skill"], "at": 1}
    assert turn(10, tools=tools, store={"taint": sticky})["taint"] is None


def test_malformed_options_fall_back() -> None:
    bad = {"compactAtTokens": "lots", "compactAtPercent": "NaN", "rearmTokens": -1, "cacheWarm": 5}
    body = turn(150_000, config=bad)
    assert body["threshold"] == 180_000 and body["compact"] is True
