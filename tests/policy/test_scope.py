"""Compaction scope and which turns may trigger one (criteria 46–47)."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from factrail.policy.scope import Scope, compact_scope, turn_may_trigger


@pytest.mark.parametrize(
    ("trigger", "agent", "expected"),
    [
        ("manual", None, "main"),
        ("auto", None, "main"),
        ("plugin", None, "main"),
        (None, None, "main"),
        ("precompute", None, "precompute"),
        ("manual", "a1", "subagent"),
        ("precompute", "a1", "subagent"),
        ("precompute", "", "precompute"),
    ],
)
def test_compact_scope(trigger: Any, agent: Any, expected: str) -> None:
    assert compact_scope(trigger, agent) == expected


@pytest.mark.parametrize(
    ("agent", "reason", "expected"),
    [
        (None, "answer", True),
        ("", "answer", True),
        ("a1", "answer", False),
        (None, "aborted", False),
        (None, "error", False),
        (None, "refusal", False),
        (None, None, False),
    ],
)
def test_turn_may_trigger(agent: Any, reason: Any, expected: bool) -> None:
    assert turn_may_trigger(agent, reason) is expected


def test_scope_vocabulary() -> None:
    assert set(get_args(Scope)) == {"main", "subagent", "precompute"}
