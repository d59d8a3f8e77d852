"""The taint fence: sessions that touched fenced tools (e-mail, by default) never reach a remote
judge, and stay fenced for the rest of the session (sticky taint)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from factrail.core.model import Message

DEFAULT_TAINT_TOOLS = ("mcp__email-gateway__", "mcp__claude_ai_Gmail__")
DEFAULT_TAINT_SKILLS = ("email-search",)
SKILL_TOOL = "Skill"
EARLIER_SAMPLE = "(earlier in this session)"
SAMPLE_SIZE = 3
_COMMAND_NAME = re.compile(r"<command-name>/?([^<>\s]+)</command-name>")
"""How Claude Code records a skill or command expanded by a slash command in a user turn."""


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class ToolRef:
    """A tool call as the fence sees it: the tool name and, for `Skill`, the skill loaded."""

    tool: str
    skill: str | None = None


@dataclass(frozen=True, slots=True)
class TaintScan:
    """How many fenced calls a transcript holds, and whether the taint is remembered (sticky)."""

    tainted: bool = False
    count: int = 0
    sample: tuple[str, ...] = ()
    """Up to three distinct fenced tool names, first seen first."""
    sticky: bool = False

    @property
    def detail(self) -> str:
        """`"<count> call(s): <sample>"`, the verdict's detail for a fenced session."""
        return f"{self.count} call(s): {', '.join(self.sample)}"


@dataclass(frozen=True, slots=True)
class TaintFence:
    """Fenced tool-name prefixes and skill names."""

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
        """Every fenced prefix and skill name."""
        return (*self.tools, *self.skills)

    def skill_taints(self, name: str | None) -> bool:
        """A fenced skill by exact name or plugin-qualified (`plugin:<skill>`)."""
        if not name:
            return False
        return any(s and (name == s or name.endswith(":" + s)) for s in self.skills)

    def taints(self, tool: str, skill: str | None = None) -> bool:
        """A tool starting with a fenced prefix (anchored), or a `Skill` call of a fenced skill."""
        if any(prefix and tool.startswith(prefix) for prefix in self.tools):
            return True
        return tool == SKILL_TOOL and self.skill_taints(skill)

    def scan(self, refs: Iterable[ToolRef]) -> TaintScan:
        """Count every fenced call, pinned or not."""
        hits = [ref.tool for ref in refs if self.taints(ref.tool, ref.skill)]
        sample = tuple(dict.fromkeys(hits))[:SAMPLE_SIZE]
        return TaintScan(bool(hits), len(hits), sample)


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for n in names if n))


def tool_refs(messages: Sequence[Message]) -> list[ToolRef]:
    """Every tool use (a `Skill` call's skill from `input.skill`, else `input.name`), plus every
    skill a user turn expanded as a slash command, as a `Skill` reference."""
    refs: list[ToolRef] = []
    for m in messages:
        if m.role == "user" and "<command-name>" in m.text:
            refs.extend(ToolRef(SKILL_TOOL, name) for name in _COMMAND_NAME.findall(m.text))
        for use in m.tool_uses:
            skill = None
            if use.tool == SKILL_TOOL:
                skill = _text(use.input.get("skill")) or _text(use.input.get("name"))
            refs.append(ToolRef(use.tool, skill))
    return refs


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
