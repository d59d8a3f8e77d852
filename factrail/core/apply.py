"""`apply`: rebuild a transcript with its dropped results reduced by the rails.

Every result to reduce starts at the loosest tier. While the transcript is above its target, the
single move with the best gain per fact token lost takes one result to a stricter tier (ties go to
the oldest). Stubs whose lines token value chose then share one pooled fact budget. Past the hard
line the oldest results give way further: fact lines only, then eviction (tier 4). Sizes and
targets are in estimated tokens, each reduced result counted with the note it will carry once
its original is saved (`phrase`). Nothing the user or the assistant wrote changes; only results,
and the over-long arguments of reduced calls.
"""

from __future__ import annotations

import heapq
import re
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from factrail.core.analysis import Analysis
from factrail.core.classify import read_is_observation, rerunnable_ids
from factrail.core.facts import (
    TokenScan,
    fact_lines,
    fact_tokens,
    token_scan,
    token_substrings,
    unit_spans,
)
from factrail.core.marks import full_output_phrase, is_compacted
from factrail.core.model import Action, Message, ToolResult, ToolUse, input_json
from factrail.core.rails import (
    FACT_HEAD_CHARS,
    LAST_RESORT_TIER,
    TIERS,
    Stub,
    evicted,
    facts_only,
    render_stub,
    rerun_note,
    stub_layout,
    with_read_extras,
)
from factrail.core.readnotes import files_line, read_extras
from factrail.core.text import compact_json
from factrail.core.tokens import estimate_tokens
from factrail.core.value import (
    Middle,
    ValueContext,
    ValueParts,
    clean_cut,
    contain_all,
    message_contexts,
    middle_tokens,
    pool,
    token_values,
)

SEARCH_SET_CHARS = 512
"""Inputs and user texts this long are searched through `token_substrings`."""
SEARCH_SET_CAP = 8
"""… unless that set would hold more than this many substrings per char of the text."""
INPUT_BRIEF_CHARS = 200
"""What each over-long string argument of a reduced call (160 for a read) is cut to."""
RERUN_INPUT_CHARS = 160
NOTES_FACTS = 16
"""A call whose arguments hold at least this many fact tokens that earlier results showed wrote
down what the agent read (the figures of a paper in a constants file, the ids of a listing in a
report): the agent quotes them later, so its arguments stay whole."""
NOTES_TOKEN_CHARS = 4
"""The shortest fact token `NOTES_FACTS` counts."""
_BRIEFED = re.compile(r"…\[(?:factrail omitted )?\d+ chars\]\Z")
"""A string already briefed (by factrail; the short form is what it wrote before the tenth
session)."""


@dataclass(frozen=True, slots=True)
class Reduction:
    """Shares of the transcript's estimated tokens to remove: aim for `target`; past `hard`
    (0 = never) the oldest results give way by last resort, down to `evict` (the target when
    None): room to grow is made by the rails, not by evicting facts."""

    target: float
    hard: float
    evict: float | None = None
    fit: float = 0.0
    """Past this share (0: the model's window is unknown) the request would not fit the
    model's window: results kept by their action (the recent ones) give way too, largest first,
    down to `rescue`."""
    rescue: float = 0.0


@dataclass(frozen=True, slots=True)
class Selection:
    """How stubs choose fact lines: by token value, pooled across stubs, counting contained ids."""

    value: bool = True
    pool: bool = True
    contain: bool = True


@dataclass(slots=True)
class Applied:
    """The rebuilt transcript and what changed (sizes in estimated tokens)."""

    messages: list[Message]
    touched: list[bool]
    tier: int
    changed: dict[str, str]
    briefed: dict[str, dict[str, Any]]
    tokens_before: int
    tokens_after: int
    rescued: frozenset[str] = frozenset()
    """Results kept by their action that the rescue cut (the request would not fit the window)."""


