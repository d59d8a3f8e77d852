"""The calls a request holds, as the fence reads them.

Two readings, joined: the engine's own parse of every wire format (`tool_refs` over its
messages) and the decoded body (`body_refs`), which reads every mapping shaped like a call,
whatever format or client wrote it, so a shape no parser knows makes the fence read more,
never less. A mapping is a call when it names a tool (`name`, `recipient_name`, a hook's
`tool`) and anything says it is one: its key or `type` (any type that speaks of a call, a
use, a tool, a function, MCP or an invocation), a `role: tool|function`, an input, or a
server beside it; a call nested under `function`, `custom`, `functionCall`... is read too.

Of a call the fence reads its name, the servers named beside it or in its input (any key
that speaks of a server or a namespace, a string or an object), a dispatcher's inner tool
(any key that speaks of a tool), and then every key and string it holds but its result
(`held`; `call_texts` and `expanded` read them: JSON-encoded strings decoded, a few levels
deep, and raw text as it is). A text that holds tool-invocation markup (`<invoke name=…>`,
Cline's `<use_mcp_tool>`, `<server_name>`, any case), wherever it stands, is read as a call
too. Declarations (`tools`, `functions`, `tool_choice`, `mcp_servers`) are not calls.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from factrail.core.model import Message
from factrail.policy.names import fold, joined, tokens, unescape, variants

SKILL_TOOL = "Skill"
SKILL_NAME = joined(SKILL_TOOL)
SKILL_WORD = "skill"
SKILL_KEYS = ("name", "command", "input", "raw")
"""Where a `Skill` call names its skill besides any key that starts with `skill` (Claude Code
sends `skill`; others `skill_name`, `name`, `command`; a raw-string input is `raw`)."""
SERVER_WORDS = frozenset({"server", "namespace"})
"""A key holding one of these words names a call's MCP server (`server_name`, `serverLabel`,
`mcp_server_name`, `SERVER-ID`, `server_url`, `namespace`)."""
TOOL_WORDS = frozenset({"tool", "recipient"})
"""A key of a call's input holding one of these words names the tool a dispatcher runs
(`use_mcp_tool.tool_name`, `recipient_name`)."""
ARGUMENT_KEYS = ("input", "arguments", "args")
NAME_KEYS = ("name", "recipient_name")
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
"""Content blocks and items that are calls, in every supported wire format (a mapping of one
of these types is a call even when only its server is named)."""
CALL_WORDS = frozenset({"call", "use", "tool", "function", "mcp", "invoke", "invocation"})
"""A named mapping whose `type` holds one of these words is a call (or names the tool of
one, as a `function_call_output` carrying its `name` does)."""
RESULT_ROLES = frozenset({"function", "tool"})
"""Chat messages that answer a call, naming its tool when they carry a `name`."""
RESULT_KEYS = frozenset({"output", "content", "result", "results", "error", "text"})
"""What a call carries besides its input: its result (not read as the call's input)."""
NOT_CALLS = frozenset({"tools", "tool_choice", "mcp_servers", "functions"})
"""Top-level body fields that declare tools without calling them."""
MAX_DEPTH = 64
"""Body nesting the scan follows (the wire formats nest calls a few levels deep)."""
DECODE_DEPTH = 4
"""How many times a JSON-encoded string inside a call's input is decoded."""
_JSON_START = ("{", "[", '"')
_KEYED = re.compile(r"server|tool|namespace|recipient|\\u|%", re.IGNORECASE)
"""What an arguments string holds when it may name a server or a tool (else it is not parsed
for them: its text is read anyway)."""
_MARKUP = re.compile(
    r"<\s*/?\s*[\w:.|\-\u2581\uff5c]{0,40}?(?:invoke|tool|mcp|function|server)", re.IGNORECASE
)
"""The opening of tool-invocation markup: `<invoke`, `<invoke`, `<use_mcp_tool`,
`<SERVER_NAME`, `<tool_call`, `<function=`, `<|tool▁call▁begin|>`."""
_ESCAPED_MARKUP = re.compile(r"&lt|&#|\\u003[cC]|%3[cC]|\\x3[cC]")
"""An escaped opening bracket (HTML, JSON, percent, `\\x`)."""
_OPENINGS = re.compile("[<\uff1c\ufe64]")
MARKUP_WINDOW = 96
"""How many characters after an opening bracket are folded to look for markup."""


@dataclass(frozen=True, slots=True)
class ToolRef:
    """A tool call as the fence sees it: its name, the skill a `Skill` call loads, the MCP
    server when it is named beside the tool, other names the call carries (further servers,
    a dispatcher's inner tool), and what else it holds (`held`: its input and fields but its
    result, every key and string of which the fence reads)."""

    tool: str
    skill: str | None = None
    server: str | None = None
    qualifiers: tuple[str, ...] = ()
    held: tuple[Any, ...] = field(default=(), compare=False, repr=False)


def is_skill_tool(tool: str) -> bool:
    """The `Skill` tool, however spelled."""
    return joined(tool) == SKILL_NAME


def call_ref(
    tool: str, arguments: Any = None, servers: Sequence[str] = (), held: Any = None
) -> ToolRef:
    """The reference of a call of `tool` with `arguments` (an object or a JSON string) and
    the servers named beside it; the servers and tools its input names join them. `held`:
    what the fence reads of the call (its arguments when not given)."""
    skill = None
    if is_skill_tool(tool):
        inp = _arguments(arguments, parse=True)
        skill = _skill(inp)
    else:
        inp = _arguments(arguments, parse=False)
    named = [*servers, *server_values(inp), *_tool_values(inp)]
    names = tuple(dict.fromkeys(n for n in named if n.strip()))
    kept = (arguments if held is None else held,)
    if servers:
        return ToolRef(tool, skill, names[0], names[1:], kept)
    return ToolRef(tool, skill, None, names, kept)


def _arguments(value: Any, *, parse: bool) -> Mapping[str, Any]:
    """A call's input as an object: an object as is; a JSON string (a BOM or an encoding
    twice aside) parsed only when it may name a server or a tool (or when `parse`); other
    text as `{"raw": text}`."""
    original = value
    for _ in range(DECODE_DEPTH):
        if isinstance(value, Mapping):
            return value
        if not isinstance(value, str) or not (parse or _KEYED.search(value)):
            return {}
        parsed = _json(value)
        if parsed is None:
            break
        value = parsed
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str):
        return {"raw": value}
    return {"raw": original} if isinstance(original, str) else {}


