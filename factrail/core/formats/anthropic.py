"""Anthropic Messages API `messages` (and its top-level `system`).

Every wire message is one engine message. Text blocks make its text; `tool_use` blocks are tool
uses and `tool_result` blocks tool results. Every other block (thinking and its signature,
redacted thinking, images, documents, server tool blocks) passes through untouched.

A tool the model's own code called (`tool_use` with a `caller` of type `code_execution_…`:
programmatic tool calling) and its `tool_result` pass through untouched too: only the code's
output enters the model's context, so they are neither counted nor reduced.

A `compaction` block with a summary is where the provider's own compaction replaced what came
before: the API drops every block before it, so the message holding the last such block is the
first one the provider reads (`Document.live`). A block without a summary is a failed
compaction the API ignores.

A mid-conversation `role: "system"` message is read as a user turn whose text is never
rewritten. One with `clear_at: "next_user_message"` stops being shown once a later
`role: "user"` message follows it: from then on its text is not in the engine view (not
counted, no fact), though the message is still sent as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from factrail.core.formats.base import TEXT_SEP, Builder, FormatError, WireDocument, join_text
from factrail.core.model import as_map

FORMAT = "anthropic"
COMPACTION_BLOCK = "compaction"
CLEARS = "next_user_message"
"""A system message's `clear_at` that hides it once a later user message exists."""
CODE_CALLER = "code_execution"
"""The prefix of a `caller` type that marks a tool call made by the model's own code."""


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def from_code(block: dict[str, Any]) -> bool:
    """Whether a `tool_use` block is a call the model's code made (programmatic tool calling)."""
    caller = block.get("caller")
    return isinstance(caller, dict) and _str(caller.get("type")).startswith(CODE_CALLER)


def _shown_until(messages: list[Any]) -> int:
    """The index of the last `role: "user"` message: a system message before it that clears at
    the next user message is no longer shown (-1: none)."""
    return next((w for w in range(len(messages) - 1, -1, -1) if _role(messages[w]) == "user"), -1)


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None


def parse(messages: Sequence[Any], system: Any = None) -> WireDocument:
    """Parse a Messages API message list (the list itself is the wire document)."""
    if not isinstance(messages, list):
        raise FormatError("Anthropic messages must be a JSON array")
    b = Builder()
    last_user = _shown_until(messages)
    offstage: set[str] = set()  # calls the model's code made: outside its context
    if system is not None:
        b.system_texts.append(join_text(system))
    for w, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise FormatError(f"message {w} is not an object")
        content = msg.get("content")
        blocks = (
            [(k, bl) for k, bl in enumerate(content) if isinstance(bl, dict)]
            if isinstance(content, list)
            else []
        )
        if isinstance(content, list):
            text = TEXT_SEP.join(
                _str(bl.get("text")) for _, bl in blocks if bl.get("type") == "text"
            )
        else:
            text = join_text(content)
        role = msg.get("role")
        if role == "system" and msg.get("clear_at") == CLEARS and w < last_user:
            text = ""  # no longer shown to the model
        b.push("assistant" if role == "assistant" else "user", text)
        for k, bl in blocks:
            kind = bl.get("type")
            if kind == "tool_use" and from_code(bl):
                if use_id := _str(bl.get("id")):
                    offstage.add(use_id)
            elif kind == "tool_use":
                inp = bl.get("input")
                b.add_use(
                    _str(bl.get("id")),
                    _str(bl.get("name")),
                    as_map(inp),
                    (w, "content", k, "input"),
                    inp,
                )
            elif kind == COMPACTION_BLOCK and bl.get("content") is not None:
                b.live = len(b.messages) - 1
            elif kind == "tool_result" and _str(bl.get("tool_use_id")) not in offstage:
                b.add_result(
                    _str(bl.get("tool_use_id")),
                    (w, "content", k, "content"),
                    bl.get("content"),
                    is_error=bl.get("is_error") is True,
                )
    return b.build(FORMAT, messages)