def brief_value(value: Any, cap: int) -> Any:
    """Every string over `cap` cut to `cap` chars + `…[factrail omitted N chars]` (already
    briefed ones kept). The mark names factrail so that the agent never takes the cut for a
    form of its own to write in."""
    if isinstance(value, str):
        if len(value) <= cap or _BRIEFED.search(value):
            return value
        short = f"{value[:cap]}…[factrail omitted {len(value) - cap} chars]"
        return short if len(short) < len(value) else value
    if isinstance(value, list):
        return [brief_value(v, cap) for v in value]
    if isinstance(value, dict):
        return {k: brief_value(v, cap) for k, v in value.items()}
    return value


@dataclass(slots=True)
class _Render:
    text: str
    tokens: int
    parts: ValueParts | None = None
    stub: Stub | None = None
    facts: frozenset[str] | None = None


@dataclass(slots=True)
class _Slot:
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
    renders: dict[int, _Render] = field(default_factory=dict)
    middles: dict[tuple[int, int], Middle] = field(default_factory=dict)
    whole: _Render | None = None

    def unchanged(self) -> _Render:
        """The result kept as it is (one render, so its fact tokens are found once)."""
        if self.whole is None:
            self.whole = _Render(self.text, self.tokens)
        return self.whole


_NOTE = -1
_NO_VALUES: Mapping[str, float] = {}
_NO_CONTEXT = ValueContext(input="", user="", dist=1, reused=frozenset())


class _Engine:
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

    def facts_of(self, r: _Render) -> frozenset[str]:
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

    def kind(self, slot: _Slot, tier: int) -> int:
        if slot.rerunnable and len(slot.text) > TIERS[tier].read_keep:
            return _NOTE
        return max(tier, 1)  # tiers 0 and 1 treat observations alike

    def render(self, slot: _Slot, tier: int) -> _Render:
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

    def _render(self, slot: _Slot, kind: int) -> _Render:
        if kind == _NOTE:
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

    def stub_text(self, slot: _Slot, stub: Stub, lines: list[str]) -> str:
        if slot.quoted_read:
            lines = with_read_extras(lines, self.read_extras(slot.text))
        return render_stub(
            slot.text, stub, lines, is_error=slot.is_error, tool_use_id=slot.tool_use_id
        )

    def _fit(self, slot: _Slot, text: str) -> _Render:
        """Keep the original unless the render, with its note as it will be sent, is shorter by
        `slot.min_cut` at least."""
        if len(text) + slot.note_chars + slot.min_cut >= len(slot.text):
            return slot.unchanged()
        return _Render(text, self.count(text) + slot.note_tokens)

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

    def _middle(self, slot: _Slot, stub: Stub) -> Middle:
        """The slot's middle under its values, once per cut (tiers may share a cut)."""
        cut = (stub.head_end, stub.tail_start)
        plan = slot.middles.get(cut)
        if plan is None:
            ctx = self.contexts.get(slot.tool_use_id, _NO_CONTEXT)
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

    def next_move(self, slot: _Slot) -> tuple[float, int, int] | None:
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
                    text, _NO_CONTEXT, wanted, self.memo.own, self.scan_of(text).occurrences
                )
                if self.selection.pool and self.selection.contain:
                    contain_all(plan, values)
        self.note(text, tool_use_id)


def _tokens_of(
    messages: Sequence[Message], count: Callable[[str], int]
) -> tuple[int, dict[int, int]]:
    """The transcript's size (`transcript_tokens`), and each result's size by the result
    object's `id`."""
    sizes: dict[int, int] = {}
    total = 0
    for m in messages:
        total += count(m.text)
        total += sum(count(input_json(u)) for u in m.tool_uses)
        for r in m.tool_results:
            sizes[id(r)] = n = count(r.text)
            total += n
    return total, sizes


def _size(engine: _Engine, slot: _Slot, texts: Mapping[str, str]) -> int:
    """The size of the slot's text in `texts` (its chosen render's, unless pooling changed it)."""
    text = texts[slot.tool_use_id]
    r = engine.render(slot, slot.tier)
    return r.tokens if text is r.text else engine.count(text) + slot.note_tokens


