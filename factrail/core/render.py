"""The renders of one result at each rail kind, memoised across a compaction.

`Renderer.render(slot, tier)` is the one way a result is reduced at a tier: a reproducible read
becomes its re-run note; an observation its stub (head, fact lines chosen by token value or by
regex, tail; `factrail.core.rails` says where it cuts); a result that would not be shorter by the
slot's `min_cut` with its note stays as it is. What a render needs about a text (units, token
scans, stub cuts, middles, fact tokens, notes) is kept in the session's `Analysis`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from factrail.core.analysis import Analysis
from factrail.core.candidate_tokens import (
    TokenScan,
    clean_cut,
    middle_tokens,
    token_scan,
    token_substrings,
)
from factrail.core.cover import Middle, ValueParts
from factrail.core.facts import fact_lines, fact_tokens
from factrail.core.pool import contain_all
from factrail.core.rails import (
    TIERS,
    Stub,
    render_stub,
    rerun_note,
    stub_layout,
    with_read_extras,
)
from factrail.core.readnotes import files_line, read_extras
from factrail.core.tokens import estimate_tokens
from factrail.core.units import unit_spans
from factrail.core.value import ValueContext, token_values

SEARCH_SET_CHARS = 512
"""Inputs and user texts this long are searched through `token_substrings`."""
SEARCH_SET_CAP = 8
"""… unless that set would hold more than this many substrings per char of the text."""


@dataclass(frozen=True, slots=True)
class Selection:
    """How stubs choose fact lines: by token value, pooled across stubs, counting contained ids."""

    value: bool = True
    pool: bool = True
    contain: bool = True


DEFAULT_SELECTION = Selection()
"""The engine's selection: by token value, pooled, counting contained ids."""


@dataclass(slots=True)
class Render:
    text: str
    tokens: int
    parts: ValueParts | None = None
    stub: Stub | None = None
    facts: frozenset[str] | None = None


@dataclass(slots=True)
class Slot:
    """One result to reduce, with its renders cached per rail kind."""

    tool_use_id: str
    order: int
    text: str
    tokens: int
    is_error: bool
    rerunnable: bool
    """A reproducible read: reduced to its re-run note."""
    final: bool
    quoted_read: bool = False
    """A reproducible read the agent has quoted from: reduced as an observation, its stub
    keeping what the re-run note would have carried."""
    tier: int = 0
    note_chars: int = 0
    note_tokens: int = 0
    """What a reduced render of this result grows by once its original is saved and its note
    names the copy (`apply`'s `phrase`), in chars and estimated tokens."""
    min_cut: int = 0
    """The fewest chars a reduction of this result by the rails' tiers must save (`apply`'s
    `min_cut`; past the hard line, and in the window rescue, any gain counts)."""
    renders: dict[int, Render] = field(default_factory=dict)
    middles: dict[tuple[int, int], Middle] = field(default_factory=dict)
    whole: Render | None = None

    def unchanged(self) -> Render:
        """The result kept as it is (one render, so its fact tokens are found once)."""
        if self.whole is None:
            self.whole = Render(self.text, self.tokens)
        return self.whole


NOTE = -1
_NO_VALUES: Mapping[str, float] = {}
NO_CONTEXT = ValueContext(input="", user="", dist=1, reused=frozenset())


