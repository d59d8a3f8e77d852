"""The shared machinery of every wire adapter: the `Document` contract and lossless write-back.

An adapter walks a wire document once and records, for every engine tool result and tool use, a
*slot*: the path of the wire value it came from, that value, and what the engine saw. `emit` writes
back only the values the engine changed, copying just the containers on the path to each change,
so everything else stays the very same object in the same order (images, `cache_control`,
thinking signatures, encrypted reasoning, vendor extras).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from factrail.core.model import Message, Role, ToolResult, ToolUse, attach_outcomes, content_text
from factrail.core.text import compact_json

Key = str | int
Path = tuple[Key, ...]
Encode = Callable[[Any, str], Any]
"""Writes a reduced result text back in the shape of the wire value it replaces."""

TEXT_SEP = "\n"
"""Joins several text parts into one engine text (parts glued with no separator merge tokens)."""

TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


class FormatError(ValueError):
    """A wire document that an adapter cannot read, or an engine view that does not fit it."""


class Document(Protocol):
    """A parsed wire document: the engine view plus a lossless way back to the wire."""

    format: str
    messages: list[Message]
    system_texts: list[str]
    live: int
    """Index of the first message the provider reads: the ones before it stand for history its
    own compaction summarized (an Anthropic `compaction` block), which it drops (0: it reads
    them all). (A Responses `compaction` item drops only calls and outputs, which its adapter
    leaves out of the engine view.)"""

    def emit(self, messages: Sequence[Message]) -> Any:
        """The wire document with changed result texts and tool inputs written back."""
        ...


def join_text(value: Any) -> str:
    """Engine text of a content value: a string, or its text parts joined by a newline."""
    return content_text(value, TEXT_SEP)


def is_text_part(item: Any) -> bool:
    """Whether a content-part list element carries text the engine reads."""
    if isinstance(item, str):
        return True
    return (
        isinstance(item, dict)
        and item.get("type", "text") in TEXT_PART_TYPES
        and isinstance(item.get("text"), str)
    )


def replace_text(original: Any, text: str, part_type: str = "text") -> Any:
    """`original` content with its text replaced by `text`.

    A string (or anything that is not a list) becomes the new string. In a content-part list the
    first text part takes the new text (keeping its other keys), later text parts go, and non-text
    parts (images, files) stay in place; a list without text gets a `part_type` part in front.
    """
    if not isinstance(original, list):
        return text
    out: list[Any] = []
    placed = False
    for item in original:
        if not is_text_part(item):
            out.append(item)
        elif not placed:
            out.append(text if isinstance(item, str) else {**item, "text": text})
            placed = True
    if not placed:
        out.insert(0, {"type": part_type, "text": text})
    return out


def _is_json_object(value: str) -> bool:
    try:
        return isinstance(json.loads(value), dict)
    except ValueError:
        return False


def encode_input(original: Any, new: dict[str, Any], wrapped: str | None = None) -> Any:
    """A new tool input in the spelling of the wire value it replaces.

    Objects stay objects. A raw string the adapter wrapped as `{wrapped: s}` gets the new string
    back. A string that held a JSON object gets compact JSON; one that did not (read as
    `{"raw": s}`) gets the new raw string back while the input keeps that shape.
    """
    if isinstance(original, dict):
        return new
    key = wrapped or "raw"
    raw = new.get(key)
    was_object = isinstance(original, str) and _is_json_object(original)
    if len(new) == 1 and isinstance(raw, str) and (wrapped or not was_object):
        return raw
    return compact_json(new)


@dataclass(slots=True)
class ResultSlot:
    """Where one engine tool result lives on the wire."""

    path: Path
    original: Any
    text: str
    part_type: str = "text"
    encode: Encode | None = None
    """How a new text is written back when the value is not content (default: `replace_text`)."""


@dataclass(slots=True)
class UseSlot:
    """Where one engine tool use's input (and optional result mirror) lives on the wire."""

    path: Path
    original: Any
    snapshot: str
    wrapped: str | None = None
    mirror_path: Path | None = None
    mirror: str | None = None