def _escalate(engine: _Engine, slots: list[_Slot], after: int, need: float) -> tuple[int, int]:
    """Move results to stricter tiers by best gain per lost fact token until `need` is met.

    A slot enters the heap with its current size as a bound on its next move's score (a move
    never gains more than the whole render); a bound reaching the top is replaced by the exact
    move, so only the moves that could come first are ever rendered. An exact move at the top
    beats every bound below it, hence every slot's true move: the order is that of scoring
    every slot up front (ties go to the oldest).
    """
    heap: list[tuple[float, int, int, int]] = []  # (-score, order, tier, gain); tier -1: bound

    def push(slot: _Slot) -> None:
        if not slot.final:
            heapq.heappush(heap, (-float(engine.render(slot, slot.tier).tokens), slot.order, -1, 0))

    if after > need:
        for slot in slots:
            push(slot)
    while after > need and heap:
        _, order, tier, gain = heapq.heappop(heap)
        slot = slots[order]
        if tier < 0:
            move = engine.next_move(slot)
            if move is not None:
                score, tier, gain = move
                heapq.heappush(heap, (-score, order, tier, gain))
            continue
        slot.tier = tier
        after -= gain
        push(slot)
    return after, max((s.tier for s in slots if not s.final), default=0)


def _pool(
    engine: _Engine,
    slots: list[_Slot],
    texts: dict[str, str],
    messages: Sequence[Message],
) -> None:
    """Re-plan the greedy lines of every value-chosen stub under one budget (in `texts`); each
    keeps at least the first line it chose on its own."""
    pooled = {
        s.tool_use_id: (s, r)
        for s in slots
        if (r := engine.render(s, s.tier)).parts is not None and r.stub is not None
    }
    if not pooled:
        return
    side: list[str] = []
    for m in messages:
        for res in m.tool_results:
            hit = pooled.get(res.tool_use_id)
            parts = None if hit is None else hit[1].parts
            if hit is None or parts is None:
                side.append(texts.get(res.tool_use_id, res.text))
            else:
                text = hit[1].text
                greedy = {parts.units[k] for k in parts.greedy}
                side.append("\n".join(x for x in text.split("\n") if x not in greedy))
    plans = [(slot, r.stub, r.parts) for slot, r in pooled.values()]
    picks = pool(
        [p for _, _, p in plans if p is not None],
        side,
        contain=engine.selection.contain,
        tokens=engine.memo.tokens,
    )
    for (slot, stub, parts), chosen in zip(plans, picks, strict=True):
        if stub is None or parts is None:
            continue
        if not chosen and parts.greedy:
            # One budget may go all to one stub's many lines; none is left without the best
            # line it chose on its own (a stub of a deploy log kept "0 fact lines" and lost its
            # `pushed image …:2.16.9` line).
            chosen = [parts.greedy[0]]
        text = engine.stub_text(slot, stub, parts.lines(chosen))
        if len(text) + slot.note_chars + slot.min_cut < len(slot.text):
            texts[slot.tool_use_id] = text


def _brief_old_inputs(
    slots: list[_Slot],
    uses: Mapping[str, ToolUse],
    briefed: dict[str, dict[str, Any]],
    after: int,
    need: float,
) -> int:
    """Past the hard line, oldest first: cut the over-long arguments `_briefs` left whole (the
    agent's notes, the calls a judge kept, those an earlier compaction settled) to 200 chars,
    while above `need`."""
    for slot in slots:
        if after <= need:
            break
        use = uses.get(slot.tool_use_id)
        if use is None:
            continue
        current = briefed.get(slot.tool_use_id, use.input)
        new = brief_value(current, INPUT_BRIEF_CHARS)
        if new != current:
            briefed[slot.tool_use_id] = new
            after -= estimate_tokens(compact_json(current)) - estimate_tokens(compact_json(new))
    return after


def _last_resort(slots: list[_Slot], texts: dict[str, str], after: int, need: float) -> int:
    """Oldest first: keep only fact lines, then evict, while above `need`. A result reduced by
    an earlier compaction is left as it is: rewriting its note would break the prompt cache
    from there on and lose where its whole output is."""
    for shrink in (facts_only, evicted):
        for slot in slots:
            if after <= need:
                return after
            if slot.final:
                continue
            cur = texts.get(slot.tool_use_id, slot.text)
            new = shrink(cur, slot.tool_use_id)
            if new is not cur and _shrinks(slot, cur, new):
                texts[slot.tool_use_id] = new
                after -= _gain(slot, cur, new, estimate_tokens)
    return after