class Renderer:
    def __init__(
        self,
        head_chars: int,
        selection: Selection,
        memo: Analysis,
        count: Callable[[str], int] = estimate_tokens,
    ) -> None:
        self.head_chars = head_chars
        self.selection = selection
        self.memo = memo
        self.count = count
        self.contexts: dict[str, ValueContext] = {}
        self.searchables: dict[str, AbstractSet[str] | str] = {}

    def units_of(self, text: str) -> list[str]:
        """`units(text)`, from spans memoised for the stub cuts that follow."""
        return [text[a:b] for a, b, _ in self._spans_of(text)]

    def _spans_of(self, text: str) -> tuple[tuple[int, int, bool], ...]:
        spans = self.memo.spans.get(text)
        if spans is None:  # a tuple: kept, and no longer walked by the garbage collector
            spans = self.memo.spans[text] = tuple(unit_spans(text))
        return spans

    def spans_between(self, text: str, start: int, end: int) -> tuple[tuple[int, int, bool], ...]:
        """The text's own unit spans between two clean cuts (offsets into `text`: shifted by
        `start`, they are `unit_spans(text[start:end])`)."""
        spans = self._spans_of(text)
        lo = bisect_left(spans, (start, -1, False))
        hi = bisect_left(spans, (end, -1, False))
        return spans[lo:hi]

    def scan_of(self, text: str) -> TokenScan:
        scan = self.memo.scans.get(text)
        if scan is None:
            scan = self.memo.scans[text] = token_scan(text)
        return scan

    def facts_of(self, r: Render) -> frozenset[str]:
        """The render's fact tokens."""
        if r.facts is None:
            r.facts = self.text_facts(r.text)
        return r.facts

    def text_facts(self, text: str) -> frozenset[str]:
        """`fact_tokens(text)`, memoised by text (a later turn often renders the same)."""
        found = self.memo.facts.get(text)
        if found is None:
            found = self.memo.facts[text] = frozenset(fact_tokens(text))
        return found

    def kind(self, slot: Slot, tier: int) -> int:
        if slot.rerunnable and len(slot.text) > TIERS[tier].read_keep:
            return NOTE
        return max(tier, 1)  # tiers 0 and 1 treat observations alike

    def render(self, slot: Slot, tier: int) -> Render:
        if slot.final:
            return slot.unchanged()
        kind = self.kind(slot, tier)
        r = slot.renders.get(kind)
        if r is None:
            r = self._render(slot, kind)
            slot.renders[kind] = r
        return r

    def quotes_lost(self, text: str, tool_use_id: str) -> bool:
        """Whether the agent has quoted from this read more than the files it named."""
        quoted = self.contexts[tool_use_id].quoted
        if not quoted:
            return False
        named = self.files_line(text)
        return any(t not in named for t in quoted)

    def files_line(self, text: str) -> str:
        """`files_line(text)`, memoised by text."""
        found = self.memo.files.get(text)
        if found is None:
            found = self.memo.files[text] = files_line(text)
        return found

    def read_extras(self, text: str) -> tuple[str, ...]:
        """`read_extras(text)`, memoised by text (a quoted read's stub carries them on every
        render)."""
        found = self.memo.extras.get(text)
        if found is None:
            found = self.memo.extras[text] = tuple(read_extras(text, self.files_line(text)))
        return found

    def note(self, text: str, tool_use_id: str) -> str:
        key = (text, tool_use_id)
        out = self.memo.notes.get(key)
        if out is None:
            out = self.memo.notes[key] = rerun_note(text, tool_use_id, self.read_extras(text))
        return out

    def layout(self, text: str, is_error: bool, kind: int) -> Stub | None:
        key = (text, is_error, kind, self.head_chars)
        memo = self.memo.layouts
        if key in memo:
            return memo[key]
        stub = memo[key] = stub_layout(
            text, is_error, TIERS[kind], self.head_chars, self.memo.score, self.units_of
        )
        return stub

    def _render(self, slot: Slot, kind: int) -> Render:
        if kind == NOTE:
            return self._fit(slot, self.note(slot.text, slot.tool_use_id))
        stub = self.layout(slot.text, slot.is_error, kind)
        if stub is None:
            return slot.unchanged()
        middle = slot.text[stub.head_end : stub.tail_start]
        parts: ValueParts | None = None
        if self.selection.value:
            parts = self._middle(slot, stub).parts(stub.budget)
            lines = parts.lines()
        else:
            lines = fact_lines(middle, stub.budget, self.memo.score)
        r = self._fit(slot, self.stub_text(slot, stub, lines))
        if r.text is not slot.text:
            r.parts, r.stub = parts, stub
        return r

    def stub_text(self, slot: Slot, stub: Stub, lines: list[str]) -> str:
        if slot.quoted_read:
            lines = with_read_extras(lines, self.read_extras(slot.text))
        return render_stub(
            slot.text, stub, lines, is_error=slot.is_error, tool_use_id=slot.tool_use_id
        )

    def _fit(self, slot: Slot, text: str) -> Render:
        """Keep the original unless the render, with its note as it will be sent, is shorter by
        `slot.min_cut` at least."""
        if len(text) + slot.note_chars + slot.min_cut >= len(slot.text):
            return slot.unchanged()
        return Render(text, self.count(text) + slot.note_tokens)

    def skeleton(self, text: str, start: int, end: int) -> tuple[Middle, set[str]]:
        """The middle `text[start:end]` prepared under no values, and its candidate tokens."""
        key = (text, start, end)
        hit = self.memo.middles.get(key)
        if hit is None:
            scan = self.scan_of(text)
            if clean_cut(text, start) and clean_cut(text, end):  # units located in the text
                plan = Middle(
                    text,
                    _NO_VALUES,
                    score=self.memo.score,
                    tokens=self.memo.tokens,
                    scan=scan,
                    spans=self.spans_between(text, start, end),
                )
            else:
                plan = Middle(
                    text[start:end], _NO_VALUES, score=self.memo.score, tokens=self.memo.tokens
                )
            hit = self.memo.middles[key] = (plan, middle_tokens(text, start, end, scan))
        return hit

    def _middle(self, slot: Slot, stub: Stub) -> Middle:
        """The slot's middle under its values, once per cut (tiers may share a cut)."""
        cut = (stub.head_end, stub.tail_start)
        plan = slot.middles.get(cut)
        if plan is None:
            ctx = self.contexts.get(slot.tool_use_id, NO_CONTEXT)
            text = slot.text
            skeleton, wanted = self.skeleton(text, *cut)
            seen = self.scan_of(text).occurrences
            values = token_values(text, ctx, wanted, self.memo.own, seen, self.searchable)
            plan = skeleton.revalued(values)
            slot.middles[cut] = plan
        return plan

    def searchable(self, text: str) -> AbstractSet[str] | str:
        """`text`, or for a long one the set of its token substrings: the candidate tokens of
        a result are looked up in its call's input and the user's text, each of thousands
        would scan the text again."""
        if len(text) < SEARCH_SET_CHARS:
            return text
        hit = self.searchables.get(text)
        if hit is None:
            subs = token_substrings(text, cap=SEARCH_SET_CAP * len(text))
            hit = self.searchables[text] = text if subs is None else subs
        return hit

    def next_move(self, slot: Slot) -> tuple[float, int, int] | None:
        """(score, tier, gain) of the first stricter tier that saves tokens."""
        if slot.final:
            return None
        cur = self.render(slot, slot.tier)
        for tier in range(slot.tier + 1, len(TIERS)):
            new = self.render(slot, tier)
            gain = cur.tokens - new.tokens
            if gain > 0:
                lost = len(self.facts_of(cur) - self.facts_of(new))
                return gain / (1 + lost), tier, gain
        return None

    def prepare(self, text: str, is_error: bool, tool_use_id: str) -> None:
        """Learn what every rail kind of one result needs before any values are known (its
        re-run note is learnt last: a result with one was prepared already)."""
        if (text, tool_use_id) in self.memo.notes:
            return
        self.text_facts(text)
        for kind in range(1, len(TIERS)):
            stub = self.layout(text, is_error, kind)
            if stub is not None and self.selection.value:
                plan, wanted = self.skeleton(text, stub.head_end, stub.tail_start)
                # The token-only terms of the values (the rest shifts with every turn), and the
                # keys of those values contained in each unit (their order never shifts).
                values = token_values(
                    text, NO_CONTEXT, wanted, self.memo.own, self.scan_of(text).occurrences
                )
                if self.selection.pool and self.selection.contain:
                    contain_all(plan, values)
        self.note(text, tool_use_id)
