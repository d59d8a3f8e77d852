"""The plugin's options laid over `Settings`: read leniently from JSON, then checked by the
settings' own validators; a value they refuse keeps the binary's setting."""

from __future__ import annotations

from typing import Any

import pytest

from factrail.hook.options import read_options
from factrail.hook.protocol import HookError
from factrail.settings import Settings

BASE = Settings(trigger_tokens=180_000, preserve_recent=4, judge_deadline_ms=15_000)


def settings(config: dict[str, Any]) -> Settings:
    return read_options(config, BASE).settings


def test_numbers_may_be_strings_keywords_any_case_and_counts_are_floored() -> None:
    got = settings(
        {
            "preserveRecentMessages": " 6.7 ",
            "compactionTimeoutMs": 2500.2,
            "egress": " METADATA ",
            "saveFullOutputs": "off",
            "backend": " Rules ",
            "keepThreshold": 7,
        }
    )
    assert got.preserve_recent == 6 and got.judge_deadline_ms == 2501
    assert got.egress == "metadata" and got.save_outputs is False and got.judge == "rules"
    assert got.keep_threshold == 0.99  # clamped into the settings' bounds


@pytest.mark.parametrize(
    ("option", "value", "field"),
    [
        ("preserveRecentMessages", -1, "preserve_recent"),
        ("preserveRecentMessages", "lots", "preserve_recent"),
        ("preserveRecentMessages", 1e30, "preserve_recent"),
        ("compactionTimeoutMs", 0, "judge_deadline_ms"),
        ("backend", "gpt", "judge"),
        ("baseUrl", "not a url", "judge_url"),
        ("saveFullOutputs", 1, "save_outputs"),
        ("egress", 5, "egress"),
    ],
)
def test_a_value_the_settings_refuse_keeps_the_setting(option: str, value: Any, field: str) -> None:
    assert getattr(settings({option: value}), field) == getattr(BASE, field)


def test_fence_lists_add_to_the_settings_and_an_unreadable_one_fails() -> None:
    got = settings({"taintTools": "mcp__vault__, mcp__mail__"})
    assert got.taint_tools == (*BASE.taint_tools, "mcp__vault__", "mcp__mail__")
    with pytest.raises(HookError, match=r"config\.taintTools"):
        settings({"taintTools": "a;b"})