class CopyOnWrite:
    """Sets values at paths in a tree, shallow-copying only the containers on those paths."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self._fresh: set[int] = set()

    def is_copy(self, node: Any) -> bool:
        """Whether `node` is a container this writer copied (so something under it changed)."""
        return id(node) in self._fresh

    def set(self, path: Path, value: Any) -> None:
        """Write `value` at `path` (a missing last key is added at the end)."""
        if not path:
            raise FormatError("cannot replace the whole document")
        self.root = node = self._own(self.root)
        for key in path[:-1]:
            child = self._own(node[key])
            node[key] = child
            node = child
        node[path[-1]] = value

    def _own(self, node: Any) -> Any:
        if id(node) in self._fresh:
            return node
        copy: Any
        if isinstance(node, dict):
            copy = dict(node)
        elif isinstance(node, list):
            copy = list(node)
        else:
            raise FormatError(f"cannot write into a {type(node).__name__}")
        self._fresh.add(id(copy))
        return copy


@dataclass(slots=True)
class Builder:
    """Accumulates the engine view and its slots while an adapter walks a wire document."""

    messages: list[Message] = field(default_factory=list)
    system_texts: list[str] = field(default_factory=list)
    results: list[list[ResultSlot]] = field(default_factory=list)
    uses: list[list[UseSlot]] = field(default_factory=list)
    live: int = 0
    """`Document.live`, set by an adapter that meets the provider's compaction."""

    def push(self, role: Role, text: str = "") -> Message:
        """Start a new engine message."""
        m = Message(role=role, text=text)
        self.messages.append(m)
        self.results.append([])
        self.uses.append([])
        return m

    def last(self, role: Role) -> Message | None:
        """The newest engine message if it has `role`."""
        if self.messages and self.messages[-1].role == role:
            return self.messages[-1]
        return None

    def add_result(
        self,
        tool_use_id: str,
        path: Path,
        original: Any,
        *,
        is_error: bool = False,
        part_type: str = "text",
        text: str | None = None,
        encode: Encode | None = None,
    ) -> None:
        """Add a tool result, read from the content value `original` at `path`, to the newest
        message. A value that is not content (a string or content parts) comes with its engine
        `text` and the `encode` that writes a new text back in its shape."""
        if text is None:
            text = join_text(original)
        self.messages[-1].tool_results.append(ToolResult(tool_use_id, text, is_error))
        self.results[-1].append(ResultSlot(path, original, text, part_type, encode))

    def add_use(
        self,
        tool_use_id: str,
        tool: str,
        inp: dict[str, Any],
        path: Path,
        original: Any,
        *,
        wrapped: str | None = None,
        mirror_path: Path | None = None,
        is_error: bool = False,
    ) -> None:
        """Add a tool use, its input parsed from the wire value `original` at `path`, to the
        newest message. `wrapped` names the key a raw-string input was wrapped under; a
        `mirror_path` is where the wire keeps a copy of the result text. An input that is the
        wire object itself is copied, so the engine view never aliases the wire document."""
        if inp is original:
            inp = dict(inp)
        use = ToolUse(tool_use_id, tool, inp, is_error=is_error)
        self.messages[-1].tool_uses.append(use)
        self.uses[-1].append(UseSlot(path, original, compact_json(inp), wrapped, mirror_path))

    def build(self, fmt: str, root: Any) -> WireDocument:
        """The finished document (result mirrors attached to their uses)."""
        attach_outcomes(self.messages)
        for m, slots in zip(self.messages, self.uses, strict=True):
            for u, us in zip(m.tool_uses, slots, strict=True):
                us.mirror = u.text
        return WireDocument(
            fmt, root, self.messages, self.system_texts, self.results, self.uses, self.live
        )


class WireDocument:
    """A parsed wire document (see `Document`), writing changes back through its slots."""

    def __init__(
        self,
        fmt: str,
        root: Any,
        messages: list[Message],
        system_texts: list[str],
        results: list[list[ResultSlot]],
        uses: list[list[UseSlot]],
        live: int = 0,
    ) -> None:
        self.format = fmt
        self.root = root
        self.messages = messages
        self.system_texts = system_texts
        self.live = live
        self._results = results
        self._uses = uses

    def result_location(self, message: int, result: int) -> Path:
        """The wire path of the content value behind `messages[message].tool_results[result]`."""
        return self._results[message][result].path

    def use_location(self, message: int, use: int) -> Path:
        """The wire path of the input value behind `messages[message].tool_uses[use]`."""
        return self._uses[message][use].path

    def emit(self, messages: Sequence[Message]) -> Any:
        """The wire document with every changed result text and tool input written in place."""
        return self.write_back(messages).root

    def write_back(self, messages: Sequence[Message]) -> CopyOnWrite:
        """Apply the engine view's changes; the writer's root is the new wire document."""
        if len(messages) != len(self._results):
            raise FormatError(
                f"engine view has {len(messages)} messages, the document {len(self._results)}"
            )
        cow = CopyOnWrite(self.root)
        for m, results, uses in zip(messages, self._results, self._uses, strict=True):
            if len(m.tool_results) != len(results) or len(m.tool_uses) != len(uses):
                raise FormatError("engine view added or removed tool calls or results")
            for r, rs in zip(m.tool_results, results, strict=True):
                if r.text != rs.text:
                    new = (
                        rs.encode(rs.original, r.text)
                        if rs.encode is not None
                        else replace_text(rs.original, r.text, rs.part_type)
                    )
                    cow.set(rs.path, new)
            for u, us in zip(m.tool_uses, uses, strict=True):
                new = compact_json(u.input)
                if new != us.snapshot:
                    cow.set(us.path, encode_input(us.original, u.input, us.wrapped))
                if us.mirror_path is not None and u.text is not None and u.text != us.mirror:
                    cow.set(us.mirror_path, u.text)
        return cow
