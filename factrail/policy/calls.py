"""The calls a request holds, as the fence reads them.

Two readings, joined: the engine's own parse of every wire format (`tool_refs` over its
messages) and the decoded body (`body_refs`), which reads every mapping shaped like a call,
whatever format or client wrote it, so a shape no parser knows makes the fence read more,
never less. A call's server is read wherever a client puts it: in its name, beside it
(`server_name`, `server_label`, `namespace`, ...) or in its input (Cline's `use_mcp_tool`
`{server_name, tool_name}`, an input that names the server); a dispatcher's inner tool name
too. Declarations (`tools`, `functions`, `tool_choice`, `mcp_servers`) are not calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from factrail.core.model import Message, as_map
from factrail.policy.names import tokens

SKILL_TOOL = "Skill"
SKILL_NAME = "".join(tokens(SKILL_TOOL))
SKILL_KEYS = ("skill", "name", "command", "input", "raw")
"""Where a `Skill` call names its skill (Claude Code sends `skill`; others `name`, `command`;
a raw-string input is the engine's `input` or `raw`)."""
SERVER_KEYS = (
    "server_name", "server_label", "server", "serverName", "serverLabel", "mcp_server",
    "mcpServer", "namespace",
)  # fmt: skip
"""Where a call, or its input, names the MCP server (or namespace) of the tool."""
TOOL_KEYS = ("tool_name", "toolName", "tool")
"""Where a dispatcher call's input names the tool it runs (`use_mcp_tool.tool_name`)."""
ARGUMENT_KEYS = ("input", "arguments", "args")
CALL_KEYS = frozenset(
    {"function", "custom", "function_call", "functionCall", "functionResponse", "toolUse"}
)
"""Keys whose mapping, when it has a string `name`, is a call (chat nested, custom and legacy
calls, Gemini, Bedrock), with or without arguments."""
CALL_TYPES = frozenset(
    {
        "tool_use",
        "server_tool_use",
        "mcp_tool_use",
        "function_call",
        "custom_tool_call",
        "mcp_call",
        "mcp_approval_request",
        "tool_call",
        "function",
        "custom",
    }
)
"""Content blocks and items that are calls, in every supported wire format."""
RESULT_ROLES = frozenset({"function", "tool"})
"""Chat messages that answer a call, naming its tool when they carry a `name`."""
NOT_CALLS = frozenset({"tools", "tool_choice", "mcp_servers", "functions"})
"""Top-level body fields that declare tools without calling them."""
MAX_DEPTH = 64
"""Body nesting the scan follows (the wire formats nest calls a few levels deep)."""
_KEYED = ("server", "Server", "tool", "namespace", "\\u")
"""What an arguments string holds when it may name a server or a tool (else it is not parsed)."""
_XML_SERVER = "<server_name>"
_XML_CALL = re.compile(
    r"<server_name>\s*([^<]*?)\s*</server_name>(?:\s*<tool_name>\s*([^<]*?)\s*</tool_name>)?"
)
"""Cline's text protocol: `<use_mcp_tool><server_name>s</server_name><tool_name>t</tool_name>`."""
_XML_TOOL = "use_mcp_tool"


@dataclass(frozen=True, slots=True)
class ToolRef:
    """A tool call as the fence sees it: its name, the skill a `Skill` call loads, the MCP
    server when it is named beside the tool, and other names the call carries (further
    servers, a dispatcher's inner tool)."""

    tool: str
    skill: str | None = None
    server: str | None = None
    qualifiers: tuple[str, ...] = ()


def is_skill_tool(tool: str) -> bool:
    """The `Skill` tool, however spelled."""
    return "".join(tokens(tool)) == SKILL_NAME


def call_ref(tool: str, arguments: Any = None, servers: Sequence[str] = ()) -> ToolRef:
    """The reference of a call of `tool` with `arguments` (an object or a JSON string) and
    the servers named beside it; the servers and tool its input names join them."""
    skill = None
    if is_skill_tool(tool):
        inp = _arguments(arguments, parse=True)
        skill = _first(inp, SKILL_KEYS)
    else:
        inp = _arguments(arguments, parse=False)
    named = [*servers, *_strings(inp, SERVER_KEYS), *_strings(inp, TOOL_KEYS)]
    names = tuple(dict.fromkeys(n for n in named if n))
    return ToolRef(tool, skill, names[0] if servers else None, names[1:] if servers else names)


def _arguments(value: Any, *, parse: bool) -> Mapping[str, Any]:
    """A call's input as an object, as the engine reads it (`as_map`). A string is parsed
    only when it may name a server or a tool (or when `parse`)."""
    if isinstance(value, Mapping):
        return value
    if not isinstance(value, str) or not (parse or any(k in value for k in _KEYED)):
        return {}
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        return as_map(value)  # what the stdlib reads and orjson does not (NaN, big ints)
    return parsed if isinstance(parsed, dict) else {"raw": value}


def _strings(inp: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    return [v for k in keys if isinstance(v := inp.get(k), str) and v.strip()]


def _first(inp: Mapping[str, Any], keys: Iterable[str]) -> str | None:
    found = _strings(inp, keys)
    return found[0] if found else None


def tool_refs(messages: Sequence[Message]) -> list[ToolRef]:
    """Every tool use of the engine's messages (a `Skill` call's skill from any of its keys),
    plus every skill a user turn expanded as a slash command."""
    return [*command_refs(messages), *use_refs(messages)]


def use_refs(messages: Sequence[Message]) -> list[ToolRef]:
    """Every tool use of the engine's messages, the servers and tools its input names read."""
    return [call_ref(use.tool, use.input) for m in messages for use in m.tool_uses]


_COMMAND_NAME = re.compile(r"<command-name>\s*([^<>]+?)\s*</command-name>")
"""How Claude Code records a skill or command expanded by a slash command in a user turn."""


def command_refs(messages: Sequence[Message]) -> list[ToolRef]:
    """The slash commands of user turns, as `Skill` references: those a client expanded
    (`<command-name>/x</command-name>`) and a turn that starts with one (`/x args`)."""
    refs: list[ToolRef] = []
    for m in messages:
        if m.role != "user":
            continue
        if "<command-name>" in m.text:
            refs.extend(ToolRef(SKILL_TOOL, name) for name in _COMMAND_NAME.findall(m.text))
        elif m.text.startswith("/") and not m.tool_results:
            refs.append(ToolRef(SKILL_TOOL, m.text.split(maxsplit=1)[0]))
    return refs


def joined(raw: Iterable[ToolRef], parsed: Iterable[ToolRef]) -> list[ToolRef]:
    """The body's calls and the parse's, each call once: a parsed call is dropped when the
    body holds it (the same tool and skill, and every name the parsed one carries)."""
    refs = list(raw)
    held: dict[tuple[str, str | None], list[ToolRef]] = {}
    for ref in refs:
        held.setdefault((ref.tool, ref.skill), []).append(ref)
    for ref in parsed:
        names = _names(ref)
        same = held.get((ref.tool, ref.skill), [])
        match = next((i for i, r in enumerate(same) if names <= _names(r)), None)
        if match is None:
            refs.append(ref)
        else:
            same.pop(match)
    return refs


def _names(ref: ToolRef) -> frozenset[str]:
    return frozenset((ref.server, *ref.qualifiers) if ref.server else ref.qualifiers)


def body_refs(body: Any) -> list[ToolRef]:
    """Every call a decoded request body holds, in any wire format (see the module's
    docstring). Walks iteratively, at most `MAX_DEPTH` deep."""
    refs: list[ToolRef] = []
    stack: list[tuple[Any, int, str | None]]
    if isinstance(body, Mapping):
        stack = [(v, 1, k) for k, v in body.items() if k not in NOT_CALLS]
    else:
        stack = [(body, 0, None)]
    while stack:
        value, depth, key = stack.pop()
        if depth > MAX_DEPTH:
            continue
        if isinstance(value, str):
            if _XML_SERVER in value:
                refs.extend(_xml_refs(value))
            continue
        if isinstance(value, list):
            stack.extend((v, depth + 1, None) for v in reversed(value))
            continue
        if not isinstance(value, Mapping):
            continue
        ref, inner = _call_ref(value, key)
        if ref is not None:
            refs.append(ref)
        for k, v in value.items():
            if k == inner:  # read as this call: only what it holds is walked
                stack.extend((w, depth + 2, None) for w in v.values() if _walked(w))
            elif _walked(v):
                stack.append((v, depth + 1, k))
    return refs


def _walked(value: Any) -> bool:
    return isinstance(value, list | Mapping) or (isinstance(value, str) and _XML_SERVER in value)


def _call_ref(block: Mapping[str, Any], key: str | None) -> tuple[ToolRef | None, str | None]:
    """The call a mapping makes, if it has a call's shape, and the key of the mapping inside
    it that names the call (`{"function": {"name"}, "arguments"}`), if one does."""
    kind = block.get("type")
    name = block.get("name")
    if not isinstance(name, str):
        tool = block.get("tool")  # hook messages: `{tool_use_id, tool, input}`
        named = isinstance(tool, str) and ("input" in block or "tool_use_id" in block)
        name = tool if named else None
    servers = _strings(block, SERVER_KEYS)
    if name is None:
        inner = next((k for k in CALL_KEYS if _named(block.get(k))), None)
        if inner is not None:
            call: Mapping[str, Any] = block[inner]
            found = next((c[k] for c in (call, block) for k in ARGUMENT_KEYS if k in c), None)
            ref = call_ref(call["name"], found, [*_strings(call, SERVER_KEYS), *servers])
            return ref, inner
        if servers and kind in CALL_TYPES:
            return ToolRef("", None, servers[0], tuple(servers[1:])), None
        return None, None
    called = (
        key in CALL_KEYS
        or kind in CALL_TYPES
        or block.get("role") in RESULT_ROLES
        or any(k in block for k in ARGUMENT_KEYS)
    )
    if not called:
        return None, None
    arguments = next((block[k] for k in ARGUMENT_KEYS if k in block), None)
    return call_ref(name, arguments, servers), None


def _named(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("name"), str)


def _xml_refs(text: str) -> list[ToolRef]:
    return [
        ToolRef(_XML_TOOL, None, server, (tool,) if tool else ())
        for server, tool in _XML_CALL.findall(text)
        if server
    ]