def _json(text: str) -> Any:
    """A JSON text as the stdlib reads it (NaN too), a BOM or spaces around it aside; None
    when it is not one."""
    body = text.strip().lstrip("\ufeff").strip()
    if not body.startswith(_JSON_START):
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _words(key: Any) -> frozenset[str]:
    return _key_words(key) if isinstance(key, str) else frozenset()


@functools.lru_cache(maxsize=4096)
def _key_words(key: str) -> frozenset[str]:
    return frozenset(tokens(key))


def server_values(block: Mapping[str, Any]) -> list[str]:
    """The servers a mapping names: each string under a key that speaks of a server or a
    namespace, or held by an object (or list) there."""
    return [s for k, v in block.items() if _words(k) & SERVER_WORDS for s in _leaves(v)]


def _tool_values(inp: Mapping[str, Any]) -> list[str]:
    return [s for k, v in inp.items() if _words(k) & TOOL_WORDS for s in _leaves(v)]


def _leaves(value: Any) -> list[str]:
    """The non-empty strings of a value, an object's or a list's one level down."""
    if isinstance(value, str):
        return [value] if value.strip() else []
    inner = value.values() if isinstance(value, Mapping) else value
    if not isinstance(inner, Iterable) or isinstance(value, str | bytes):
        return []
    return [v for v in inner if isinstance(v, str) and v.strip()]


def _skill(inp: Mapping[str, Any]) -> str | None:
    keys = [k for k in inp if isinstance(k, str) and tokens(k)[:1] == (SKILL_WORD,)]
    for key in (*keys, *SKILL_KEYS):
        value = inp.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def call_texts(held: Iterable[Any]) -> Iterator[str]:
    """Every key and string `held` holds, at any depth up to `MAX_DEPTH`."""
    stack: list[tuple[Any, int]] = [(value, 0) for value in held]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            yield value
        elif depth < MAX_DEPTH and isinstance(value, Mapping):
            for key, inner in value.items():
                if isinstance(key, str):
                    yield key
                stack.append((inner, depth + 1))
        elif depth < MAX_DEPTH and isinstance(value, list | tuple):
            stack.extend((inner, depth + 1) for inner in value)


