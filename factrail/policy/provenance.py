"""What a request proves about its session, for the fence: whether its transcript shows the
session from its start, and which calls its decoded body holds.

A transcript that continues one factrail has not seen whole cannot prove that no fenced call
happened before it: a client's own compaction (Claude Code, Codex, Gemini CLI summaries), the
provider's (an opaque Responses `compaction` item, an Anthropic `compaction` block in place of
the messages it summarizes), or history kept by the provider (`previous_response_id`,
`conversation`, an Anthropic thread continued). Such a session is judged as if tainted unless
factrail saw it from its start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from factrail.core.formats.anthropic import COMPACTION_BLOCK
from factrail.core.formats.responses import COMPACTION_ITEMS
from factrail.core.model import Message, is_prompt
from factrail.policy.calls import ToolRef, body_refs, joined_refs, use_refs

CONTINUATION_MARKERS = (
    "This session is being continued from a previous conversation",
    "Another language model started to solve this problem and produced a summary",
    "<state_snapshot>",
)
"""How Claude Code, Codex CLI and Gemini CLI open a transcript rebuilt by their own compaction
(in one of its first user messages)."""
OPENING = 6
"""How many messages from the start may hold a continuation marker."""
SERVER_HISTORY = ("previous_response_id", "conversation")
"""Responses fields that leave earlier turns on the provider's side."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a request tells the fence beyond the engine's messages."""

    refs: tuple[ToolRef, ...] | None = None
    """Every call of the decoded wire body joined with the engine's tool uses (None: the
    engine's messages are scanned)."""
    aliases: tuple[str, ...] = ()
    """Every other identity the request carries (`session.keys.alias_keys`), which the session's
    taint is kept and checked under, so that it survives a change of any of the others."""
    continued: str | None = None
    """Why the transcript may not show the session from its start (None: it does)."""


def continued(body: Mapping[str, Any] | None, messages: Sequence[Message]) -> str | None:
    """Why a transcript may not show its session from the start, or None when it does."""
    if body is not None:
        for name in SERVER_HISTORY:
            if body.get(name):
                return f"earlier turns are kept by the provider ({name})"
        if _continued_thread(body) is not None:
            return "earlier turns are kept by the provider (thread)"
        items = body.get("input")
        if isinstance(items, list) and any(
            isinstance(i, Mapping) and i.get("type") in COMPACTION_ITEMS for i in items
        ):
            return "the transcript holds a compaction item"
        if _has_compaction_block(body.get("messages")):
            return "the transcript holds the provider's compaction block"
    opening = [m.text for m in messages[:OPENING] if is_prompt(m)]
    if any(marker in text for text in opening for marker in CONTINUATION_MARKERS):
        return "the transcript continues the client's own compaction"
    return None


def _continued_thread(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """An Anthropic `thread` the request continues (None: it continues none)."""
    thread = body.get("thread")
    return thread if isinstance(thread, Mapping) and thread.get("type") == "continue" else None


def previous_id(body: Mapping[str, Any]) -> str | None:
    """The id of the answer a request continues, its earlier turns kept by the provider: a
    Responses `previous_response_id`, an Anthropic thread's `previous_message_id`."""
    thread = _continued_thread(body) or {}
    for previous in (body.get("previous_response_id"), thread.get("previous_message_id")):
        if isinstance(previous, str) and previous.strip():
            return previous.strip()
    return None


def _has_compaction_block(messages: Any) -> bool:
    """Whether an Anthropic message list holds a `compaction` block (also one without a
    summary, which the provider ignores: the fence fails closed)."""
    if not isinstance(messages, list):
        return False
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") == COMPACTION_BLOCK for b in content
        ):
            return True
    return False


def evidence(
    body: Mapping[str, Any], messages: Sequence[Message], aliases: tuple[str, ...] = ()
) -> Evidence:
    """The fence's evidence from a decoded request body: its calls, and those of the engine's
    parse of it (a shape one reading misses, the other holds)."""
    return Evidence(body_calls(body, messages), aliases, continued(body, messages))


def raw_evidence(data: bytes | str, messages: Sequence[Message]) -> Evidence:
    """The fence's evidence from a transcript file or body as read (the CLI, the library):
    its decoded calls when it is one JSON value, else the engine's messages are scanned."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return Evidence(continued=continued(None, messages))
    top = body if isinstance(body, Mapping) else None
    return Evidence(body_calls(body, messages), (), continued(top, messages))


def body_calls(body: Any, messages: Sequence[Message]) -> tuple[ToolRef, ...]:
    """Every call of a decoded body joined with the tool uses the engine parsed from it."""
    return tuple(joined_refs(body_refs(body), use_refs(messages)))
