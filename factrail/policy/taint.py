"""The taint fence: sessions that touched fenced tools (e-mail, by default) never reach a remote
judge, and stay fenced for the rest of the session (sticky taint).

One call model serves every wire format (`factrail.policy.calls`): the calls of the engine's
parse joined with every call-shaped mapping of the decoded body, and every text holding
tool-invocation markup. One normalisation serves every name and text
(`factrail.policy.names`): NFKC, format characters removed, look-alike letters read as Latin
ones, case and `-`/`_` folded, escapes decoded, the separators `__ . / _` understood. A fenced
tool entry names an MCP server (`mcp__<server>__`, `<server>__`, or the bare server name) with
an optional tool prefix after it, or a plain tool-name prefix; a fenced skill is an entry too.

The rule: a call is fenced when an entry's tokens occur, where a token starts, in its name, its
server (named beside it or in its input) with its name, or in any key or string it holds but
its result (decoded: JSON-encoded strings, escapes); or when one of its texts holds an entry's
server and one its tool prefix. A shape or key the parser does not know thus makes the fence
read more, never less: a false match only fences a session. A `Skill` call (any spelling) is
fenced by its skill in any key (`skill`, `skill_name`, `name`, `command`), bare, as a slash
command (`/email-search args`), qualified (`plugin:email-search`, `email-search@market`) or
as a display name (`Email Search`); so is a user turn with a line that starts with one.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from factrail.policy.calls import (
    SKILL_TOOL,
    ToolRef,
    body_refs,
    call_texts,
    command_refs,
    expanded,
    is_skill_tool,
    tool_refs,
)
from factrail.policy.names import Entry, Spelled, may_hold, skill_text, variants

__all__ = [
    "DEFAULT_TAINT_SKILLS",
    "DEFAULT_TAINT_TOOLS",
    "EARLIER_SAMPLE",
    "SKILL_TOOL",
    "TAINT_SCHEMA",
    "TaintFence",
    "TaintScan",
    "ToolRef",
    "body_refs",
    "command_refs",
    "holds_taint",
    "merge_taint",
    "taint_write",
    "tool_refs",
]

DEFAULT_TAINT_TOOLS = ("mcp__email-gateway__", "mcp__claude_ai_Gmail__")
DEFAULT_TAINT_SKILLS = ("email-search",)
EARLIER_SAMPLE = "(earlier in this session)"
SAMPLE_SIZE = 3
TAINT_SCHEMA = 2
"""The taint record's schema version (`v`), written by `taint_write`; the record is kept as
written wherever it is stored (a session record, the plugin's store).

1. No version: `{tainted, count, sample, at}`; it counts only when `tainted` is JSON true.
2. `v`; otherwise as version 1.

A record is written only for a tainted session, so one of a version this reader does not know
counts as tainted (`holds_taint`): the fence never reads a newer writer's record as clean."""
KNOWN_VERSIONS = (1, TAINT_SCHEMA)


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


@dataclass(frozen=True)
class TaintFence:
    """Fenced tool entries and skill names, as configured (matching normalises them; the
    parsed forms are derived once per fence, not per call)."""

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
        """Folded fragments one of which any fenced call's body must hold once folded (see
        `names.body_view`): each entry's server part, each skill name."""
        parts = [e.needle for e in self._entries]
        return tuple(dict.fromkeys(p for p in parts if p))

    @functools.cached_property
    def _byte_needles(self) -> tuple[bytes, ...] | None:
        """The needles as bytes; None when one is not ASCII (the byte check cannot fold it)."""
        needles = self.needles
        return tuple(n.encode() for n in needles) if all(n.isascii() for n in needles) else None

    def may_call(self, body: bytes) -> bool:
        """Whether a raw JSON body may hold a fenced call (False only when it cannot): its
        text folded as names are (`\\u` escapes decoded, NFKC, format characters and every
        other non-letter dropped, case folded) holds a needle (`names.may_hold`). A body that
        is not UTF-8 may hold anything."""
        needles = self._byte_needles
        if needles is None:
            return True
        if not needles:
            return False
        return may_hold(body, needles)

    @functools.cached_property
    def _entries(self) -> tuple[Entry, ...]:
        """The tool entries, then the skills as tool names (a client may expose a skill as a
        tool of its name)."""
        parsed = (Entry.parse(name) for name in (*self.tools, *self.skills))
        return tuple(dict.fromkeys(e for e in parsed if e is not None))

    @functools.cached_property
    def _split(self) -> tuple[tuple[str, str], ...]:
        """The server part and tool prefix of each entry that names a tool."""
        return tuple(e.parts for e in self._entries if e.server < len(e.text))

    @functools.cached_property
    def _part_needles(self) -> tuple[bytes, ...] | None:
        """Every entry's server part and tool prefix as bytes (what a text must hold to take
        part in a match); None when one is not ASCII."""
        parts = {p for e in self._entries for p in e.parts if p}
        return tuple(p.encode() for p in parts) if all(p.isascii() for p in parts) else None

    @functools.cached_property
    def _skills(self) -> frozenset[str]:
        return frozenset(s for s in map(skill_text, self.skills) if s)

    def skill_taints(self, name: str | None) -> bool:
        """A fenced skill, however it is spelled (case, `-`/`_`, slash, qualified, with a
        marketplace, as a display name): its tokens where a token of `name` starts."""
        if not name:
            return False
        spelled = [Spelled.of(v) for v in variants(name)]
        return any(s.holds(skill) for s in spelled for skill in self._skills)

    def taints(
        self,
        tool: str,
        skill: str | None = None,
        server: str | None = None,
        qualifiers: tuple[str, ...] = (),
    ) -> bool:
        """A call of a fenced server or tool, or a `Skill` call of a fenced skill: `tool`, or
        an inner tool among `qualifiers`, alone or after `server` or another qualifier."""
        if skill is not None and is_skill_tool(tool) and self.skill_taints(skill):
            return True
        return self._matched(self._spellings(tool, server, qualifiers))

    def ref_taints(self, ref: ToolRef) -> bool:
        """Whether a call is fenced: by its names (`taints`), or by anything it holds."""
        if self.taints(ref.tool, ref.skill, ref.server, ref.qualifiers):
            return True
        if not ref.held:
            return False
        names = (ref.tool, ref.server or "", *ref.qualifiers)
        texts = [t for t in call_texts(ref.held) if t]
        if not texts or not self._may_match(names, texts):
            return False
        needles = self._part_needles
        spelled = [
            Spelled.of(text)
            for raw in texts
            if needles is None or may_hold(_bytes(raw), needles)
            for text in expanded(raw)
        ]
        return self._matched(spelled + self._spellings(ref.tool, ref.server, ref.qualifiers))

    def _may_match(self, names: tuple[str, ...], texts: list[str]) -> bool:
        """The byte pre-check over everything a call holds: some entry's server part."""
        needles = self._byte_needles
        return needles is None or may_hold(_bytes("\x00".join((*names, *texts))), needles)

    def _spellings(
        self, tool: str, server: str | None, qualifiers: tuple[str, ...]
    ) -> list[Spelled]:
        names = [v for n in (tool, *qualifiers) if n for v in variants(n)]
        servers = [v for s in (server, *qualifiers) if s for v in variants(s)]
        spelled = [Spelled.of(n) for n in names]
        spelled += [Spelled.of(n, s) for s in servers for n in (*names, "")]
        return spelled

    def _matched(self, spelled: list[Spelled]) -> bool:
        """An entry where a token of one spelling starts; or, for an entry naming a tool, its
        server in one spelling and its tool prefix in one."""
        if any(e.matches(name) for name in spelled for e in self._entries):
            return True
        return any(
            any(s.holds(server) for s in spelled) and any(s.holds(tool) for s in spelled)
            for server, tool in self._split
        )

    def scan(self, refs: Iterable[ToolRef]) -> TaintScan:
        """Count every fenced call, pinned or not."""
        hits = [r.tool for r in refs if self.ref_taints(r)]
        sample = tuple(dict.fromkeys(hits))[:SAMPLE_SIZE]
        return TaintScan(bool(hits), len(hits), sample)


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for n in names if n))


