"""Claude Code session files (`~/.claude/projects/<project>/<session>.jsonl`).

Lines that are not JSON objects, entries that are neither `user` nor `assistant`, sidechain
(subagent) and meta (harness-injected) entries and entries without a `message` are skipped.
Streamed assistant entries sharing a `message.id` merge into one message; results-only user
entries in a row merge into one message (parallel results). `emit` returns the jsonl text with
every untouched line byte-identical and each changed line re-serialised as compact JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from factrail.core.formats.base import TEXT_SEP, Builder, CopyOnWrite, WireDocument, join_text
from factrail.core.model import Message, as_map

FORMAT = "claude-jsonl"


def _join(lines: str | Iterable[str]) -> str:
    if isinstance(lines, str):
        return lines
    items = list(lines)
    if all(line.endswith("\n") for line in items[:-1]):
        return "".join(items)
    return "\n".join(items)


def _load(line: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _dump(obj: Any, raw: str) -> str:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return text + "\r" if raw.endswith("\r") else text


def _blocks(content: Any) -> list[tuple[int, dict[str, Any]]]:
    if not isinstance(content, list):
        return []
    return [(k, block) for k, block in enumerate(content) if isinstance(block, dict)]


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _extend(m: Message, text: str) -> None:
    m.text = f"{m.text}{TEXT_SEP}{text}" if m.text and text else m.text + text


class JsonlDocument:
    """A parsed session file; `emit` returns jsonl text."""

    def __init__(self, doc: WireDocument, raw_lines: list[str]) -> None:
        self.format = FORMAT
        self.messages = doc.messages
        self.system_texts = doc.system_texts
        self.live = 0  # Claude Code's own compaction starts a new file: it drops nothing
        self.wire = doc
        self._raw = raw_lines

    def emit(self, messages: Sequence[Message]) -> str:
        """The session file with changed lines re-serialised and all others byte-identical."""
        cow: CopyOnWrite = self.wire.write_back(messages)
        if cow.root is self.wire.root:
            return "\n".join(self._raw)
        return "\n".join(
            _dump(obj, raw) if cow.is_copy(obj) else raw
            for obj, raw in zip(cow.root, self._raw, strict=True)
        )


def parse(lines: str | Iterable[str]) -> JsonlDocument:
    """Parse a Claude Code session file (its text, or its lines)."""
    raw_lines = _join(lines).split("\n")
    objs: list[dict[str, Any] | None] = [None] * len(raw_lines)
    b = Builder()
    last_assistant_id: Any = None
    last_was_results = False
    for li, line in enumerate(raw_lines):
        entry = _load(line)
        if entry is None or entry.get("type") not in ("user", "assistant"):
            continue
        if entry.get("isSidechain") is True or entry.get("isMeta") is True:
            continue
        if "message" not in entry:
            continue
        objs[li] = entry
        message = entry["message"]
        content = message.get("content") if isinstance(message, dict) else None
        base = (li, "message", "content")
        texts = [_str(bl.get("text")) for _, bl in _blocks(content) if bl.get("type") == "text"]
        text = TEXT_SEP.join(texts) if isinstance(content, list) else join_text(content)
        if entry["type"] == "assistant":
            msg_id = message.get("id") if isinstance(message, dict) else None
            m = b.last("assistant")
            if msg_id is not None and msg_id == last_assistant_id and m is not None:
                _extend(m, text)
            else:
                b.push("assistant", text)
            for k, bl in _blocks(content):
                if bl.get("type") == "tool_use":
                    inp = bl.get("input")
                    b.add_use(
                        _str(bl.get("id")),
                        _str(bl.get("name")),
                        as_map(inp),
                        (*base, k, "input"),
                        inp,
                    )
            last_assistant_id = msg_id
            last_was_results = False
            continue
        last_assistant_id = None
        results = [(k, bl) for k, bl in _blocks(content) if bl.get("type") == "tool_result"]
        if not results and not text:
            continue
        only_results = bool(results) and not text.strip()
        if not (only_results and last_was_results and b.last("user") is not None):
            b.push("user", text)
        for k, bl in results:
            b.add_result(
                _str(bl.get("tool_use_id")),
                (*base, k, "content"),
                bl.get("content"),
                is_error=bl.get("is_error") is True,
            )
        last_was_results = only_results
    return JsonlDocument(b.build(FORMAT, objs), raw_lines)
