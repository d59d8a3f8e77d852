"""The cost gate: *when* a due turn compacts and *how deep* it goes.

A provider's prompt cache bills from the first changed byte, so a compaction is a bet: it
re-bills everything after its first change once (I tokens at the write price) to stop resending
what it removes on every later turn (H tokens at the cached price). Short of the danger line the
bet must pay back over the session's expected remaining turns; past it a compaction runs
whatever it costs, as long as it gets the request back under that line; on a cold cache it is
free. A compaction that runs aims low enough to leave room for many turns of the session's
observed growth, so the next one is far away. Judge rounds and facts are the step's business;
this module only says when and how deep.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Literal

from factrail.core.apply import Applied, Reduction
from factrail.core.model import Message, collect_tool_calls, result_texts
from factrail.core.pressure import pressure
from factrail.policy.cost import cold, lifetime, pays
from factrail.policy.trigger import soft_line
from factrail.session.options import EngineOptions
from factrail.session.turn import Turn
from factrail.session.zone import first_changed

Decision = Literal["pays", "forced", "cold", "waits", "declined"]
DECISIONS: tuple[Decision, ...] = ("pays", "forced", "cold", "waits", "declined")
"""What the cost gate made of a due turn: it compacted because that pays back, because it was
past the danger line, or because the cache was cold; it `waits` (the estimate would not pay
back); or the rails ran and it was `declined` (what they would remove would not pay back, or
would not relieve the danger line)."""
REDUCIBLE_SHARE = 0.8
"""About how much of the results it may reduce a compaction removes (for the estimate of
what a compaction would save before it runs)."""
HEADROOM_TURNS = 24
"""A compaction leaves room for at least this many turns of the session's growth (when that
is more than the re-arm gap; more where a cache write costs more reads, `room_turns`): fewer,
deeper compactions, each paying back sooner. (Measured on the dev corpus at Anthropic's 0.1
and 1.25, room for 12 / 18 / 24 / 30 / 45 turns billed 0.893 / 0.878 / 0.858 / 0.858 / 0.855
of sending everything at 0.8 windows: the rails reach their deepest by about 24. At GPT-4o's
0.5, 24 billed 0.704 / 0.626 / 0.572 / 0.526 against twelve's 0.724 / 0.646 / 0.588 / 0.530.)"""
ROOM_PER_REWRITE = 2.0
"""Turns of room a compaction leaves per turn of cache reads that re-writing a token costs,
where that is more than `HEADROOM_TURNS` (a model that reads at 0.05: 48)."""
FORCED_PRESERVE = 2
"""The newest messages a compaction forced past the danger line pins, when `preserve_recent`
pins more: the last exchange, from the newest call on (more messages when the transcript goes
on past it with text). It must last, and the results of the turns before are often the largest
left (dev corpus, at 1 / 1.2 / 1.5 windows: 0.777 / 0.755 / 0.717
of sending everything billed with 4 pinned, 0.772 / 0.748 / 0.701 with 2, facts 0.9805 / 0.9702
/ 0.9512 → 0.9802 / 0.9719 / 0.9502; no forced compaction at 0.8 windows)."""

Count = Callable[[Sequence[Message]], int]
"""Estimated tokens of a run of messages (the step's memoised count)."""
CountText = Callable[[str], int]
"""Estimated tokens of one text."""


@dataclass(frozen=True, slots=True)
class Gate:
    """What the gate made of a due turn (`pays`, `forced`, `cold` or `waits`)."""

    decision: Decision
    invalidated: float | None = None
    """For `pays`: the estimated tokens it re-bills, which what the rails remove must pay back.
    (`forced`: it runs if it gets the request back under the danger line, `relieves`.)"""

    @property
    def go(self) -> bool:
        """Whether the rails run."""
        return self.decision != "waits"


class CostGate:
    """When a due turn compacts and how deep, under the deployment's options; token counts
    come from the step (`count` for messages, `count_text` for one text), calibrated here by
    the session's ratio."""

    def __init__(self, options: EngineOptions, count: Count, count_text: CountText) -> None:
        self.options = options
        self._count = count
        self._count_text = count_text

    # -- when -------------------------------------------------------------------------------

    def decide(self, turn: Turn, idle: float | None, closed: AbstractSet[str]) -> Gate:
        """Whether a due turn compacts, and what its rails must then achieve. Free once the
        cache is cold; past the danger line it must get the request back under that line (see
        `relieves`). Short of those, an estimate of the tokens it would invalidate (from the
        first result it could reduce, none of `closed`) against those it would stop resending
        must pay back over the session's expected remaining turns (as many as the transcript
        has had, times `payback_horizon`: a long session is likely to go on), and so must what
        the rails then actually remove. A transcript the provider is asked to summarize has no
        turn left: it goes whole unless it must not (the summary keeps what it is shown)."""
        if turn.asked.last and not self.must(turn):
            return Gate("waits")
        if cold(idle, lifetime(self.options.cache_ttl_s, turn.asked.cache_ttl_s)):
            return Gate("cold")
        if self.must(turn):
            return Gate("forced")
        estimate = self.estimate(turn, closed)
        if estimate is None or not self.pays(turn, *estimate):
            return Gate("waits")
        return Gate("pays", invalidated=estimate[0])

    def must(self, turn: Turn) -> bool:
        """Past the danger line (halfway from the trigger to the model's window, never past
        twice the trigger nor where the request would stop fitting the window) a compaction
        runs whatever it costs. Between the soft line and there, it must pay back the cache it
        breaks: a session that ends soon after a compaction at the trigger paid for nothing."""
        return turn.tokens >= self.options.trigger.danger(
            turn.asked.model, turn.trigger, turn.window
        )

    def pays(self, turn: Turn, invalidated: float, saved: float) -> bool:
        """Whether saving `saved` tokens on every remaining turn pays back re-billing
        `invalidated` once, under the provider's prices."""
        remaining = turn.turns * self.options.payback_horizon
        return pays(invalidated, saved, remaining, turn.prices, turn.tokens)

    def estimate(self, turn: Turn, closed: AbstractSet[str]) -> tuple[float, float] | None:
        """The tokens a compaction would invalidate (from the first result it could reduce) and
        those it would stop resending (what the rails remove to reach their aim, at most a share
        of the open results), calibrated; None when no result is open (`closed`: the calls it
        leaves as they are)."""
        calls = collect_tool_calls(turn.work, self.options.plan.preserve_recent)
        open_ = [
            c for c in calls if not c.pinned and c.result_chars and c.tool_use_id not in closed
        ]
        if not open_:
            return None
        first = min(min(c.call_index, c.result_index) for c in open_)
        invalidated = self.rebilled(turn, turn.work, first)
        results = result_texts(turn.work)
        reducible = sum(self._count_text(results[c.tool_use_id]) for c in open_) * turn.ratio
        saved = min(REDUCIBLE_SHARE * reducible, max(turn.tokens - self.aim(turn), 0.0))
        return invalidated, saved

    def rebilled(self, turn: Turn, messages: Sequence[Message], first: int) -> float:
        """The calibrated tokens a change from message `first` re-bills: everything after it,
        and, where the provider read only part of the unchanged prefix on the session's last
        compaction (a cache kept only at breakpoints, none of which could go at the end of the
        frozen zone), the same share of the prefix before it."""
        tokens = float(self._count(messages[first:]))
        reach = turn.state.reach
        if reach is not None and reach < 1:
            tokens += (1 - reach) * (self._count(messages[:first]) + turn.extra)
        return tokens * turn.ratio

    # -- how deep ---------------------------------------------------------------------------

    def reduction(self, turn: Turn) -> Reduction:
        """Aim the re-arm gap under the soft line, so that a compaction frees room before the
        next one is due; evict only while past the trigger; past where the request would stop
        fitting the model's window (when known) rescue, down to the danger line (all in
        uncalibrated tokens)."""
        trigger = turn.trigger / turn.ratio
        aim = self.aim(turn) / turn.ratio
        floor = self.aim(turn, headroom=False) / turn.ratio
        estimated, transcript = turn.estimated, turn.estimated - turn.extra
        policy = self.options.trigger
        fit = rescue = None
        if (fitting := policy.fit(turn.asked.model, turn.window)) is not None:
            fit = fitting / turn.ratio
            rescue = policy.danger(turn.asked.model, turn.trigger, turn.window) / turn.ratio
        return pressure(
            estimated, transcript, aim=aim, hard=trigger, evict_to=floor, fit=fit, rescue_to=rescue
        )

    def aim(self, turn: Turn, *, headroom: bool = True) -> float:
        """Where a compaction aims (calibrated tokens): under the soft line by the re-arm gap,
        or (`headroom`) by the room the session grows into over `room_turns` turns at its
        observed rate when that is more, so the next compaction is that many turns away."""
        room: float = self.options.trigger.gap(turn.trigger)
        if headroom:
            room = max(room, self.room_turns(turn) * turn.tokens / turn.turns)
        return max(soft_line(turn.trigger) - room, 0.0)

    def room_turns(self, turn: Turn) -> float:
        """How many turns of growth a compaction leaves room for: `ROOM_PER_REWRITE` times as
        many as the turns of cache reads that re-writing a token costs (Anthropic's one-hour
        cache: 38; a model that reads at 0.05: 48), and at least `HEADROOM_TURNS` (that floor
        holds at Anthropic's 0.1 and 1.25, where the product is 23, and at GPT-4o's 0.5, 2),
        so each dearer compaction goes deeper and comes that much less often."""
        price = turn.prices
        return max(HEADROOM_TURNS, ROOM_PER_REWRITE * (price.write - price.cached) / price.cached)

    def pinned(self, turn: Turn, gate: Gate) -> int:
        """The newest messages this compaction never reduces: `preserve_recent`; past the
        danger line only the last exchange (`FORCED_PRESERVE`, or from the newest call on)."""
        preserve = self.options.plan.preserve_recent
        if gate.decision != "forced":
            return preserve
        work = turn.work
        newest_call = next((i for i in range(len(work) - 1, -1, -1) if work[i].tool_uses), None)
        last_exchange = FORCED_PRESERVE if newest_call is None else len(work) - newest_call
        return min(preserve, max(FORCED_PRESERVE, last_exchange))

    # -- what the rails did -----------------------------------------------------------------

    def pays_off(self, turn: Turn, applied: Applied, invalidated: float) -> bool:
        """Whether what the rails actually remove pays back the invalidation the gate estimated
        (the gate's saving is an estimate: results too small to cut, or kept by the judge, can
        leave a compaction that re-bills a whole transcript to save a few tokens a turn)."""
        removed = (applied.tokens_before - applied.tokens_after) * turn.ratio
        return self.pays(turn, invalidated, removed)

    def relieves(self, turn: Turn, applied: Applied) -> bool:
        """Whether a compaction forced past the danger line is worth its cost: it gets the
        request back under that line, or the request would otherwise not fit the model's window
        (or that is unknown); else (the bulk is in what the rails keep: recent results, verbatim
        calls, what the agent wrote) a partial one that re-bills everything after its first
        change to trim a little must pay that back like any other."""
        policy = self.options.trigger
        fit = policy.fit(turn.asked.model, turn.window)
        after = (applied.tokens_after + turn.extra) * turn.ratio
        if fit is None or turn.tokens >= fit:
            return True
        if after < policy.danger(turn.asked.model, turn.trigger, turn.window):
            return True
        first = first_changed(applied.messages, result_texts(turn.work), applied.briefed)
        if first is None:
            return True  # nothing changed: nothing re-billed
        return self.pays_off(turn, applied, self.rebilled(turn, applied.messages, first))

    def cheaper(self, turn: Turn, newer: Applied, opened: Applied, reduction: Reduction) -> Applied:
        """Past the hard line what earlier compactions decided may give way (`opened`), but
        re-deciding an old call moves the first change, and the cache's loss, back to it. When
        the rails on the newer results alone (`newer`) could not get under the line without
        evicting, opening the old calls wins if it gets under, or if what it saves pays back
        what it re-bills."""
        if not past(opened, reduction.hard):
            return opened
        before = result_texts(turn.work)
        first_new = first_changed(newer.messages, before, newer.briefed)
        first_all = first_changed(opened.messages, before, opened.briefed)
        if first_new is None or first_all is None or first_all >= first_new:
            return opened
        invalidated = self._count(opened.messages[first_all:first_new]) * turn.ratio
        saved = (newer.tokens_after - opened.tokens_after) * turn.ratio
        return opened if self.pays(turn, invalidated, saved) else newer


def past(applied: Applied, hard: float) -> bool:
    """Whether the rails left the transcript past the hard line (`hard`: the share to remove)."""
    return hard > 0 and applied.tokens_after > applied.tokens_before * (1 - hard)
