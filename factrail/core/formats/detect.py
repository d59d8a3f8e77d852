"""Pick the adapter for a transcript file's contents, and write a result back in its own shape.

- a `.jsonl` name (or text that is JSON lines rather than one JSON value) is a Claude Code session;
- `{"input": ...}` is a Responses request;
- a JSON array, or an object with a `messages` array, is sorted by the shape of its items: any
  `toolUses`/`toolResults` key means hook messages (even when some item also has `content`);
  Responses items (`type`d items, `input_text` parts) mean a Responses input; `tool_use` /
  `tool_result` / thinking blocks or a top-level `system` mean Anthropic Messages; `content`,
  `tool_calls`, `function_call` or a `tool`/`function`/`system`/`developer` role mean OpenAI chat;
  items that all carry `text` mean hook messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from factrail.core.formats import anthropic, claude_jsonl, hook, openai_chat, responses
from factrail.core.formats.base import Document, FormatError
from factrail.core.model import Message

ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
RESPONSES_PARTS = frozenset({"input_text", "output_text", "input_image", "input_file"})
OPENAI_ROLES = frozenset({"tool", "function", "system", "developer"})


class Loaded:
    """A document read by `parse_any`, remembering the envelope and layout it came in."""

    def __init__(
        self, inner: Document, envelope: dict[str, Any] | None, key: str | None, pretty: bool
    ) -> None:
        self.inner = inner
        self.format = inner.format
        self.messages = inner.messages
        self.system_texts = inner.system_texts
        self.live = inner.live
        self.envelope = envelope
        self.key = key
        self.pretty = pretty

    def emit(self, messages: Sequence[Message]) -> Any:
        """The inner wire document (the message list or jsonl text) with changes written back."""
        return self.inner.emit(messages)


def _part_types(content: Any) -> set[Any]:
    if not isinstance(content, list):
        return set()
    return {part.get("type") for part in content if isinstance(part, dict)}


def _classify(items: list[Any], envelope: dict[str, Any] | None) -> str:
    if not all(isinstance(item, dict) for item in items):
        raise FormatError("every message must be a JSON object")
    if any("toolUses" in m or "toolResults" in m for m in items):
        return hook.FORMAT
    parts: set[Any] = set().union(*(_part_types(m.get("content")) for m in items))
    if any("type" in m for m in items) or parts & RESPONSES_PARTS:
        return responses.FORMAT
    if parts & ANTHROPIC_BLOCKS or (envelope is not None and "system" in envelope):
        return anthropic.FORMAT
    if not items or any(
        "content" in m or "tool_calls" in m or "function_call" in m or m.get("role") in OPENAI_ROLES
        for m in items
    ):
        return openai_chat.FORMAT
    if all("text" in m for m in items):
        return hook.FORMAT
    raise FormatError("cannot tell the format: messages have neither `content` nor `text`")


def _is_session_entry(value: Any) -> bool:
    return isinstance(value, dict) and ("sessionId" in value or "parentUuid" in value)


def _first_line_is_object(text: str) -> bool:
    line = next((ln for ln in text.split("\n") if ln.strip()), "")
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def parse_any(data: bytes | str, *, filename: str | None = None) -> Loaded:
    """Parse a transcript file's contents with the adapter its name and shape call for."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as e:
        raise FormatError(f"transcript is not UTF-8: {e}") from e
    if filename is not None and filename.endswith(".jsonl"):
        return Loaded(claude_jsonl.parse(text), None, None, False)
    try:
        value = json.loads(text)
    except ValueError as e:
        if _first_line_is_object(text):
            return Loaded(claude_jsonl.parse(text), None, None, False)
        raise FormatError(f"transcript is neither JSON nor JSON lines: {e}") from e
    if _is_session_entry(value):
        return Loaded(claude_jsonl.parse(text), None, None, False)
    pretty = "\n" in text.strip()
    if isinstance(value, list):
        return Loaded(_parse_items(value, None), None, None, pretty)
    if not isinstance(value, dict):
        raise FormatError(f"transcript is a JSON {type(value).__name__}, not an array or object")
    if isinstance(value.get("messages"), list):
        return Loaded(_parse_items(value["messages"], value), value, "messages", pretty)
    if isinstance(value.get("input"), str | list):
        doc = responses.parse(value["input"])
        instructions = value.get("instructions")
        if isinstance(instructions, str):
            doc.system_texts.insert(0, instructions)
        return Loaded(doc, value, "input", pretty)
    raise FormatError("a JSON object transcript needs a `messages` array or an `input`")


def _parse_items(items: list[Any], envelope: dict[str, Any] | None) -> Document:
    kind = _classify(items, envelope)
    if kind == hook.FORMAT:
        return hook.parse(items)
    if kind == responses.FORMAT:
        return responses.parse(items)
    if kind == anthropic.FORMAT:
        return anthropic.parse(items, envelope.get("system") if envelope else None)
    return openai_chat.parse(items)


def dump_document(doc: Document, emitted: Any) -> str:
    """`emitted` serialised like the input `doc` was read: jsonl as is, JSON in its envelope."""
    if isinstance(emitted, str) and doc.format == claude_jsonl.FORMAT:
        return emitted
    value = emitted
    pretty = False
    if isinstance(doc, Loaded):
        pretty = doc.pretty
        if doc.envelope is not None and doc.key is not None:
            value = {**doc.envelope, doc.key: emitted}
    if pretty:
        return json.dumps(value, ensure_ascii=False, indent=2) + "\n"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
