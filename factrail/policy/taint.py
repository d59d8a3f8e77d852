"""The taint fence: sessions that touched fenced tools (e-mail, by default) never reach a remote
judge, and stay fenced for the rest of the session (sticky taint).

One matcher serves every wire format. Names are compared folded: case-folded, `-` and `_` alike.
A fenced tool entry names an MCP server (`mcp__<server>__`, `<server>__`, or the bare server
name) with an optional tool prefix after it, or a plain tool-name prefix. A call's server is read
wherever the formats put it: inside the name (`mcp__<server>__<tool>`, Codex and Gemini's
`<server>__<tool>`, Claude Code's plugin-qualified `mcp__plugin_<plugin>_<server>__<tool>`) or
beside it (Anthropic `mcp_tool_use.server_name`, Responses `mcp_call.server_label`). A skill is
fenced when a `Skill` call (any case) names it in `skill`, `name` or `command`, bare, as a slash
command (`/email-search args`) or plugin-qualified (`plugin:email-search`), when a user turn
expands it as a slash command, or when a client exposes it as a tool of that name.

The gateway scans the *decoded* request body (`body_refs`), so JSON `\\u` escapes, content
blocks the engine does not model and every provider's call shape are seen alike; the CLI and
the evaluation scan the engine's messages (`tool_refs`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from factrail.core.model import Message

DEFAULT_TAINT_TOOLS = ("mcp__email-gateway__", "mcp__claude_ai_Gmail__")
DEFAULT_TAINT_SKILLS = ("email-search",)
SKILL_TOOL = "Skill"
EARLIER_SAMPLE = "(earlier in this session)"
SAMPLE_SIZE = 3
MCP_PREFIX = "mcp__"
SEPARATOR = "__"
SKILL_KEYS = ("skill", "name", "command")
"""Where a `Skill` call names its skill (Claude Code sends `skill`; others `name`, `command`)."""
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
    }
)
"""Content blocks and items that are calls, in every supported wire format."""
NOT_CALLS = frozenset({"tools", "tool_choice", "mcp_servers", "functions"})
"""Top-level body fields that declare tools without calling them."""
MAX_DEPTH = 64
"""Body nesting the scan follows (the wire formats nest calls a few levels deep)."""
_PRINTABLE_ESCAPE = re.compile(rb"\\u00[2-7][0-9a-fA-F]")
"""A JSON escape of a printable ASCII char (a name can hide behind one; an escaped control
char, as in the ANSI colours of tool outputs, cannot)."""
_COMMAND_NAME = re.compile(r"<command-name>\s*([^<>]+?)\s*</command-name>")
"""How Claude Code records a skill or command expanded by a slash command in a user turn."""


def fold(name: str) -> str:
    """A name as the fence compares it: case-folded, `-` as `_`, outer spaces dropped."""
    return name.strip().casefold().replace("-", "_")


def skill_name(value: str) -> str:
    """The folded skill a `Skill` argument or slash command names: its first word, without a
    leading `/` and without a plugin qualifier (`plugin:skill`, `plugin/skill`)."""
    words = value.strip().split(maxsplit=1)
    word = words[0] if words else ""
    return fold(re.split(r"[:/]", word.lstrip("/"))[-1])


def split_server(name: str) -> tuple[str | None, str]:
    """`(server, tool)` of a folded tool name: `mcp__s__t` and `s__t` give `("s", "t")`; a name
    without a server part gives `(None, name)`."""
    mcp = name.startswith(MCP_PREFIX)
    server, sep, tool = (name[len(MCP_PREFIX) :] if mcp else name).partition(SEPARATOR)
    if sep or mcp:
        return server, tool
    return None, name


@dataclass(frozen=True, slots=True)
class ToolRef:
    """A tool call as the fence sees it: its name, the skill a `Skill` call loads, and the MCP
    server when the wire format names it beside the tool."""

    tool: str
    skill: str | None = None
    server: str | None = None


@dataclass(frozen=True, slots=True)
class TaintScan:
    """How many fenced calls a transcript holds, whether the taint is remembered (sticky), and
    why the session cannot be proven clean when it cannot."""

    tainted: bool = False
    count: int = 0
    sample: tuple[str, ...] = ()
    """Up to three distinct fenced tool names, first seen first."""
    sticky: bool = False
    unproven: str | None = None
    """Why factrail cannot prove an untainted session clean (the store failed, the transcript
    continues one not seen from its start): judged as if tainted."""

    @property
    def detail(self) -> str:
        """The verdict's detail: `"<count> call(s): <sample>"`, or why it is unproven."""
        if not self.tainted and self.unproven:
            return self.unproven
        return f"{self.count} call(s): {', '.join(self.sample)}"

    @property
    def fenced(self) -> bool:
        """Tainted, or not proven clean: only a declared-local judge may see it."""
        return self.tainted or self.unproven is not None


