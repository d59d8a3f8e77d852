"""The one internal transcript model every wire format parses into.

A transcript is a list of `Message`s. Tool calls live on assistant messages, tool results on user
messages, and the two are paired by `tool_use_id`. Sizes are counted in Unicode scalar values
(`len(str)`) over compact JSON for inputs; the `ToolUse.text` mirror is never counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from factrail.core.text import compact_json, truncate
from factrail.core.tokens import estimate_tokens

Role = Literal["user", "assistant"]
Action = Literal["keep", "drop_result", "drop_call"]
"""What happens to a call: kept verbatim, its result reduced by the rails, or erased."""


@dataclass(slots=True)
class ToolUse:
    """One tool call the assistant made."""

    tool_use_id: str
    tool: str
    input: dict[str, Any] = field(default_factory=dict)
    text: str | None = None
    """Mirror of the result text, as Claude Code attaches it (not counted in sizes)."""
    is_error: bool = False


@dataclass(slots=True)
class ToolResult:
    """The output of one tool call."""

    tool_use_id: str
    text: str = ""
    is_error: bool = False


@dataclass(slots=True)
class Message:
    """One turn: user text and/or tool results, or assistant text and/or tool calls."""

    role: Role
    text: str = ""
    tool_uses: list[ToolUse] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)

    def copy(self) -> Message:
        """A copy whose lists (and their items) can be changed without touching this one."""
        return replace(
            self,
            tool_uses=[replace(u) for u in self.tool_uses],
            tool_results=[replace(r) for r in self.tool_results],
        )


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool use paired with its result."""

    id: str
    """Short id `t1`, `t2`, … in transcript order."""
    tool_use_id: str
    tool: str
    input: dict[str, Any]
    call_index: int
    result_index: int
    result_chars: int
    is_error: bool
    pinned: bool


def input_json(use: ToolUse) -> str:
    """The compact JSON of a tool input, as measured, hashed and searched."""
    return compact_json(use.input)


def result_texts(messages: Sequence[Message]) -> dict[str, str]:
    """Each result's text by its call's id."""
    return {r.tool_use_id: r.text for m in messages for r in m.tool_results}


def message_chars(m: Message) -> int:
    """Text + compact JSON of every input + every result text."""
    return (
        len(m.text)
        + sum(len(input_json(u)) for u in m.tool_uses)
        + sum(len(r.text) for r in m.tool_results)
    )


def transcript_chars(messages: Sequence[Message]) -> int:
    """Sum of `message_chars` over the transcript."""
    return sum(message_chars(m) for m in messages)


def transcript_tokens(
    messages: Sequence[Message], count: Callable[[str], int] = estimate_tokens
) -> int:
    """Estimated tokens of every text, compact-JSON input and result (the mirror not counted);
    `count` may be a memoised estimator."""
    total = 0
    for m in messages:
        total += count(m.text)
        for u in m.tool_uses:
            total += count(input_json(u))
        for r in m.tool_results:
            total += count(r.text)
    return total


def is_pinned(index: int, total: int, preserve_recent: int) -> bool:
    """Message 0 and the newest `preserve_recent` messages are never reduced."""
    return index == 0 or index + preserve_recent >= total


def collect_tool_calls(messages: Sequence[Message], preserve_recent: int) -> list[ToolCall]:
    """Pair every tool use with its result (a later duplicate result wins); skip unanswered uses."""
    results: dict[str, tuple[int, ToolResult]] = {}
    for i, m in enumerate(messages):
        for r in m.tool_results:
            results[r.tool_use_id] = (i, r)
    total = len(messages)
    calls: list[ToolCall] = []
    for i, m in enumerate(messages):
        for u in m.tool_uses:
            hit = results.get(u.tool_use_id)
            if hit is None:
                continue
            ri, r = hit
            calls.append(
                ToolCall(
                    id=f"t{len(calls) + 1}",
                    tool_use_id=u.tool_use_id,
                    tool=u.tool,
                    input=u.input,
                    call_index=i,
                    result_index=ri,
                    result_chars=len(r.text),
                    is_error=r.is_error,
                    pinned=is_pinned(i, total, preserve_recent)
                    or is_pinned(ri, total, preserve_recent),
                )
            )
    return calls


def is_prompt(m: Message) -> bool:
    """A user message with non-blank text and no tool results."""
    return m.role == "user" and not m.tool_results and bool(m.text.strip())


def goal_from_messages(messages: Sequence[Message]) -> str:
    """The last three user prompts, each cut to 500 chars, joined by newlines."""
    prompts = [truncate(m.text, 500) for m in messages if is_prompt(m)]
    return "\n".join(prompts[-3:])


def attach_outcomes(messages: Sequence[Message]) -> None:
    """Mirror every result's text and error flag onto its tool use (a later duplicate wins)."""
    outcome: dict[str, ToolResult] = {}
    for m in messages:
        for r in m.tool_results:
            outcome[r.tool_use_id] = r
    for m in messages:
        for u in m.tool_uses:
            hit = outcome.get(u.tool_use_id)
            if hit is not None:
                u.text = hit.text
                u.is_error = hit.is_error


def as_map(value: Any) -> dict[str, Any]:
    """A tool input as an object: objects as is, JSON-object strings parsed, else `{"raw": s}`."""
    import json

    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"raw": value}
        return parsed if isinstance(parsed, dict) else {"raw": value}
    return {}


_TEXT_PART_TYPES = ("text", "input_text", "output_text")


def content_text(value: Any, sep: str = "") -> str:
    """Text of a content value: a string, or the text parts of a content-part list joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts: list[str] = []
        for item in value:
            if isinstance(item, str):
                parts.append(item)
            elif isinstance(item, dict) and item.get("type", "text") in _TEXT_PART_TYPES:
                t = item.get("text")
                if isinstance(t, str):
                    parts.append(t)
        return sep.join(parts)
    return ""
