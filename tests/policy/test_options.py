"""Policy options and the switch (criteria 9–11, 48–53, fixes §9.5, §9.6, §9.17)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, get_args

import pytest

from factrail.policy.cache import CacheWarm
from factrail.policy.options import (
    DEFAULT_TAINT_SKILLS,
    DEFAULT_TAINT_TOOLS,
    Backend,
    Egress,
    Fallback,
    PolicyOptions,
    compaction_timeout_ms,
    parse_backend,
    parse_egress,
    parse_fallback,
)
from factrail.policy.switch import SwitchCommand, parse_switch, resolve_enabled

DEFAULTS: dict[str, Any] = {
    "enabled_by_default": None,
    "taint_tools": ("mcp__email-gateway__", "mcp__claude_ai_Gmail__"),
    "taint_skills": ("email-search",),
    "taint_replace_defaults": False,
    "backend_local": False,
    "backend": "systemone",
    "base_url": None,
    "model": None,
    "api_key": None,
    "egress": "full",
    "fallback": "rules",
    "keep_threshold": 0.5,
    "preserve_recent_messages": 6,
    "max_state_tokens": 25000,
    "max_request_tokens": 30000,
    "truncate_head_chars": 200,
    "compact_at_percent": 60,
    "compact_at_tokens": 180000,
    "rearm_tokens": 40000,
    "cache_warm": "compact",
    "cache_warm_floor_tokens": 100000,
    "cache_ttl_seconds": 0,
    "cache_ttl_margin_seconds": 300,
    "compaction_timeout_ms": 15000,
    "save_full_outputs": True,
    "record_decisions": True,
    "min_reduction_ratio": None,
}


def read(raw: dict[str, Any]) -> PolicyOptions:
    options, _ = PolicyOptions.from_mapping(raw)
    return options


def test_every_default_matches_the_table() -> None:
    """Criterion 49."""
    options, warnings = PolicyOptions.from_mapping({})
    assert {f.name: getattr(options, f.name) for f in fields(options)} == DEFAULTS
    assert options == PolicyOptions()
    assert warnings == []


def test_every_option_is_read_from_its_camel_case_name() -> None:
    """Criterion 50 (taint lists union with the defaults: fix §9.5)."""
    raw = {
        "enabledByDefault": "off",
        "taintTools": ["mcp__x__"],
        "taintSkills": "a, b",
        "taintReplaceDefaults": False,
        "backendLocal": True,
        "backend": "tev",
        "baseUrl": "http://127.0.0.1:9000/v1",
        "model": "tev1",
        "apiKey": "k-123",
        "egress": "metadata",
        "fallback": "summary",
        "keepThreshold": 0.7,
        "preserveRecentMessages": 4,
        "maxStateTokens": 6000,
        "maxRequestTokens": 8000,
        "truncateHeadChars": 300,
        "compactAtPercent": 70,
        "compactAtTokens": 150000,
        "rearmTokens": 0,
        "cacheWarm": "notify",
        "cacheWarmFloorTokens": 90000,
        "cacheTtlSeconds": 900,
        "cacheTtlMarginSeconds": 120,
        "compactionTimeoutMs": 2500,
        "saveFullOutputs": False,
        "recordDecisions": "false",
        "minReductionRatio": 0.2,
    }
    options, warnings = PolicyOptions.from_mapping(raw)
    assert warnings == []
    assert {f.name: getattr(options, f.name) for f in fields(options)} == {
        "enabled_by_default": "off",
        "taint_tools": (*DEFAULT_TAINT_TOOLS, "mcp__x__"),
        "taint_skills": (*DEFAULT_TAINT_SKILLS, "a", "b"),
        "taint_replace_defaults": False,
        "backend_local": True,
        "backend": "tev",
        "base_url": "http://127.0.0.1:9000/v1",
        "model": "tev1",
        "api_key": "k-123",
        "egress": "metadata",
        "fallback": "summary",
        "keep_threshold": 0.7,
        "preserve_recent_messages": 4,
        "max_state_tokens": 6000,
        "max_request_tokens": 8000,
        "truncate_head_chars": 300,
        "compact_at_percent": 70,
        "compact_at_tokens": 150000,
        "rearm_tokens": 0,
        "cache_warm": "notify",
        "cache_warm_floor_tokens": 90000,
        "cache_ttl_seconds": 900,
        "cache_ttl_margin_seconds": 120,
        "compaction_timeout_ms": 2500,
        "save_full_outputs": False,
        "record_decisions": False,
        "min_reduction_ratio": 0.2,
    }


def test_snake_case_names_are_read_too() -> None:
    options = read({"keep_threshold": 0.6, "compact_at_tokens": "90000", "api_key": "k"})
    assert (options.keep_threshold, options.compact_at_tokens, options.api_key) == (
        0.6,
        90000,
        "k",
    )


def test_shell_projected_strings() -> None:
    """Criterion 51."""
    options = read(
        {
            "compactAtTokens": " 120000 ",
            "preserveRecentMessages": "4",
            "minReductionRatio": "0.2",
            "saveFullOutputs": "OFF",
            "recordDecisions": "yes",
        }
    )
    assert options.compact_at_tokens == 120000
    assert options.preserve_recent_messages == 4
    assert options.min_reduction_ratio == 0.2
    assert options.save_full_outputs is False
    assert options.record_decisions is True


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("compactAtTokens", "lots", "compact_at_tokens"),
        ("keepThreshold", "NaN", "keep_threshold"),
        ("preserveRecentMessages", -1, "preserve_recent_messages"),
        ("maxStateTokens", {}, "max_state_tokens"),
        ("compactAtPercent", "inf", "compact_at_percent"),
        ("saveFullOutputs", "perhaps", "save_full_outputs"),
        ("model", "", "model"),
        ("apiKey", 12345678, "api_key"),
        ("backend", "gpt", "backend"),
        ("taintSkills", "  ", "taint_skills"),
        ("taintTools", 42, "taint_tools"),
        ("fallback", "nonsense", "fallback"),
        ("compactionTimeoutMs", True, "compaction_timeout_ms"),
        ("backendLocal", "yes", "backend_local"),
    ],
)
def test_malformed_values_fall_back_with_one_warning(key: str, value: Any, field: str) -> None:
    """Criterion 52."""
    options, warnings = PolicyOptions.from_mapping({key: value})
    assert getattr(options, field) == DEFAULTS[field]
    assert len(warnings) == 1
    assert warnings[0].startswith(key + ":")


def test_warnings_never_echo_the_api_key() -> None:
    _, warnings = PolicyOptions.from_mapping({"apiKey": 98765432109})
    assert "98765432109" not in warnings[0]


def test_null_means_absent() -> None:
    assert PolicyOptions.from_mapping({"model": None, "egress": None}) == (PolicyOptions(), [])


def test_taint_lists_union_with_the_defaults_unless_replacing() -> None:
    """Fix §9.5: listing only the e-mail gateway no longer unfences Gmail; criterion 8's
    "explicit [] is no fence" now needs `taintReplaceDefaults`."""
    only_gateway = read({"taintTools": ["mcp__email-gateway__"]})
    assert only_gateway.taint_tools == DEFAULT_TAINT_TOOLS
    assert read({"taintTools": []}).taint_tools == DEFAULT_TAINT_TOOLS
    replaced = read({"taintTools": ["mcp__x__"], "taintReplaceDefaults": "true"})
    assert replaced.taint_tools == ("mcp__x__",)
    assert replaced.taint_skills == DEFAULT_TAINT_SKILLS  # not configured: the default stands
    none = read({"taintTools": [], "taintSkills": [], "taintReplaceDefaults": True})
    assert (none.taint_tools, none.taint_skills) == ((), ())


@pytest.mark.parametrize(
    ("value", "expected"),
    [("metdata", "metadata"), (True, "metadata"), (0, "metadata"), ("", "full"), ("FULL", "full")],
)
def test_egress_fails_toward_sending_less(value: Any, expected: str) -> None:
    """Fix §9.6: a non-string egress is metadata (with a warning), not full."""
    assert parse_egress(value) == expected
    options, warnings = PolicyOptions.from_mapping({"egress": value})
    assert options.egress == expected
    assert len(warnings) == (
        0 if isinstance(value, str) and value.strip().lower() in ("", "full") else 1
    )


@pytest.mark.parametrize(("value", "clamped"), [(0, 0.01), (-2, 0.01), (1, 0.99), (7.5, 0.99)])
def test_keep_threshold_is_clamped_inside_the_unit_interval(value: float, clamped: float) -> None:
    """Fix §9.17: ≤ 0 would keep everything, ≥ 1 would drop everything."""
    options, warnings = PolicyOptions.from_mapping({"keepThreshold": value})
    assert options.keep_threshold == clamped
    assert len(warnings) == 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, 15000),
        (0, 15000),
        (-5, 15000),
        ("soon", 15000),
        ("inf", 15000),
        (True, 15000),
        (2500, 2500),
        (2500.2, 2501),
        ("9000", 9000),
    ],
)
def test_deadline(value: Any, expected: int) -> None:
    """Criterion 48."""
    assert compaction_timeout_ms(value) == expected
    assert read({"compactionTimeoutMs": value}).compaction_timeout_ms == expected


def test_keywords_are_trimmed_and_case_insensitive() -> None:
    """Criterion 53."""
    assert parse_backend(" TEV ") == "tev"
    assert parse_backend("SystemOne") == "systemone"
    assert parse_backend("RULES") == "rules"
    assert parse_egress("FULL") == "full"
    assert parse_egress("") == "full"
    assert parse_egress("metdata") == "metadata"
    assert parse_fallback("SUMMARY") == "summary"
    assert parse_fallback("nonsense") == "rules"
    assert set(get_args(Backend)) == {"systemone", "tev", "rules"}
    assert set(get_args(Egress)) == {"full", "metadata"}
    assert set(get_args(Fallback)) == {"rules", "summary"}
    assert set(get_args(CacheWarm)) == {"compact", "notify", "off"}
    assert set(get_args(SwitchCommand)) == {"on", "off", "status", "help"}


@pytest.mark.parametrize(
    ("store", "option", "expected"),
    [
        (None, None, True),
        (None, False, False),
        (None, "off", False),
        (True, False, True),
        (False, True, False),
        ("off", None, True),
        (None, "No", False),
        (None, "yes", True),
        (None, 0, True),
        (None, " off", True),  # untrimmed
    ],
)
def test_resolve_enabled(store: Any, option: Any, expected: bool) -> None:
    """Criterion 9."""
    assert resolve_enabled(store, option) is expected


def test_enabled_by_default_passes_through_the_options() -> None:
    """Criterion 10."""
    assert resolve_enabled(None, read({"enabledByDefault": "false"}).enabled_by_default) is False
    assert resolve_enabled(None, read({}).enabled_by_default) is True


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("on", "on"),
        (" OFF ", "off"),
        ("enable", "on"),
        ("disable", "off"),
        ("1", "on"),
        ("0", "off"),
        ("true", "on"),
        ("", "status"),
        ("status", "status"),
        ("maybe", "help"),
    ],
)
def test_switch_arguments(argument: str, expected: str) -> None:
    """Criterion 11."""
    assert parse_switch(argument) == expected