def _shrinks(slot: _Slot, cur: str, new: str) -> bool:
    """Whether `new` is shorter than `cur` as sent (a first reduction adds the saved note).
    Past the hard line any gain counts: `slot.min_cut` is for the rails' tiers."""
    return len(new) + (slot.note_chars if cur is slot.text else 0) < len(cur)


def _gain(slot: _Slot, cur: str, new: str, count: Callable[[str], int]) -> int:
    """The tokens saved by sending `new` for `cur` (a first reduction adds the saved note)."""
    return count(cur) - count(new) - (slot.note_tokens if cur is slot.text else 0)


class _NoteGrowth:
    """How much a result's note grows once its original is saved (`apply`'s `phrase`)."""

    def __init__(self, phrase: Callable[[str], str] | None, count: Callable[[str], int]) -> None:
        self.phrase = phrase
        self.count = count

    def of(self, slot: _Slot) -> _Slot:
        """`slot` with its `note_chars` and `note_tokens` (none without a phrase)."""
        if self.phrase is not None:
            saved = self.phrase(slot.tool_use_id)
            placeholder = full_output_phrase(slot.tool_use_id)
            slot.note_chars = max(len(saved) - len(placeholder), 0)
            slot.note_tokens = max(self.count(saved) - self.count(placeholder), 0)
        return slot


def _first_results(messages: Sequence[Message]) -> Iterator[ToolResult]:
    """Each call's result, the first one where an id repeats."""
    seen: set[str] = set()
    for m in messages:
        for r in m.tool_results:
            if r.tool_use_id not in seen:
                seen.add(r.tool_use_id)
                yield r


def _kept_slots(
    messages: Sequence[Message],
    actions: Mapping[str, Action],
    final: AbstractSet[str],
    sizes: Mapping[int, int],
    start: int,
    growth: _NoteGrowth,
) -> list[_Slot]:
    """The results kept by their action that a rescue may cut, largest first (never one
    already reduced, frozen, or kept verbatim: those are in `final`); as observations (a re-run
    note would not fit either)."""
    out = [
        growth.of(
            _Slot(r.tool_use_id, 0, r.text, sizes[id(r)], r.is_error, rerunnable=False, final=False)
        )
        for r in _first_results(messages)
        if actions.get(r.tool_use_id, "keep") == "keep"
        and r.tool_use_id not in final
        and not is_compacted(r.text)
    ]
    out.sort(key=lambda s: -s.tokens)
    for i, slot in enumerate(out):
        slot.order = start + i
    return out


def _rescue(
    engine: _Engine, slots: list[_Slot], texts: dict[str, str], after: int, need: float
) -> int:
    """Largest first, cut results the agent still works with to their strictest stub (head,
    fact lines, tail), then to their fact lines, while above `need`: the request would not fit
    the model's window otherwise."""
    strictest = len(TIERS) - 1
    for slot in slots:
        texts[slot.tool_use_id] = slot.text
    for slot in slots:
        if after <= need:
            return after
        r = engine.render(slot, strictest)
        if r.tokens < slot.tokens:
            slot.tier = strictest
            texts[slot.tool_use_id] = r.text
            after -= slot.tokens - r.tokens
    for slot in slots:
        if after <= need:
            return after
        cur = texts[slot.tool_use_id]
        new = facts_only(cur, slot.tool_use_id)
        if _shrinks(slot, cur, new):
            texts[slot.tool_use_id] = new
            after -= _gain(slot, cur, new, engine.count)
    return after


