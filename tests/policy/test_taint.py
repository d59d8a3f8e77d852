"""The taint fence (criteria 1–8, 27–34; fixes §9.4 and §9.5)."""

from __future__ import annotations

from typing import Any

import pytest

from factrail.core.model import Message, ToolUse
from factrail.policy.options import PolicyOptions
from factrail.policy.taint import (
    TaintFence,
    TaintScan,
    ToolRef,
    merge_taint,
    scan_taint,
    skill_taints,
    sticky_tainted,
    taint_key,
    taint_write,
    taints,
    tool_refs,
)
from factrail.policy.trigger import baseline_key

EMAIL = "mcp__email-gateway__ask_email"


@pytest.mark.parametrize(
    "tool",
    [
        EMAIL,
        "mcp__email-gateway__fetch_email_raw",
        "mcp__email-gateway__refresh_inbox",
        "mcp__claude_ai_Gmail__authenticate",
    ],
)
def test_default_fence_taints_email_tools(tool: str) -> None:
    """Criterion 1."""
    assert taints(tool)


def test_skill_calls() -> None:
    """Criterion 2, and fix §9.4: a plugin-qualified Skill call taints like a slash command."""
    assert taints("Skill", "email-search")
    assert taints("Skill", "agentbox:email-search")
    assert not taints("Skill", "diagrams-as-code")
    assert not taints("Skill", None)
    assert not taints("Skill", "")
    assert not taints("Other", "email-search")


@pytest.mark.parametrize(
    "tool",
    [
        "Read",
        "Bash",
        "Edit",
        "mcp__claude-flow__memory_search",
        "mcp__codebase-memory__search_graph",
        "email",
        "mcp__other__mcp__email-gateway__x",  # criterion 4: the prefix is anchored
        "",
    ],
)
def test_clean_tools(tool: str) -> None:
    """Criteria 3 and 4."""
    assert not taints(tool)


def test_skill_taints_one_rule() -> None:
    """Criterion 30."""
    assert skill_taints("email-search")
    assert skill_taints("agentbox:email-search")
    assert not skill_taints("email-search-extra")
    assert not skill_taints("")
    assert not skill_taints(None)


def test_scan_counts_and_samples() -> None:
    """Criteria 5 and 6."""
    clean = [ToolRef("Read")] * 100
    assert scan_taint(clean) == TaintScan()
    one = [*clean[:50], ToolRef(EMAIL), *clean[50:]]
    assert scan_taint(one) == TaintScan(True, 1, (EMAIL,), False)
    tail = [*clean, ToolRef("Skill", "email-search")]
    assert scan_taint(tail) == TaintScan(True, 1, ("Skill",), False)
    a, b, c, d = (f"mcp__email-gateway__{n}" for n in "abcd")
    five = scan_taint([ToolRef(t) for t in (a, a, b, c, d)])
    assert five == TaintScan(True, 5, (a, b, c), False)


def test_comma_string_fences_both_prefixes() -> None:
    """Criterion 7."""
    options, _ = PolicyOptions.from_mapping(
        {"taintTools": "mcp__email-gateway__, mcp__codebase-memory__"}
    )
    fence = TaintFence.from_options(options)
    assert fence.taints(EMAIL)
    assert fence.taints("mcp__codebase-memory__search_graph")
    assert fence.taints("mcp__claude_ai_Gmail__x")  # fix §9.5: defaults stay fenced


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({}, ToolRef("")),
        ({"tool": None}, ToolRef("")),
        ({"tool": 7}, ToolRef("7")),
        ({"tool": ["x"], "skill": {}}, ToolRef("")),
        ({"tool": True, "skill": 3}, ToolRef("true", "3")),
        ("not an object", ToolRef("")),
    ],
)
def test_malformed_tool_entries_are_lenient(raw: Any, expected: ToolRef) -> None:
    """Criterion 8."""
    ref = ToolRef.from_json(raw)
    assert ref == expected
    assert not taints(ref.tool, ref.skill)
    assert scan_taint([]) == TaintScan()


def test_an_empty_fence_taints_nothing() -> None:
    fence = TaintFence((), ())
    assert not fence.taints(EMAIL)
    assert not fence.taints("Skill", "email-search")
    assert not TaintFence(("",), ("",)).taints("Read", "x")


def test_tool_refs_from_engine_messages() -> None:
    messages = [
        Message("user", "<command-name>/agentbox:email-search</command-name> find invoices"),
        Message(
            "assistant",
            tool_uses=[
                ToolUse("u1", "Read", {"file_path": "a.py"}),
                ToolUse("u2", "Skill", {"skill": "email-search"}),
                ToolUse("u3", "Skill", {"name": "diagrams-as-code"}),
                ToolUse("u4", "Skill", {"skill": 5}),
            ],
        ),
    ]
    assert tool_refs(messages) == [
        ToolRef("Skill", "agentbox:email-search"),
        ToolRef("Read", None),
        ToolRef("Skill", "email-search"),
        ToolRef("Skill", "diagrams-as-code"),
        ToolRef("Skill", "5"),
    ]
    assert scan_taint(tool_refs(messages)) == TaintScan(True, 2, ("Skill",), False)


def test_sticky_taint_survives_a_clean_scan() -> None:
    """Criterion 27 (the decide half is in test_decide)."""
    record = {"tainted": True, "count": 2, "sample": [EMAIL], "at": 5}
    merged = merge_taint(record, TaintScan())
    assert merged == TaintScan(True, 2, (EMAIL,), True)


def test_fresh_scans_and_non_records() -> None:
    """Criterion 28."""
    fresh = TaintScan(True, 1, (EMAIL,), False)
    assert merge_taint(None, fresh) == fresh
    assert merge_taint(None, TaintScan()) == TaintScan()
    for record in ({"tainted": False}, {"tainted": "true"}, "garbage", [1], 3):
        assert merge_taint(record, TaintScan()) == TaintScan()
        assert not sticky_tainted(record)


def test_record_count_and_sample_coercion() -> None:
    """Criterion 29."""
    assert merge_taint({"tainted": True}, TaintScan()) == TaintScan(
        True, 1, ("(earlier in this session)",), True
    )
    merged = merge_taint(
        {"tainted": True, "count": "4", "sample": ["a", "b", "c", "d"]}, TaintScan()
    )
    assert (merged.count, merged.sample) == (4, ("a", "b", "c"))
    odd = merge_taint({"tainted": True, "count": 0.5, "sample": [7, None]}, TaintScan())
    assert (odd.count, odd.sample) == (1, ("7", "null"))


def test_taint_write_only_on_first_sighting() -> None:
    """Criterion 32."""
    scan = TaintScan(True, 1, (EMAIL,), False)
    record = taint_write(None, scan, 7)
    assert record == {"tainted": True, "count": 1, "sample": [EMAIL], "at": 7}
    assert taint_write(record, scan, 9) is None
    assert taint_write(None, TaintScan(), 7) is None
    assert sticky_tainted(record)
    assert not sticky_tainted(None)


def test_store_keys() -> None:
    """Criterion 33."""
    assert taint_key("s1") == "taint:s1"
    assert baseline_key("s1") == "baseline:s1"


def test_scan_serialises_exactly() -> None:
    """Criterion 34."""
    scan = TaintScan(True, 1, (EMAIL,), False)
    assert scan.to_json() == {"tainted": True, "count": 1, "sample": [EMAIL], "sticky": False}
    assert list(scan.to_json()) == ["tainted", "count", "sample", "sticky"]
