"""What a compaction learns about a session's texts, kept for the next compaction of it.

Every entry is a pure function of the texts (and constants) it is keyed by, so a compaction with
a warm `Analysis` gives exactly what a cold one gives, only sooner. A session resends its history
every turn: by the turn that crosses the soft line, a proxy that prepared each result as it first
arrived (`factrail.core.apply.prepare`) only has the newest results left to analyse, plus the
per-turn work (token values, which shift as results age; escalation; pooling).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from factrail.core.candidate_tokens import TokenScan, TokenSets
from factrail.core.facts import FactScores

if TYPE_CHECKING:
    from factrail.core.cover import Middle
    from factrail.core.rails import Stub

MAX_MEMO_ENTRIES = 200_000
"""Past this many units or tokens, a unit- or token-keyed memo starts over (a bound on memory
for a long session; the result-keyed entries follow the live transcript instead)."""


@dataclass(slots=True)
class Analysis:
    """Memos for one session's compactions (one compaction at a time uses it)."""

    score: FactScores = field(default_factory=FactScores)
    tokens: TokenSets = field(default_factory=TokenSets)
    own: dict[str, float] = field(default_factory=dict)
    """The token-only terms of a token's value."""
    spans: dict[str, tuple[tuple[int, int, bool], ...]] = field(default_factory=dict)
    scans: dict[str, TokenScan] = field(default_factory=dict)
    layouts: dict[tuple[str, bool, int, int], Stub | None] = field(default_factory=dict)
    """`(text, is_error, tier, head_chars)` → the stub cut (None: the text stays whole)."""
    middles: dict[tuple[str, int, int], tuple[Middle, set[str]]] = field(default_factory=dict)
    """`(text, head_end, tail_start)` → the middle prepared under no values, and the candidate
    tokens to value."""
    facts: dict[str, frozenset[str]] = field(default_factory=dict)
    """A result's or a render's fact tokens."""
    notes: dict[tuple[str, str], str] = field(default_factory=dict)
    """`(text, tool_use_id)` → the re-run note."""
    files: dict[str, str] = field(default_factory=dict)
    """A read's `files:` line (`readnotes.files_line`; `` when it names none)."""
    extras: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """What a read's re-run note carries after its mark (`readnotes.read_extras`)."""

    def retain(self, texts: Iterable[str]) -> None:
        """Forget what was learnt about texts outside `texts` (the live results and renders),
        and start the unit- and token-keyed memos over once they grow past their bound."""
        live = set(texts)
        self.spans = {k: v for k, v in self.spans.items() if k in live}
        self.scans = {k: v for k, v in self.scans.items() if k in live}
        self.layouts = {k: v for k, v in self.layouts.items() if k[0] in live}
        self.middles = {k: v for k, v in self.middles.items() if k[0] in live}
        self.facts = {k: v for k, v in self.facts.items() if k in live}
        self.notes = {k: v for k, v in self.notes.items() if k[0] in live}
        self.files = {k: v for k, v in self.files.items() if k in live}
        self.extras = {k: v for k, v in self.extras.items() if k in live}
        if len(self.score) > MAX_MEMO_ENTRIES:
            self.score = FactScores()
        if len(self.tokens) > MAX_MEMO_ENTRIES:
            self.tokens = TokenSets()
        if len(self.own) > MAX_MEMO_ENTRIES:
            self.own = {}