def apply(
    messages: Sequence[Message],
    actions: Mapping[str, Action],
    *,
    reduction: Reduction,
    head_chars: int = FACT_HEAD_CHARS,
    selection: Selection = Selection(),
    final: AbstractSet[str] = frozenset(),
    count: Callable[[str], int] = estimate_tokens,
    memo: Analysis | None = None,
    phrase: Callable[[str], str] | None = None,
    calls_kept: AbstractSet[str] = frozenset(),
    min_cut: int = 0,
) -> Applied:
    """Reduce every result whose action is not `keep` (see the module docstring); `count` may
    be the caller's memoised estimator (a session has just counted the same texts), `memo` what
    earlier compactions of the session learnt (it then keeps what this one learnt about the
    live results). `phrase(tool_use_id)`: the full-output phrase a reduced result's note will
    carry once its original is saved (the caller swaps it in for `full_output_phrase`): a
    result is reduced only when it is shorter with it, and sizes count it. `calls_kept`: calls
    a judge said matter with their arguments (their results may still be reduced): those
    arguments go whole. `min_cut`: the rails' tiers reduce a result only when that saves at
    least this many chars beyond its note (past the hard line any gain counts)."""
    uses: dict[str, ToolUse] = {}
    for m in messages:
        for u in m.tool_uses:
            uses.setdefault(u.tool_use_id, u)
    before, sizes = _tokens_of(messages, count)
    rerunnable = rerunnable_ids(messages)
    engine = _Engine(head_chars, selection, Analysis() if memo is None else memo, count)
    engine.contexts = message_contexts(
        messages, engine.memo.tokens, lambda text: engine.scan_of(text).occurrences
    )
    slots: list[_Slot] = []
    growth = _NoteGrowth(phrase, count)
    for r in _first_results(messages):
        rid = r.tool_use_id
        if actions.get(rid, "keep") == "keep":
            continue
        read = rid in rerunnable and not r.is_error and not read_is_observation(r.text)
        quoted = read and engine.quotes_lost(r.text, rid)
        slots.append(
            growth.of(
                _Slot(
                    tool_use_id=rid,
                    order=len(slots),
                    text=r.text,
                    tokens=sizes[id(r)],
                    is_error=r.is_error,
                    rerunnable=read and not quoted,
                    final=rid in final or is_compacted(r.text),
                    quoted_read=quoted,
                    min_cut=min_cut,
                )
            )
        )
    briefed = _briefs(
        uses,
        actions,
        final,
        {s.tool_use_id for s in slots if s.final},
        rerunnable,
        calls_kept,
        lambda ids: _notes(messages, ids, engine.text_facts),
    )
    brief_gain = sum(
        estimate_tokens(compact_json(uses[i].input)) - estimate_tokens(compact_json(new))
        for i, new in briefed.items()
    )
    after = before - brief_gain - sum(s.tokens - engine.render(s, 0).tokens for s in slots)
    after, tier = _escalate(engine, slots, after, before * (1 - reduction.target))
    texts = {s.tool_use_id: engine.render(s, s.tier).text for s in slots}
    if selection.value and selection.pool:
        _pool(engine, slots, texts, messages)
        after = before - brief_gain - sum(s.tokens - _size(engine, s, texts) for s in slots)
    hard_need = before * (1 - reduction.hard)
    if reduction.hard > 0 and after > hard_need:
        # Past the hard line the oldest give way down to the target, not just under the line:
        # each compaction costs the prompt cache from its first change, so one deep cut beats
        # a shallow one every few turns.
        evict = reduction.target if reduction.evict is None else reduction.evict
        need = min(hard_need, before * (1 - evict))
        evicting = _brief_old_inputs(slots, uses, briefed, after, need)
        evicting = _last_resort(slots, texts, evicting, need)
        if evicting != after:
            tier = LAST_RESORT_TIER
        after = evicting
    rescued: frozenset[str] = frozenset()
    if reduction.fit > 0 and after > before * (1 - reduction.fit):
        kept = _kept_slots(messages, actions, final, sizes, len(slots), growth)
        after_rescue = _rescue(engine, kept, texts, after, before * (1 - reduction.rescue))
        if after_rescue != after:
            tier = LAST_RESORT_TIER
        after = after_rescue
        slots.extend(kept)
        rescued = frozenset(s.tool_use_id for s in kept if texts[s.tool_use_id] != s.text)
    changed = {s.tool_use_id: texts[s.tool_use_id] for s in slots if texts[s.tool_use_id] != s.text}
    out, touched = _rebuild(messages, changed, briefed)
    if memo is not None:
        renders = (r.text for s in slots for r in s.renders.values())
        memo.retain([*(r.text for m in messages for r in m.tool_results), *renders])
    return Applied(out, touched, tier, changed, briefed, before, after, rescued)