def expanded(text: str, depth: int = DECODE_DEPTH) -> Iterator[str]:
    """A text as the fence reads it: as sent and with its escapes decoded (`variants`), and
    every key and string of the JSON it encodes, decoded in turn (`depth` levels)."""
    for variant in variants(text):
        yield variant
        parsed = _json(variant) if depth > 0 else None
        if parsed is not None:
            for inner in call_texts([parsed]):
                yield from expanded(inner, depth - 1)


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
    (`<command-name>/x</command-name>`) and every line of a user turn (any of its text parts)
    that starts with one (`/x args`)."""
    refs: list[ToolRef] = []
    for m in messages:
        if m.role != "user":
            continue
        if "<command-name>" in m.text:
            refs.extend(ToolRef(SKILL_TOOL, name) for name in _COMMAND_NAME.findall(m.text))
        if "/" in m.text:
            lines = (line.strip() for line in m.text.splitlines())
            refs.extend(
                ToolRef(SKILL_TOOL, line.split(maxsplit=1)[0])
                for line in lines
                if line.startswith("/") and len(line) > 1
            )
    return refs


def joined_refs(raw: Iterable[ToolRef], parsed: Iterable[ToolRef]) -> list[ToolRef]:
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
            ref = markup_ref(value)
            if ref is not None:
                refs.append(ref)
            continue
        if isinstance(value, list):
            stack.extend((v, depth + 1, None) for v in reversed(value))
            continue
        if not isinstance(value, Mapping):
            continue
        call, inner = _call_ref(value, key)
        if call is not None:
            refs.append(call)
        for k, v in value.items():
            if k == inner:  # read as this call: only what it holds is walked
                stack.extend((w, depth + 2, None) for w in v.values() if _walked(w))
            elif _walked(v):
                stack.append((v, depth + 1, k))
    return refs


def _walked(value: Any) -> bool:
    return isinstance(value, list | Mapping) or (isinstance(value, str) and _may_mark(value))


def _may_mark(text: str) -> bool:
    """Whether a text may hold markup (plain, full-width or escaped): else it is not read."""
    return (
        "<" in text
        or "&" in text
        or "%" in text
        or "\\" in text
        or "\uff1c" in text
        or "\ufe64" in text
    )


def markup_ref(text: str) -> ToolRef | None:
    """A text holding tool-invocation markup, read whole as a call (any case, full-width or
    escaped markup too); None for any other text."""
    if not _may_mark(text):
        return None
    found = _MARKUP.search(text) if "<" in text else None
    if found is None and not text.isascii() and _OPENINGS.search(text):
        found = _folded_markup(text)
    escaped = "&lt" in text or "&#" in text or "3c" in text or "3C" in text
    if found is None and escaped and _ESCAPED_MARKUP.search(text):
        found = _MARKUP.search(unescape(text))
    if found is None:
        return None
    return ToolRef(found.group(0).lstrip("</ \t\r\n"), held=(text,))


def _folded_markup(text: str) -> re.Match[str] | None:
    """Markup spelled with characters that fold to it (full-width, zero-width, look-alike
    letters): each opening bracket's next characters, folded, when they are not ASCII."""
    for opening in _OPENINGS.finditer(text):
        window = text[opening.start() : opening.start() + MARKUP_WINDOW]
        if not window.isascii() and (found := _MARKUP.search(fold(window))):
            return found
    return None


def _call_ref(block: Mapping[str, Any], key: str | None) -> tuple[ToolRef | None, str | None]:
    """The call a mapping makes, if it has a call's shape (see the module's docstring), and
    the key of the mapping inside it that names the call (`{"function": {"name"}}`), if one
    does."""
    kind = block.get("type")
    name = next((n for k in NAME_KEYS if isinstance(n := block.get(k), str)), None)
    if name is None:
        tool = block.get("tool")  # hook messages: `{tool_use_id, tool, input}`
        named = isinstance(tool, str) and ("input" in block or "tool_use_id" in block)
        name = tool if named else None
    servers = server_values(block)
    if name is None:
        inner = next((k for k in CALL_KEYS if _named(block.get(k))), None)
        if inner is not None:
            call: Mapping[str, Any] = block[inner]
            found = next((c[k] for c in (call, block) for k in ARGUMENT_KEYS if k in c), None)
            servers = [*server_values(call), *servers]
            return call_ref(call["name"], found, servers, _held(block)), inner
        if servers and _text(kind) in CALL_TYPES:
            return ToolRef("", None, servers[0], tuple(servers[1:]), (_held(block),)), None
        return None, None
    called = (
        key in CALL_KEYS
        or _call_type(kind)
        or _text(block.get("role")) in RESULT_ROLES
        or any(k in block for k in ARGUMENT_KEYS)
        or bool(servers)
    )
    if not called:
        return None, None
    arguments = next((block[k] for k in ARGUMENT_KEYS if k in block), None)
    return call_ref(name, arguments, servers, _held(block)), None


def _held(block: Mapping[str, Any]) -> dict[str, Any]:
    """What the fence reads of a call: everything but its result."""
    return {k: v for k, v in block.items() if k not in RESULT_KEYS}


def _call_type(kind: Any) -> bool:
    return isinstance(kind, str) and (kind in CALL_TYPES or bool(_words(kind) & CALL_WORDS))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _named(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("name"), str)
