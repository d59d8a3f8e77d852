"""Where a provider's prompt cache can be read back from: the frozen zone of a session's
transcript and the first message a compaction changed.

A compaction invalidates the cache from the first message it changed (`first_changed`). What
earlier compactions decided stays as it is short of the hard line, so the zone up to the last
settled result (`frozen_through`) is what the next compaction leaves cached; before the first
compaction, the head before the first call one could change (`stable_head`) is. On Anthropic
requests the gateway marks the zone's end with a `cache_control` breakpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from factrail.core.apply import RERUN_INPUT_CHARS, brief_value
from factrail.core.classify import VERBATIM_TOOLS, is_verbatim
from factrail.core.model import Message

MARK_SHARE = 0.5
"""Past this share of the trigger a turn reports a frozen zone even before the first compaction
(the messages before the first call one could change), so that a cache breakpoint there is
written while the transcript grows and the first compaction reads them from the cache."""


def first_changed(
    messages: Sequence[Message], originals: Mapping[str, str], briefed: Mapping[str, Any]
) -> int | None:
    """The first message whose result text differs from what the turn would have sent without
    this compaction (`originals`: the transcript with earlier reductions re-applied) or whose
    call was briefed now: where the provider's cache stops (a result sent whole because its
    original could not be saved is not a change)."""
    for i, m in enumerate(messages):
        if any(r.text != originals.get(r.tool_use_id, r.text) for r in m.tool_results):
            return i
        if any(u.tool_use_id in briefed for u in m.tool_uses):
            return i
    return None


def frozen_through(messages: Sequence[Message], settled: Sequence[str]) -> int | None:
    """The index of the last message holding a settled call's result, if any."""
    if not settled:
        return None
    ids = set(settled)
    last = None
    for i, m in enumerate(messages):
        if any(r.tool_use_id in ids for r in m.tool_results):
            last = i
    return last


def stable_head(messages: Sequence[Message], keep_tools: Iterable[str] = ()) -> int | None:
    """The last message before the first one a compaction could change: one holding a result
    or arguments long enough to be briefed, of a call not kept verbatim (`keep_tools`: the
    deployment's own verbatim tools). None when that is the first message, or when no result
    could change yet (nothing to be cached against). Reads only as far as the head goes."""
    names = VERBATIM_TOOLS.union(keep_tools)
    verbatim: dict[str, bool] = {}
    for i, m in enumerate(messages):
        briefed = False
        for u in m.tool_uses:
            kept = verbatim.setdefault(u.tool_use_id, is_verbatim(u, names))
            briefed = briefed or (not kept and brief_value(u.input, RERUN_INPUT_CHARS) != u.input)
        results = any(not verbatim.get(r.tool_use_id, False) for r in m.tool_results)
        if results or briefed:
            return i - 1 if i > 0 else None
    return None