@dataclass(frozen=True, slots=True)
class _Entry:
    """One fenced tool entry, folded: a server (with a tool prefix) or a plain name prefix."""

    server: str | None
    prefix: str

    @classmethod
    def parse(cls, entry: str) -> _Entry | None:
        folded = fold(entry)
        if not folded.strip("_"):
            return None
        server, tool = split_server(folded)
        if server is not None and not server:
            return None
        return cls(server, tool)

    def matches(self, server: str | None, tool: str) -> bool:
        if self.server is None:  # a bare name: a tool-name prefix, or a server's name
            return tool.startswith(self.prefix) or _same_server(server, self.prefix)
        return _same_server(server, self.server) and tool.startswith(self.prefix)


def _same_server(server: str | None, fenced: str) -> bool:
    """Whether a call's server is the fenced one, plugin-qualified or not."""
    return server is not None and (server == fenced or server.endswith("_" + fenced))


@dataclass(frozen=True)
class TaintFence:
    """Fenced tool entries and skill names, as configured (matching folds them; the folded
    forms are derived once per fence, not per call)."""

    tools: tuple[str, ...] = DEFAULT_TAINT_TOOLS
    skills: tuple[str, ...] = DEFAULT_TAINT_SKILLS

    @classmethod
    def configured(
        cls, tools: Iterable[str], skills: Iterable[str], *, replace_defaults: bool = False
    ) -> TaintFence:
        """The operator's entries added to the defaults (replacing them only when asked)."""
        if replace_defaults:
            return cls(_names(tools), _names(skills))
        return cls(_names((*DEFAULT_TAINT_TOOLS, *tools)), _names((*DEFAULT_TAINT_SKILLS, *skills)))

    @property
    def names(self) -> tuple[str, ...]:
        """Every fenced entry and skill name, as configured."""
        return (*self.tools, *self.skills)

    @functools.cached_property
    def needles(self) -> tuple[str, ...]:
        """Folded fragments one of which any fenced call's decoded body must contain (for a
        byte pre-check over a folded body): each server or name prefix, each skill name."""
        parts = [e.server or e.prefix for e in self._entries] + list(self._skills)
        return tuple(dict.fromkeys(p for p in parts if p))

    @functools.cached_property
    def _byte_needles(self) -> tuple[bytes, ...] | None:
        """The needles as bytes; None when one is not ASCII (the byte check cannot fold it)."""
        needles = self.needles
        return tuple(n.encode() for n in needles) if all(n.isascii() for n in needles) else None

    def may_call(self, body: bytes) -> bool:
        """Whether a raw JSON body may hold a fenced call (False only when it cannot): its
        decoded text, folded (ASCII case, `-` as `_`), contains a needle. A body whose `\\u`
        escapes could spell a needle (escapes of printable ASCII) is decoded first; one that
        cannot be decoded may hold anything."""
        needles = self._byte_needles
        if needles is None:
            return True
        if not needles:
            return False
        text = body
        if _PRINTABLE_ESCAPE.search(body):
            try:
                text = orjson.dumps(orjson.loads(body))
            except (orjson.JSONDecodeError, orjson.JSONEncodeError, RecursionError):
                return True
        folded = text.lower().replace(b"-", b"_")
        return any(n in folded for n in needles)

    @functools.cached_property
    def _entries(self) -> tuple[_Entry, ...]:
        return tuple(e for e in map(_Entry.parse, self.tools) if e is not None)

    @functools.cached_property
    def _skills(self) -> frozenset[str]:
        return frozenset(s for s in map(skill_name, self.skills) if s)

    def skill_taints(self, name: str | None) -> bool:
        """A fenced skill, however it is spelled (folded, slash, plugin-qualified)."""
        return bool(name) and skill_name(name or "") in self._skills

    def taints(self, tool: str, skill: str | None = None, server: str | None = None) -> bool:
        """A call of a fenced server or tool, or a `Skill` call of a fenced skill."""
        folded = fold(tool)
        if folded == fold(SKILL_TOOL) and self.skill_taints(skill):
            return True
        if server is not None:
            named: str | None = fold(server) or None
        else:
            named, folded = split_server(folded)
        if not folded and named is None:
            return False
        if any(e.matches(named, folded) for e in self._entries):
            return True
        return named is None and folded in self._skills

    def scan(self, refs: Iterable[ToolRef]) -> TaintScan:
        """Count every fenced call, pinned or not."""
        hits = [ref.tool for ref in refs if self.taints(ref.tool, ref.skill, ref.server)]
        sample = tuple(dict.fromkeys(hits))[:SAMPLE_SIZE]
        return TaintScan(bool(hits), len(hits), sample)


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for n in names if n))


