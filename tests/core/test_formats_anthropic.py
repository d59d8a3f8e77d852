"""The Anthropic adapter's reading of mid-conversation `role: "system"` messages."""

from __future__ import annotations

import copy
from typing import Any

from factrail.core.formats import anthropic
from factrail.core.model import transcript_tokens

RULES = "Answer in French from now on; cite the file and line of every claim. " * 40


def turn(clear_at: str | None, *, followed: bool) -> list[dict[str, Any]]:
    system: dict[str, Any] = {"role": "system", "content": [{"type": "text", "text": RULES}]}
    if clear_at is not None:
        system["clear_at"] = clear_at
    wire: list[dict[str, Any]] = [{"role": "user", "content": "Read the config."}, system]
    if followed:
        wire += [
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
            {"role": "user", "content": "Now the tests."},
        ]
    return wire


def test_a_system_message_cleared_at_the_next_user_message_is_not_counted_after_it() -> None:
    wire = turn("next_user_message", followed=True)
    sent = copy.deepcopy(wire)
    doc = anthropic.parse(wire)
    assert [m.text for m in doc.messages] == ["Read the config.", "", "Done.", "Now the tests."]
    assert transcript_tokens(doc.messages) < 20
    assert doc.emit(doc.messages) == sent  # still sent exactly as the client sent it


def test_it_is_counted_for_the_turn_it_follows() -> None:
    doc = anthropic.parse(turn("next_user_message", followed=False))
    assert doc.messages[1].text == RULES


def test_a_system_message_that_never_clears_is_always_counted() -> None:
    for clear_at in ("never", None):
        doc = anthropic.parse(turn(clear_at, followed=True))
        assert doc.messages[1].text == RULES
