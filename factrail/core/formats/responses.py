"""The `input` of an OpenAI Responses API request.

- a plain string is one user message;
- `message` items (also "easy" items with a `role` and no `type`): `user` / `assistant` turns,
  `system` / `developer` text to `system_texts`;
- `function_call` (`arguments` JSON string) and `custom_tool_call` (raw `input` string, seen by the
  engine as `{"input": s}`) join the assistant message just before them;
- `function_call_output` / `custom_tool_call_output` (`output` string or parts): a run of them is
  one engine user message;
- anything else (`reasoning` with `encrypted_content`, `compaction`, `item_reference`, unknown
  items) is opaque: it passes through untouched and is never compacted.
"""

from __future__ import annotations

from typing import Any

from factrail.core.formats.base import Builder, FormatError, WireDocument, join_text
from factrail.core.model import as_map

FORMAT = "responses"
CALLS = frozenset({"function_call", "custom_tool_call"})
OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _call_id(item: dict[str, Any]) -> str:
    return _str(item.get("call_id")) or _str(item.get("id"))


def parse(input: str | list[Any]) -> WireDocument:
    """Parse a Responses `input` (the value itself is the wire document)."""
    b = Builder()
    if isinstance(input, str):
        b.push("user", input)
        return b.build(FORMAT, input)
    if not isinstance(input, list):
        raise FormatError("Responses input must be a string or a JSON array")
    last: str | None = None
    for w, item in enumerate(input):
        if not isinstance(item, dict):
            raise FormatError(f"input item {w} is not an object")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            text = join_text(item.get("content"))
            if role in ("system", "developer"):
                b.system_texts.append(text)
                last = None
            else:
                b.push("assistant" if role == "assistant" else "user", text)
                last = b.messages[-1].role
        elif kind in CALLS:
            if last != "assistant":
                b.push("assistant")
                last = "assistant"
            name = _str(item.get("name")) or "unknown_tool"
            if kind == "function_call":
                args = item.get("arguments")
                b.add_use(_call_id(item), name, as_map(args), (w, "arguments"), args)
            else:
                raw = item.get("input")
                b.add_use(
                    _call_id(item), name, {"input": _str(raw)}, (w, "input"), raw, wrapped="input"
                )
        elif kind in OUTPUTS:
            if last != "results":
                b.push("user")
                last = "results"
            b.add_result(_call_id(item), (w, "output"), item.get("output"), part_type="input_text")
    return b.build(FORMAT, input)
