"""OpenAI chat-completions `messages` (Hermes Agent, Codex, any OpenAI-compatible agent).

- `system` / `developer` text goes to `system_texts`.
- `assistant`: its text, then one tool use per `tool_calls` entry (nested `{"function": {...}}` or
  flat `{"name", "arguments"}` spelling) and one for a legacy `function_call`.
- `tool` and legacy `function` messages are tool results; a run of them is one engine user message
  (parallel results). A `function` result pairs with the oldest unanswered `function_call` of its
  name (else of any name); a call or result without an id gets the stable id `fn_<wire index>`.
- any other role is user text; messages without content are left out of the engine view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from factrail.core.formats.base import Builder, FormatError, WireDocument, join_text
from factrail.core.model import as_map

FORMAT = "openai-chat"
SYSTEM_ROLES = frozenset({"system", "developer"})
RESULT_ROLES = frozenset({"tool", "function"})


def _id(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _is_empty(content: Any) -> bool:
    return content is None or content == "" or content == []


def _add_tool_call(b: Builder, call: Any, w: int, k: int) -> None:
    if not isinstance(call, dict):
        raise FormatError(f"message {w}: tool_calls[{k}] is not an object")
    fn = call.get("function")
    path: tuple[str | int, ...]
    if isinstance(fn, dict) and ("arguments" in fn or "arguments" not in call):
        holder, path = fn, (w, "tool_calls", k, "function")
    else:
        holder, path = call, (w, "tool_calls", k)
    named = fn if isinstance(fn, dict) else call
    name = named.get("name") or call.get("name")
    original = holder.get("arguments")
    b.add_use(
        _id(call.get("id")),
        name if isinstance(name, str) and name else "unknown_tool",
        as_map(original),
        (*path, "arguments"),
        original,
    )


class _FunctionCalls:
    """Legacy `function_call`s waiting for their `function` result, oldest first."""

    def __init__(self) -> None:
        self._pending: list[tuple[str, str]] = []

    def call(self, name: str, tool_use_id: str) -> None:
        self._pending.append((name, tool_use_id))

    def answer(self, name: str) -> str | None:
        for i, pending in enumerate(self._pending):
            if pending[0] == name:
                return self._pending.pop(i)[1]
        return self._pending.pop(0)[1] if self._pending else None


def parse(messages: Sequence[Any]) -> WireDocument:
    """Parse a chat-completions message list (the list itself is the wire document)."""
    if not isinstance(messages, list):
        raise FormatError("OpenAI chat messages must be a JSON array")
    b = Builder()
    calls = _FunctionCalls()
    last_result = False
    for w, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise FormatError(f"message {w} is not an object")
        role = msg.get("role")
        content = msg.get("content")
        if role in SYSTEM_ROLES:
            b.system_texts.append(join_text(content))
        elif role == "assistant":
            b.push("assistant", join_text(content))
            tool_calls = msg.get("tool_calls")
            if isinstance(tool_calls, list):
                for k, call in enumerate(tool_calls):
                    _add_tool_call(b, call, w, k)
            fc = msg.get("function_call")
            if isinstance(fc, dict):
                name = fc.get("name")
                name = name if isinstance(name, str) and name else "unknown_tool"
                tool_use_id = _id(fc.get("id")) or f"fn_{w}"
                calls.call(name, tool_use_id)
                args = fc.get("arguments")
                b.add_use(tool_use_id, name, as_map(args), (w, "function_call", "arguments"), args)
        elif role in RESULT_ROLES:
            tool_use_id = _id(msg.get("tool_call_id"))
            if role == "function" and not tool_use_id:
                name = msg.get("name")
                tool_use_id = calls.answer(name if isinstance(name, str) else "") or f"fn_{w}"
            if not last_result:
                b.push("user")
            b.add_result(tool_use_id, (w, "content"), content, is_error=msg.get("is_error") is True)
            last_result = True
            continue
        elif not _is_empty(content):
            b.push("user", join_text(content))
        last_result = False
    return b.build(FORMAT, messages)
