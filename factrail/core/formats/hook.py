"""Claude Code hook "SessionMessage" lists: the engine's own shape on the wire.

Each item is `{"role", "text", "toolUses": [{"tool_use_id", "tool", "input", "text"?,
"isError"?}], "toolResults": [{"tool_use_id", "text", "isError"?}]}`; unknown keys (such as the
plugin's `handle`) pass through. Every item is one engine message, in order. A tool use that
names its MCP server beside the tool (`server_name`, `server`, any key holding `server`) is
the engine's `mcp__<server>__<tool>`, as Claude Code names MCP tools.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from factrail.core.formats.base import Builder, FormatError, WireDocument, join_text
from factrail.core.model import as_map

FORMAT = "hook"


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _tool(use: dict[str, Any]) -> str:
    """A tool use's tool, after the MCP server named beside it (when one is)."""
    tool = _str(use.get("tool"))
    servers = [
        v.strip()
        for k, v in use.items()
        if isinstance(k, str) and "server" in k.lower() and isinstance(v, str) and v.strip()
    ]
    return f"mcp__{servers[0]}__{tool}" if servers and servers[0] not in tool else tool


def _items(msg: dict[str, Any], key: str, w: int) -> list[tuple[int, dict[str, Any]]]:
    value = msg.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise FormatError(f"message {w}: {key} must be a list of objects")
    return list(enumerate(value))


def parse(messages: Sequence[Any]) -> WireDocument:
    """Parse a hook message list (the list itself is the wire document)."""
    if not isinstance(messages, list):
        raise FormatError("hook messages must be a JSON array")
    b = Builder()
    for w, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise FormatError(f"message {w} is not an object")
        b.push(
            "assistant" if msg.get("role") == "assistant" else "user", join_text(msg.get("text"))
        )
        for k, use in _items(msg, "toolUses", w):
            inp = use.get("input")
            b.add_use(
                _str(use.get("tool_use_id")),
                _tool(use),
                as_map(inp),
                (w, "toolUses", k, "input"),
                inp,
                mirror_path=(w, "toolUses", k, "text") if "text" in use else None,
                is_error=use.get("isError") is True,
            )
        for k, res in _items(msg, "toolResults", w):
            b.add_result(
                _str(res.get("tool_use_id")),
                (w, "toolResults", k, "text"),
                res.get("text"),
                is_error=res.get("isError") is True,
            )
    return b.build(FORMAT, messages)
