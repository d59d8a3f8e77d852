"""Re-applying a session's stored plan: the reductions of earlier turns, byte for byte.

Every tool result reduced in an earlier turn is replaced by the exact same reduced text, so the
upstream prompt prefix stays byte-identical from turn to turn and provider caches stay warm.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from factrail.core.model import Message


@dataclass(frozen=True)
class PlanEntry:
    """How one tool result was reduced: matched by tool_use_id and the hash of its original."""

    original_hash: str
    reduced_text: str
    input: dict[str, Any] | None = None
    """The briefed tool input, if the call's arguments were reduced too."""


def text_hash(text: str) -> str:
    """Stable short hash (blake2b, 16 bytes, hex) of an original result text."""
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def reapply_plan(
    messages: Sequence[Message], plan: Mapping[str, PlanEntry]
) -> tuple[list[Message], set[str]]:
    """Swap in every stored reduction whose original still hashes the same (or which the client
    sent back as it was sent): the messages to send and the ids re-applied.

    Both the reduced result text and the briefed arguments of the call are reproduced, so a turn
    that does not compact forwards the previous forwarded request, extended, byte for byte.
    Matching on the id *and* the hash means a reused tool-call id never picks up a wrong
    reduction. Messages without a planned result are shared, not copied.
    """
    if not plan:
        return list(messages), set()
    out: list[Message] = []
    done: dict[str, str] = {}
    for m in messages:
        if not any(r.tool_use_id in plan for r in m.tool_results):
            out.append(m)
            continue
        copy = m.copy()
        for r in copy.tool_results:
            entry = plan.get(r.tool_use_id)
            if entry is None:
                continue
            if r.text != entry.reduced_text and text_hash(r.text) != entry.original_hash:
                continue
            done[r.tool_use_id] = r.text
            r.text = entry.reduced_text
        out.append(copy)
    for i, m in enumerate(out):
        if not any(u.tool_use_id in done for u in m.tool_uses):
            continue
        copy = m.copy()
        for u in copy.tool_uses:
            entry = plan.get(u.tool_use_id)
            if entry is None or u.tool_use_id not in done:
                continue
            if entry.input is not None:
                u.input = entry.input
            if u.text == done[u.tool_use_id]:
                u.text = entry.reduced_text
        out[i] = copy
    return out, set(done)
