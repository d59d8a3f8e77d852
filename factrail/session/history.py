"""The record a compaction leaves in the session's history (what `factrail inspect` shows)."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from factrail.core.apply import Applied
from factrail.core.marks import mark_lines
from factrail.session.result import TurnResult
from factrail.session.saving import Saved
from factrail.session.turn import Turn
from factrail.stores.schema import COMPACTION_SCHEMA, VERSION

MAX_HISTORY_RESULTS = 200
"""At most this many reduced results are described per compaction in the session's history."""


def compaction_record(
    turn: Turn,
    result: TurnResult,
    applied: Applied,
    saved: Saved,
    after: int,
    texts: tuple[Mapping[str, str], Mapping[str, str], int | None],
    rescued: AbstractSet[str],
    at_ms: int,
) -> dict[str, Any]:
    """What `factrail inspect` shows of a compaction: per reduced result its original
    size, what was kept, the note, where the whole is; and what it cost in cache terms.
    `texts`: the original and sent result texts by id, and the first changed message;
    `rescued`: the recent results cut because the request would not fit the window; `at_ms`:
    when it ran."""
    originals, sent, first = texts
    tools = {u.tool_use_id: u.tool for m in turn.work for u in m.tool_uses}
    reduced = []
    for tool_use_id in [
        *applied.changed,
        *(b for b in applied.briefed if b not in applied.changed),
    ]:
        text = sent.get(tool_use_id, "")
        original = originals.get(tool_use_id, "")
        reduced.append(
            {
                "id": tool_use_id,
                "tool": tools.get(tool_use_id, ""),
                "original_chars": len(original),
                "kept_chars": len(text),
                "note": "\n".join(mark_lines(text)),
                "whole": saved.where.get(tool_use_id),
                "arguments_briefed": tool_use_id in applied.briefed,
                "arguments_whole": saved.inputs.get(tool_use_id),
                "recent": tool_use_id in rescued,
            }
        )
    return {
        VERSION: COMPACTION_SCHEMA,
        "at_ms": at_ms,
        "line": turn.line,
        "decision": result.decision,
        "turns": turn.turns,
        "judge": result.judge,
        "reason": result.reason,
        "trigger": turn.trigger,
        "tokens_before": turn.tokens,
        "tokens_after": after,
        "first_changed_message": None if first is None else first + len(turn.head),
        "invalidated_tokens": result.invalidated_tokens,
        "saved_tokens_per_turn": max(turn.tokens - after, 0),
        "results": reduced[:MAX_HISTORY_RESULTS],
        "results_total": len(reduced),
        "window": turn.window,
    }