def tool_refs(messages: Sequence[Message]) -> list[ToolRef]:
    """Every tool use of the engine's messages (a `Skill` call's skill from any of its keys),
    plus every skill a user turn expanded as a slash command."""
    refs = command_refs(messages)
    for m in messages:
        for use in m.tool_uses:
            refs.append(_ref(use.tool, use.input, None))
    return refs


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


def body_refs(body: Any) -> list[ToolRef]:
    """Every call a decoded request body holds, in any supported wire format: content blocks and
    items whose `type` is a call, and chat `function` calls (with `arguments`); declarations
    (`tools`) are not calls. Walks iteratively, at most `MAX_DEPTH` deep."""
    refs: list[ToolRef] = []
    if isinstance(body, Mapping):
        stack: list[tuple[Any, int]] = [(v, 1) for k, v in body.items() if k not in NOT_CALLS]
    else:
        stack = [(body, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            continue
        if isinstance(value, list):
            stack.extend((v, depth + 1) for v in reversed(value))
            continue
        if not isinstance(value, Mapping):
            continue
        ref = _call_ref(value)
        if ref is not None:
            refs.append(ref)
        stack.extend((v, depth + 1) for v in value.values() if isinstance(v, list | Mapping))
    return refs


def _call_ref(block: Mapping[str, Any]) -> ToolRef | None:
    """The call a block makes, if it is one."""
    function = block.get("function")
    if isinstance(function, Mapping) and "arguments" in function:
        name = function.get("name")
        if isinstance(name, str):
            return _ref(name, function.get("arguments"), None)
    if block.get("type") not in CALL_TYPES:
        return None
    name = block.get("name")
    server = block.get("server_name") or block.get("server_label")
    server = server if isinstance(server, str) else None
    if not isinstance(name, str):
        return ToolRef("", None, server) if server else None
    arguments = block["input"] if "input" in block else block.get("arguments")
    return _ref(name, arguments, server)


def _ref(tool: str, arguments: Any, server: str | None) -> ToolRef:
    skill = None
    if fold(tool) == fold(SKILL_TOOL):
        skill = _skill_argument(arguments)
    return ToolRef(tool, skill, server)


def _skill_argument(arguments: Any) -> str | None:
    """The skill a `Skill` call names, from its input object or JSON arguments string."""
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return arguments or None
    if not isinstance(arguments, Mapping):
        return None
    for key in SKILL_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _sticky(record: Any) -> bool:
    """A stored record counts only as an object whose `tainted` is JSON true."""
    return isinstance(record, Mapping) and record.get("tainted") is True


def merge_taint(record: Any, scan: TaintScan) -> TaintScan:
    """A clean scan of a session with a stored taint stays tainted, and is marked sticky."""
    if scan.tainted or not _sticky(record):
        return scan
    number = record.get("count")
    count = int(number) if isinstance(number, int | float) and 1 <= number < 2**63 else 1
    stored = record.get("sample")
    sample = tuple(str(s) for s in stored[:SAMPLE_SIZE]) if isinstance(stored, list) else ()
    return TaintScan(True, count, sample or (EARLIER_SAMPLE,), sticky=True)


def taint_write(record: Any, scan: TaintScan, now_ms: int) -> dict[str, Any] | None:
    """The record to store on the first tainted scan; none once stored (the first `at` stays)."""
    if not scan.tainted or _sticky(record):
        return None
    return {"tainted": True, "count": scan.count, "sample": list(scan.sample), "at": now_ms}
