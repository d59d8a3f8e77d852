"""The taint fence, scanned on every turn of a session: which records a turn taints, and
whether a session can be proven clean."""

from __future__ import annotations

from dataclasses import replace

from factrail.policy.provenance import Evidence
from factrail.policy.taint import TaintFence, command_refs, merge_taint, taint_write, tool_refs
from factrail.session.keys import proves_start
from factrail.session.turn import Turn
from factrail.stores.state import SessionState

Aliases = list[tuple[str, "SessionState | None", bool]]
"""The other identities the request carries (`keys.alias_keys`): each key with its state and
whether the store answered."""


def fence_turn(
    turn: Turn, evidence: Evidence, aliases: Aliases, fence: TaintFence, now_ms: int
) -> list[tuple[str, SessionState]]:
    """Scan the fence on every request, not only at compaction: a fenced call seen once
    taints the session for good, under its key and every identity the request carries, even
    after the client's compaction drops the call; a request sharing any of them with a tainted
    one is tainted. A session is judged as if tainted whenever it cannot be proven clean: the
    store failed for any of its keys, or the transcript continues one not seen from its start
    (`keys.proves_start`). Sets `turn.taint` (and the session's origin); returns the records to
    write: the aliases', then the session's own last when this turn tainted it."""
    whole = [*turn.head, *turn.work]  # a call the provider summarized still taints
    scanned = tool_refs(whole) if evidence.refs is None else command_refs(whole)
    scan = fence.scan([*(evidence.refs or ()), *scanned])
    origin = "continued" if evidence.continued else "start"
    merged = merge_taint(turn.state.taint, scan)
    for _, alias, _ in aliases:
        merged = merge_taint(alias.taint if alias is not None else None, merged)
    if turn.state.origin is None:
        turn.state.origin = origin
    seen_whole = turn.state.origin == "start" or any(
        alias is not None and alias.origin == "start" and proves_start(turn.session, key)
        for key, alias, _ in aliases
    )
    unproven = None
    if not (turn.answered and all(ok for _, _, ok in aliases)):
        unproven = "the state store did not answer"
    elif evidence.continued and not seen_whole:
        unproven = evidence.continued
    turn.taint = merged if merged.tainted else replace(merged, unproven=unproven)
    writes: list[tuple[str, SessionState]] = []
    for key, alias, ok in aliases:
        record = taint_write(alias.taint if alias is not None else None, merged, now_ms)
        if ok and (alias is None or record is not None):
            proves = proves_start(turn.session, key)
            kept = alias or SessionState(plan={}, origin=origin if proves else None)
            kept.taint = record or kept.taint
            writes.append((key, kept))
    record = taint_write(turn.state.taint, merged, now_ms)
    if record is not None:
        turn.state.taint = record
        writes.append((turn.session, turn.state))
    return writes
