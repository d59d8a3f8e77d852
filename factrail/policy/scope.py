"""Which compactions factrail handles, and which turns may start one."""

from __future__ import annotations

from typing import Any, Literal

Scope = Literal["main", "subagent", "precompute"]


def compact_scope(trigger: Any, agent_id: Any) -> Scope:
    """A subagent's compaction (any non-empty agent id), a precompute, or the main loop's."""
    if _is_agent(agent_id):
        return "subagent"
    return "precompute" if trigger == "precompute" else "main"


def turn_may_trigger(agent_id: Any, reason: Any) -> bool:
    """Only a main-loop turn that ended with an answer may start a compaction."""
    return not _is_agent(agent_id) and reason == "answer"


def _is_agent(agent_id: Any) -> bool:
    return agent_id is not None and agent_id != ""