def prepare(
    messages: Sequence[Message],
    memo: Analysis,
    *,
    head_chars: int = FACT_HEAD_CHARS,
    selection: Selection = Selection(),
    between: Callable[[], object] = lambda: None,
) -> None:
    """Learn, into `memo`, what a later `apply` will need about every result not reduced yet
    (a session's proxy calls it on turns below the trigger, off the request's path), and forget
    what no live result needs. Only new results cost anything; `between` runs after each one
    (a background caller yields the interpreter there)."""
    engine = _Engine(head_chars, selection, memo)
    live: list[str] = []
    for m in messages:
        for r in m.tool_results:
            live.append(r.text)
            if not is_compacted(r.text):
                engine.prepare(r.text, r.is_error, r.tool_use_id)
                between()
    memo.retain(live)


def _briefs(
    uses: Mapping[str, ToolUse],
    actions: Mapping[str, Action],
    final: AbstractSet[str],
    final_slots: AbstractSet[str],
    rerunnable: AbstractSet[str],
    calls_kept: AbstractSet[str],
    notes: Callable[[AbstractSet[str]], AbstractSet[str]],
) -> dict[str, dict[str, Any]]:
    """New inputs of dropped calls (cap 200), of reduced reproducible reads (cap 160) and of
    the other reduced calls (cap 200: a file a call wrote is on disk, a script it ran is done;
    the whole arguments are saved) but those in `calls_kept` and those `notes(ids)` names."""
    out: dict[str, dict[str, Any]] = {}
    reduced: dict[str, dict[str, Any]] = {}
    for uid, use in uses.items():
        action = actions.get(uid, "keep")
        if action == "keep" or uid in final or uid in final_slots:
            continue
        if action == "drop_call":
            new, into = brief_value(use.input, INPUT_BRIEF_CHARS), out
        elif uid in rerunnable:
            new, into = brief_value(use.input, RERUN_INPUT_CHARS), out
        elif uid not in calls_kept:
            new, into = brief_value(use.input, INPUT_BRIEF_CHARS), reduced
        else:
            continue
        if new != use.input:
            into[uid] = new
    if reduced:
        kept = notes(reduced.keys())
        out.update((uid, new) for uid, new in reduced.items() if uid not in kept)
    return out


def _notes(
    messages: Sequence[Message], ids: AbstractSet[str], facts: Callable[[str], frozenset[str]]
) -> set[str]:
    """The calls among `ids` that wrote down what the agent read: at least `NOTES_FACTS` of
    their arguments' fact tokens of `NOTES_TOKEN_CHARS` or more showed in earlier results (a
    two-digit number is in every log and every module)."""
    out: set[str] = set()
    shown: set[str] = set()
    for m in messages:
        for u in m.tool_uses:
            if u.tool_use_id in ids:
                written = {t for t in facts(input_json(u)) if len(t) >= NOTES_TOKEN_CHARS}
                if len(written & shown) >= NOTES_FACTS:
                    out.add(u.tool_use_id)
        for r in m.tool_results:
            shown.update(t for t in facts(r.text) if len(t) >= NOTES_TOKEN_CHARS)
    return out


def _rebuild(
    messages: Sequence[Message], changed: Mapping[str, str], briefed: Mapping[str, dict[str, Any]]
) -> tuple[list[Message], list[bool]]:
    out: list[Message] = []
    touched: list[bool] = []
    done: set[str] = set()
    for m in messages:
        c = m.copy()
        hit = False
        for u in c.tool_uses:
            if u.tool_use_id in briefed:
                u.input = briefed[u.tool_use_id]
                hit = True
            if u.text is not None and u.tool_use_id in changed:
                u.text = changed[u.tool_use_id]
        for r in c.tool_results:
            new = changed.get(r.tool_use_id)
            if new is not None and r.tool_use_id not in done:
                done.add(r.tool_use_id)
                r.text = new
                hit = True
        out.append(c)
        touched.append(hit)
    return out, touched
