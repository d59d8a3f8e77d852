"""The taint fence, scanned on every turn of a session: which records a turn taints, and
whether a session can be proven clean; and on every body the gateway forwards unread."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from factrail.core.formats.base import Document
from factrail.policy.provenance import Evidence, body_calls
from factrail.policy.taint import (
    TaintFence,
    TaintScan,
    command_refs,
    merge_taint,
    taint_write,
    tool_refs,
)
from factrail.session.keys import SESSION_HEADER, Chain, alias_keys, header_key, proves_start
from factrail.session.turn import Turn
from factrail.stores.state import SessionState

log = logging.getLogger("factrail.session")

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


@runtime_checkable
class TaintRecords(Protocol):
    """Where the fence keeps a session's taint (a `StateStore`)."""

    def fetch(self, session: str) -> tuple[SessionState | None, bool]: ...
    def save(self, session: str, state: SessionState) -> None: ...


Reader = Callable[[dict[str, Any]], Document]
"""A decoded body → the engine's document of it (the route's parser, its system text)."""
KeyOf = Callable[[Mapping[str, str], Mapping[str, Any], Document, str, Chain | None], str]
"""The gateway's session key of a request (`keys.session_key`)."""


def fence_unread(
    fence: TaintFence,
    store: TaintRecords,
    plain: bytes,
    headers: Mapping[str, str],
    read: Reader,
    key_of: KeyOf,
    chain: Chain | None = None,
) -> TaintScan:
    """The fence's reading of a body the gateway forwards unread (NaN or Infinity, a BOM, a
    wide integer, a content type that is not JSON): read as the stdlib reads JSON, its calls
    (and the engine's, when the route's parser reads it) scanned, and a taint kept under every
    identity the request carries (its session, `X-Factrail-Session`, the client's ids, the
    head), as for a request read whole. Nothing when it is not a JSON object or cannot hold a
    fenced call; never raises (the body goes upstream as sent)."""
    try:
        return _fence_unread(fence, store, plain, headers, read, key_of, chain)
    except Exception:
        log.warning("could not read a body forwarded unread for the fence", exc_info=True)
        return TaintScan()


def _fence_unread(
    fence: TaintFence,
    store: TaintRecords,
    plain: bytes,
    headers: Mapping[str, str],
    read: Reader,
    key_of: KeyOf,
    chain: Chain | None,
) -> TaintScan:
    data = lenient_object(plain) if fence.may_call(plain) else None
    if data is None:
        return TaintScan()
    model = data.get("model")
    model = model if isinstance(model, str) else ""
    try:
        doc: Document | None = read(data)
    except Exception:
        doc = None
    messages = doc.messages if doc is not None else []
    scan = fence.scan([*body_calls(data, messages), *command_refs(messages)])
    if not scan.tainted:
        return scan
    explicit = headers.get(SESSION_HEADER, "").strip()
    keys = [header_key(explicit)] if explicit else []
    if doc is not None:
        keys.append(key_of(headers, data, doc, model, chain))
    keys += alias_keys(headers, data, doc, model, chain)
    now_ms = int(time.time() * 1000)
    for key in dict.fromkeys(keys):
        state, answered = store.fetch(key)
        record = taint_write(state.taint if state is not None else None, scan, now_ms)
        if answered and record is not None:
            kept = state or SessionState(plan={})
            kept.taint = record
            store.save(key, kept)
    return scan


def lenient_object(plain: bytes) -> dict[str, Any] | None:
    """A body as the stdlib reads JSON (NaN, Infinity, a BOM, any integer), when it is an
    object."""
    try:
        data = json.loads(plain.decode("utf-8", "surrogatepass").lstrip("\ufeff"))
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
