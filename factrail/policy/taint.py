"""The taint fence: sessions that touched fenced tools (e-mail, by default) never reach a remote
judge, and stay fenced for the rest of the session (sticky taint)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from factrail.core.model import Message
from factrail.policy.coerce import finite_number, js_string
from factrail.policy.options import DEFAULT_TAINT_SKILLS, DEFAULT_TAINT_TOOLS, PolicyOptions

SKILL_TOOL = "Skill"
EARLIER_SAMPLE = "(earlier in this session)"
SAMPLE_SIZE = 3
_COMMAND_NAME = re.compile(r"<command-name>/?([^<>\s]+)</command-name>")
"""How Claude Code records a skill or command expanded by a slash command in a user turn."""


def _scalar_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return js_string(value)
    return None


@dataclass(frozen=True, slots=True)
class ToolRef:
    """A tool call as the fence sees it: the tool name and, for `Skill`, the skill loaded."""

    tool: str
    skill: str | None = None

    @classmethod
    def from_json(cls, value: Any) -> ToolRef:
        """Lenient: scalars read as their text; any other `tool` is `""` (which taints nothing)."""
        if not isinstance(value, Mapping):
            return cls("")
        return cls(_scalar_text(value.get("tool")) or "", _scalar_text(value.get("skill")))


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

    def to_json(self) -> dict[str, Any]:
        """Exactly `{"tainted","count","sample","sticky"}`."""
        return {
            "tainted": self.tainted,
            "count": self.count,
            "sample": list(self.sample),
            "sticky": self.sticky,
        }


@dataclass(frozen=True, slots=True)
class TaintFence:
    """Fenced tool-name prefixes and skill names."""

    tools: tuple[str, ...] = DEFAULT_TAINT_TOOLS
    skills: tuple[str, ...] = DEFAULT_TAINT_SKILLS

    @classmethod
    def from_options(cls, options: PolicyOptions) -> TaintFence:
        return cls(options.taint_tools, options.taint_skills)

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


DEFAULT_FENCE = TaintFence()


def taints(tool: str, skill: str | None = None, fence: TaintFence = DEFAULT_FENCE) -> bool:
    """Whether one call is fenced (see `TaintFence.taints`)."""
    return fence.taints(tool, skill)


def skill_taints(name: str | None, fence: TaintFence = DEFAULT_FENCE) -> bool:
    """Whether a skill name is fenced (see `TaintFence.skill_taints`)."""
    return fence.skill_taints(name)


def scan_taint(refs: Iterable[ToolRef], fence: TaintFence = DEFAULT_FENCE) -> TaintScan:
    """The taint scan of a transcript's tool references."""
    return fence.scan(refs)


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
                skill = _scalar_text(use.input.get("skill")) or _scalar_text(use.input.get("name"))
            refs.append(ToolRef(use.tool, skill))
    return refs


def taint_key(session: str) -> str:
    """The session-store key of a session's sticky taint record."""
    return f"taint:{session}"


def sticky_tainted(record: Any) -> bool:
    """A stored record counts only as an object whose `tainted` is JSON true."""
    return isinstance(record, Mapping) and record.get("tainted") is True


def merge_taint(record: Any, scan: TaintScan) -> TaintScan:
    """A clean scan of a session with a stored taint stays tainted, and is marked sticky."""
    if scan.tainted or not sticky_tainted(record):
        return scan
    number = finite_number(record.get("count"))
    count = math.floor(number) if number is not None and number >= 1 else 1
    stored = record.get("sample")
    sample = tuple(js_string(s) for s in stored[:SAMPLE_SIZE]) if isinstance(stored, list) else ()
    return TaintScan(True, count, sample or (EARLIER_SAMPLE,), sticky=True)


def taint_write(record: Any, scan: TaintScan, now_ms: int) -> dict[str, Any] | None:
    """The record to store on the first tainted scan; none once stored (the first `at` stays)."""
    if not scan.tainted or sticky_tainted(record):
        return None
    return {"tainted": True, "count": scan.count, "sample": list(scan.sample), "at": now_ms}
