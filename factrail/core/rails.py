"""The fact rails: the shapes a reduced tool result takes at each tier (`render` picks one).

A reproducible read becomes a one-line re-run note; a read the agent has quoted from is reduced
as an observation instead, keeping what its note would have carried. An observation keeps its
head, its fact lines and its tail around one mark line (the stub); small or fact-dense
observations stay whole. Tiers go from loose (0) to strict (3); past the hard line, last resort
keeps only fact lines, then evicts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from factrail.core.facts import Score, fact_lines, fact_score, facts_reach
from factrail.core.marks import (
    EVICTED_DETAIL,
    FACTS_ONLY_DETAIL,
    RERUN_DETAIL,
    mark_lines,
    note,
    stub_detail,
)
from factrail.core.readnotes import read_extras
from factrail.core.units import units

FACT_HEAD_CHARS = 200
FACT_TAIL_CHARS = 120
FACT_BUDGET_CHARS = 360
ERROR_KEEP_CHARS = 2000
RERUN_KEEP_CHARS = 160
"""A read this short stays as it is: the note would not be shorter."""


@dataclass(frozen=True, slots=True)
class RailTier:
    """What an observation keeps at one tier (`dense_keep` 0 turns the dense rule off)."""

    small: int
    share: float
    read_keep: int
    dense_keep: int
    dense_share: float


TIERS = (
    RailTier(small=6000, share=0.30, read_keep=3000, dense_keep=32000, dense_share=0.5),
    RailTier(small=6000, share=0.30, read_keep=0, dense_keep=32000, dense_share=0.5),
    RailTier(small=3000, share=0.20, read_keep=0, dense_keep=0, dense_share=1.0),
    RailTier(small=0, share=0.10, read_keep=0, dense_keep=0, dense_share=1.0),
)
LAST_RESORT_TIER = 4


def rerun_note(text: str, tool_use_id: str, extras: Sequence[str] | None = None) -> str:
    """The note that replaces a reproducible read (short reads stay as they are).

    It keeps, on lines after the mark, the files a search named or the ids a read held
    (`factrail.core.readnotes`; `extras`: its `read_extras`, when already found).
    """
    if len(text) <= RERUN_KEEP_CHARS:
        return text
    if extras is None:
        extras = read_extras(text)
    return "\n".join([note(len(text), RERUN_DETAIL, tool_use_id), *extras])


def with_read_extras(lines: list[str], extras: Sequence[str]) -> list[str]:
    """A quoted read's stub lines: its fact lines, then what its re-run note would have
    carried (its `read_extras`) that they do not already hold."""
    return lines + [x for x in extras if x not in lines]


@dataclass(frozen=True, slots=True)
class Stub:
    """Where a stub cuts its text: `text[:head_end]`, facts from the middle, `text[tail_start:]`."""

    head_end: int
    tail_start: int
    budget: int


def head_keep(is_error: bool, head_chars: int) -> int:
    """The head an observation keeps: errors keep at least 2000 chars."""
    return max(head_chars, ERROR_KEEP_CHARS) if is_error else head_chars


def stub_cuts(text: str, keep: int) -> tuple[int, int]:
    """`(head_end, tail_start)`: the head ends at a newline past half of `keep`, the tail starts
    after the first newline of the last 120 chars."""
    n = len(text)
    nl = text.rfind("\n", 0, keep + 1)
    head_end = nl if nl >= 0 and 2 * nl > keep else keep
    nl = text.find("\n", n - FACT_TAIL_CHARS)
    tail_start = nl + 1 if nl >= 0 and nl + 1 < n else n - FACT_TAIL_CHARS
    return head_end, tail_start


UnitsOf = Callable[[str], Sequence[str]]
"""`units`, or a memo of it shared across one compaction."""


def stays_whole(
    text: str, keep: int, rails: RailTier, score: Score = fact_score, units_of: UnitsOf = units
) -> bool:
    """Small, or a dense dump whose fact lines are most of it."""
    n = len(text)
    if n <= max(rails.small, keep + 2 * FACT_TAIL_CHARS):
        return True
    return n <= rails.dense_keep and facts_reach(text, rails.dense_share, score, units_of)


def stub_layout(
    text: str,
    is_error: bool,
    rails: RailTier,
    head_chars: int,
    score: Score = fact_score,
    units_of: UnitsOf = units,
) -> Stub | None:
    """The stub cut of an observation at `rails`, or None when it stays whole."""
    keep = head_keep(is_error, head_chars)
    if stays_whole(text, keep, rails, score, units_of):
        return None
    head_end, tail_start = stub_cuts(text, keep)
    return Stub(head_end, tail_start, max(FACT_BUDGET_CHARS, int(len(text) * rails.share)))


def render_stub(
    text: str, stub: Stub, lines: list[str], *, is_error: bool, tool_use_id: str
) -> str:
    """Head, the mark line, the fact lines and `…`, then the tail."""
    mark = note(stub.tail_start - stub.head_end, stub_detail(is_error, len(lines)), tool_use_id)
    facts = "\n".join(lines) + "\n…\n" if lines else ""
    return f"{text[: stub.head_end]}\n{mark}\n{facts}{text[stub.tail_start :]}"


def facts_only(text: str, tool_use_id: str) -> str:
    """Last resort, pass 1: only the fact lines (a quarter of the text) and the mark lines."""
    kept = fact_lines(text, len(text) // 4)
    marks = mark_lines(text) or [note(len(text), FACTS_ONLY_DETAIL, tool_use_id)]
    out = "\n".join(kept + marks)
    return out if len(out) < len(text) else text


def evicted(text: str, tool_use_id: str) -> str:
    """Last resort, pass 2: one note line in place of the whole result."""
    out = note(len(text), EVICTED_DETAIL, tool_use_id)
    return out if len(out) < len(text) else text
