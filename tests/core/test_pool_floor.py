"""The pooled fact budget may go to one stub's many lines, but never leaves a stub without the
best line it chose on its own."""

from __future__ import annotations

import re

from factrail.core.apply import Reduction, apply
from factrail.core.model import Action, Message, collect_tool_calls
from factrail.core.render import Selection
from factrail.eval.synthetic import corpus

_KEPT = re.compile(r"of this output(?: \(error\))?, kept (\d+) fact lines?;")
_STUB = re.compile(r"^\[factrail omitted \d+ chars of this output", re.MULTILINE)


def _kept(text: str) -> int | None:
    """The fact lines a stub says it kept (None: not a stub)."""
    if not _STUB.search(text):
        return None
    found = _KEPT.search(text)
    return int(found[1]) if found else 0


def _actions(messages: list[Message]) -> dict[str, Action]:
    calls = collect_tool_calls(messages, preserve_recent=6)
    return {c.tool_use_id: "keep" if c.pinned else "drop_result" for c in calls}


def test_every_stub_keeps_the_best_line_it_had_on_its_own() -> None:
    checked = 0
    for _, messages in corpus(0, 8):
        actions = _actions(list(messages))
        for target in (0.6, 0.95):
            reduction = Reduction(target, 0.0)
            alone = apply(messages, actions, reduction=reduction, selection=Selection(pool=False))
            pooled = apply(messages, actions, reduction=reduction)
            for rid, text in pooled.changed.items():
                own = _kept(alone.changed.get(rid, ""))
                if own and (kept := _kept(text)) is not None:
                    checked += 1
                    assert kept >= 1, rid
    assert checked > 50