def _version(record: Mapping[str, Any]) -> int | None:
    """The record's version: 1 without one; None when it is not an integer."""
    version = record.get("v", 1)
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def holds_taint(record: Any) -> bool:
    """Whether a stored record says its session is tainted: an object of a known version
    whose `tainted` is JSON true, or any object of a version this reader does not know."""
    if not isinstance(record, Mapping):
        return False
    if _version(record) not in KNOWN_VERSIONS:
        return True
    return record.get("tainted") is True


def merge_taint(record: Any, scan: TaintScan) -> TaintScan:
    """A clean scan of a session with a stored taint stays tainted, and is marked sticky."""
    if scan.tainted or not holds_taint(record):
        return scan
    if _version(record) not in KNOWN_VERSIONS:
        return TaintScan(True, 1, (EARLIER_SAMPLE,), sticky=True)
    number = record.get("count")
    count = int(number) if isinstance(number, int | float) and 1 <= number < 2**63 else 1
    stored = record.get("sample")
    sample = tuple(str(s) for s in stored[:SAMPLE_SIZE]) if isinstance(stored, list) else ()
    return TaintScan(True, count, sample or (EARLIER_SAMPLE,), sticky=True)


def taint_write(record: Any, scan: TaintScan, now_ms: int) -> dict[str, Any] | None:
    """The record to store on the first tainted scan; none once stored (the first `at` stays)."""
    if not scan.tainted or holds_taint(record):
        return None
    return {
        "v": TAINT_SCHEMA,
        "tainted": True,
        "count": scan.count,
        "sample": list(scan.sample),
        "at": now_ms,
    }
