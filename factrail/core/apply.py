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
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from factrail.core.analysis import Analysis
from factrail.core.classify import read_is_observation, rerunnable_ids
from factrail.core.marks import full_output_phrase, is_compacted
from factrail.core.model import Action, Message, ToolResult, ToolUse, input_json
from factrail.core.pool import pool
from factrail.core.rails import FACT_HEAD_CHARS, LAST_RESORT_TIER, TIERS, evicted, facts_only
from factrail.core.render import DEFAULT_SELECTION, Renderer, Selection, Slot
from factrail.core.text import compact_json
from factrail.core.tokens import estimate_tokens
from factrail.core.value import message_contexts

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
"""A string already briefed by factrail (the short form without its name is an older
factrail's)."""


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


def _tokens_of(
    messages: Sequence[Message], count: Callable[[str], int], input_text: Callable[[ToolUse], str]
) -> tuple[int, dict[int, int]]:
    """The transcript's size (`transcript_tokens`), and each result's size by the result
    object's `id`."""
    sizes: dict[int, int] = {}
    total = 0
    for m in messages:
        total += count(m.text)
        total += sum(count(input_text(u)) for u in m.tool_uses)
        for r in m.tool_results:
            sizes[id(r)] = n = count(r.text)
            total += n
    return total, sizes


def _size(engine: Renderer, slot: Slot, texts: Mapping[str, str]) -> int:
    """The size of the slot's text in `texts` (its chosen render's, unless pooling changed it)."""
    text = texts[slot.tool_use_id]
    r = engine.render(slot, slot.tier)
    return r.tokens if text is r.text else engine.count(text) + slot.note_tokens


def _escalate(engine: Renderer, slots: list[Slot], after: int, need: float) -> tuple[int, int]:
    """Move results to stricter tiers by best gain per lost fact token until `need` is met.

    A slot enters the heap with its current size as a bound on its next move's score (a move
    never gains more than the whole render); a bound reaching the top is replaced by the exact
    move, so only the moves that could come first are ever rendered. An exact move at the top
    beats every bound below it, hence every slot's true move: the order is that of scoring
    every slot up front (ties go to the oldest).
    """
    heap: list[tuple[float, int, int, int]] = []  # (-score, order, tier, gain); tier -1: bound

    def push(slot: Slot) -> None:
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
    engine: Renderer,
    slots: list[Slot],
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
    slots: list[Slot],
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


def _last_resort(slots: list[Slot], texts: dict[str, str], after: int, need: float) -> int:
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


def _shrinks(slot: Slot, cur: str, new: str) -> bool:
    """Whether `new` is shorter than `cur` as sent (a first reduction adds the saved note).
    Past the hard line any gain counts: `slot.min_cut` is for the rails' tiers."""
    return len(new) + (slot.note_chars if cur is slot.text else 0) < len(cur)


def _gain(slot: Slot, cur: str, new: str, count: Callable[[str], int]) -> int:
    """The tokens saved by sending `new` for `cur` (a first reduction adds the saved note)."""
    return count(cur) - count(new) - (slot.note_tokens if cur is slot.text else 0)


class _NoteGrowth:
    """How much a result's note grows once its original is saved (`apply`'s `phrase`)."""

    def __init__(self, phrase: Callable[[str], str] | None, count: Callable[[str], int]) -> None:
        self.phrase = phrase
        self.count = count

    def of(self, slot: Slot) -> Slot:
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
) -> list[Slot]:
    """The results kept by their action that a rescue may cut, largest first (never one
    already reduced, frozen, or kept verbatim: those are in `final`); as observations (a re-run
    note would not fit either)."""
    out = [
        growth.of(
            Slot(r.tool_use_id, 0, r.text, sizes[id(r)], r.is_error, rerunnable=False, final=False)
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
    engine: Renderer, slots: list[Slot], texts: dict[str, str], after: int, need: float
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
    selection: Selection = DEFAULT_SELECTION,
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
    as_json: dict[int, str] = {}  # each input's `input_json`, by the use object's `id`
    for m in messages:
        for u in m.tool_uses:
            uses.setdefault(u.tool_use_id, u)
            as_json[id(u)] = input_json(u)

    def input_text(use: ToolUse) -> str:
        return as_json[id(use)]

    before, sizes = _tokens_of(messages, count, input_text)
    rerunnable = rerunnable_ids(messages, input_text)
    engine = Renderer(head_chars, selection, Analysis() if memo is None else memo, count)
    engine.contexts = message_contexts(
        messages,
        engine.memo.tokens,
        lambda text: engine.scan_of(text).occurrences,
        input_text,
    )
    slots: list[Slot] = []
    growth = _NoteGrowth(phrase, count)
    for r in _first_results(messages):
        rid = r.tool_use_id
        if actions.get(rid, "keep") == "keep":
            continue
        read = rid in rerunnable and not r.is_error and not read_is_observation(r.text)
        quoted = read and engine.quotes_lost(r.text, rid)
        slots.append(
            growth.of(
                Slot(
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
        lambda ids: _notes(messages, ids, engine.text_facts, input_text),
    )
    brief_gain = sum(
        estimate_tokens(input_text(uses[i])) - estimate_tokens(compact_json(new))
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
    selection: Selection = DEFAULT_SELECTION,
    between: Callable[[], object] = lambda: None,
) -> None:
    """Learn, into `memo`, what a later `apply` will need about every result not reduced yet
    (a session's proxy calls it on turns below the trigger, off the request's path), and forget
    what no live result needs. Only new results cost anything; `between` runs after each one
    (a background caller yields the interpreter there)."""
    engine = Renderer(head_chars, selection, memo)
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
    messages: Sequence[Message],
    ids: AbstractSet[str],
    facts: Callable[[str], frozenset[str]],
    input_text: Callable[[ToolUse], str] = input_json,
) -> set[str]:
    """The calls among `ids` that wrote down what the agent read: at least `NOTES_FACTS` of
    their arguments' fact tokens of `NOTES_TOKEN_CHARS` or more showed in earlier results (a
    two-digit number is in every log and every module). Only the calls with that many such
    tokens can be one, and only the results before the last of them are read."""
    written: list[tuple[int, str, frozenset[str]]] = []  # (message index, id, its tokens)
    for i, m in enumerate(messages):
        for u in m.tool_uses:
            if u.tool_use_id in ids:
                tokens = frozenset(t for t in facts(input_text(u)) if len(t) >= NOTES_TOKEN_CHARS)
                if len(tokens) >= NOTES_FACTS:
                    written.append((i, u.tool_use_id, tokens))
    wanted = frozenset().union(*(tokens for _, _, tokens in written))
    out: set[str] = set()
    shown: set[str] = set()
    k = 0
    for i, m in enumerate(messages):
        while k < len(written) and written[k][0] == i:  # a message's calls, then its results
            _, uid, tokens = written[k]
            if len(tokens & shown) >= NOTES_FACTS:
                out.add(uid)
            k += 1
        if k == len(written):
            break
        for r in m.tool_results:
            shown.update(wanted.intersection(facts(r.text)))
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
