"""One compaction step per request, shared by the gateway, `factrail compact` and `eval --sim`.

Read top to bottom, a turn: load the session's state and re-apply its stored plan; count tokens
(calibrated); scan the fence (every request: taint is sticky); stop unless the soft line is
crossed past the re-arm gap; ask the cost gate whether it compacts now (`gate`: when, and how
deep); ask the judge (rules on any failure); apply the fact rails; save the full outputs before
anything is returned; persist the new plan.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace

from factrail.core.analysis import Analysis
from factrail.core.apply import Applied, Reduction, apply
from factrail.core.classify import verbatim_calls
from factrail.core.formats.base import Document
from factrail.core.model import (
    Action,
    Message,
    collect_tool_calls,
    result_texts,
    transcript_tokens,
)
from factrail.core.rails import LAST_RESORT_TIER
from factrail.core.reapply import PlanEntry, plan_entry, reapply_plan, text_hash
from factrail.core.tokens import TokenCache
from factrail.judges.base import Judge
from factrail.policy.cost import Prices, prices, profile_for
from factrail.policy.provenance import Evidence
from factrail.policy.taint import TaintScan
from factrail.policy.trigger import due
from factrail.session.analyses import Analyses, Observe, collector_paused
from factrail.session.fencing import Aliases, fence_turn
from factrail.session.gate import CostGate, Decision, Gate, past
from factrail.session.history import compaction_record
from factrail.session.judging import JudgeRound
from factrail.session.options import EngineOptions
from factrail.session.result import TurnResult
from factrail.session.saving import OutputWriter, Saved
from factrail.session.turn import Asked, Turn
from factrail.session.zone import (
    MARK_SHARE,
    first_changed,
    frozen_through,
    stable_head,
)
from factrail.stores.decisions import DecisionLog
from factrail.stores.outputs import OutputStore
from factrail.stores.state import MAX_HISTORY, NOTHING, Observed, SessionState, StateStore

log = logging.getLogger("factrail.session")

TOUCH_S = 15.0
"""A turn that changes nothing saves the session only to say it was seen (its cache is warm),
and only when the last save is older than this: at most this much early on a cold cache."""
LEASE_MS = 60_000
"""How long a session's lease holds if its holder dies mid-turn (a turn is bounded by the
judge's deadline, well below this)."""
LEASE_WAIT_S = 15.0
"""How long a turn waits for the same session's turn elsewhere before going on read-only."""
LEASE_POLL_S = 0.05


class SessionCompactor:
    """Compacts one request's transcript for its session; the same object serves every request."""

    gate_type: type[CostGate] = CostGate
    """The cost gate it asks (a compaction the client asked for has its own, which always
    runs)."""

    def __init__(
        self,
        options: EngineOptions,
        *,
        state: StateStore,
        outputs: OutputStore | None,
        judge: Judge,
        decisions: DecisionLog | None = None,
        clock: Callable[[], float] = time.time,
        observe_preparation: Observe | None = None,
    ) -> None:
        """`decisions` logs model-judged rounds when `options.record_decisions` is set;
        `observe_preparation(outcome, seconds)` hears of every background preparation."""
        self.options = options
        self.state = state
        self.judging = JudgeRound(
            judge,
            options.plan,
            deadline_ms=options.judge_deadline_ms,
            decisions=decisions if options.record_decisions else None,
            clock=clock,
        )
        self.writer = (
            OutputWriter(outputs, options.outputs_route)
            if outputs is not None and options.save_outputs
            else None
        )
        self.analyses = Analyses(
            options.analysis_sessions, options.plan.head_chars, observe_preparation
        )
        self._clock = clock
        self._tokens = TokenCache()
        self.gate = self.gate_type(options, self.transcript_tokens, self._tokens)
        """When a due turn compacts, and how deep."""
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        """One lock per session in flight: two concurrent turns of a session never interleave
        their plans (the second re-applies what the first stored)."""

    @property
    def judge(self) -> Judge:
        """The configured judge."""
        return self.judging.judge

    def transcript_tokens(self, messages: Sequence[Message]) -> int:
        """Estimated tokens of texts, inputs and results (memoised for resent history)."""
        return transcript_tokens(messages, self._tokens)

    def observe_usage(
        self,
        session: str,
        prompt_tokens: int,
        estimated_tokens: int,
        taught: Observed = NOTHING,
    ) -> int | None:
        """Calibrate the estimate from the upstream's `usage.prompt_tokens` (smoothed ratio)
        and keep the rest an answer taught the session (`Observed`: the cache reach that prices
        its next compactions, its cache read, where its marker went), all in the state store
        so that every worker and replica sees the session alike. Returns the session's
        previous cache read (None: unknown)."""
        if prompt_tokens > 0 and estimated_tokens > 0:
            taught = replace(taught, ratio=prompt_tokens / estimated_tokens)
        if taught == NOTHING:
            return None
        try:
            return self.state.observe(session, taught)
        except Exception:  # a refinement: never fail the answer for it
            log.warning("could not store what a session's usage taught", exc_info=True)
            return None

    async def settled(self) -> None:
        """Wait for the background preparations started so far (tests, shutdown)."""
        await self.analyses.settled()

    def close(self) -> None:
        """Stop the preparation thread (queued preparations are dropped)."""
        self.analyses.close()

    # -- the step ---------------------------------------------------------------------------

    async def compact(
        self,
        session: str,
        doc: Document,
        *,
        model: str = "",
        extra_tokens: int = 0,
        evidence: Evidence | None = None,
        window: int | None = None,
        cache_ttl_s: float | None = None,
        last: bool = False,
        shadow: bool = False,
    ) -> TurnResult:
        """Re-apply the stored plan; compact when the soft line is crossed; save; persist.
        `evidence`: what the wire request tells the fence (its decoded calls, the client's
        session aliases, whether it continues a transcript not seen whole); `window`: the
        context window the client asked for, when it says (else the model's, from the table);
        `cache_ttl_s`: the prompt cache's lifetime the client asked for, when it says (Anthropic's
        one hour, OpenAI's 24-hour retention: the cache goes cold later, and Anthropic bills
        its one-hour entries' writes at twice the input price); `last`: the
        provider is asked to summarize the transcript (`Asked`); `shadow`: nothing it decides is
        sent (`Asked.shadow`)."""
        lock = self._locks.get(session)
        if lock is None:
            lock = self._locks[session] = asyncio.Lock()
        async with lock:
            lease = await self._lease(session)
            try:
                return await self._step(
                    session,
                    doc,
                    Asked(model, window, cache_ttl_s, last, shadow),
                    extra_tokens,
                    evidence or Evidence(),
                    lease is not None,
                )
            finally:
                if lease:
                    await asyncio.to_thread(self._release, session, lease)

    async def _lease(self, session: str) -> str | None:
        """The session's lease in the state store, which other processes sharing the store
        respect: two turns of one session never interleave their plans. Waits up to
        `LEASE_WAIT_S` for a turn elsewhere to finish; None when it did not; `""` when the store
        could not say (the turn goes on: compaction fails open)."""
        deadline = time.monotonic() + LEASE_WAIT_S
        while True:
            lease = await asyncio.to_thread(self._try_lease, session)
            if lease is not None or time.monotonic() >= deadline:
                return lease
            await asyncio.sleep(LEASE_POLL_S)

    def _try_lease(self, session: str) -> str | None:
        try:
            return self.state.lease(session, LEASE_MS)
        except Exception:
            log.warning("could not take a session's lease", exc_info=True)
            return ""

    def _release(self, session: str, lease: str) -> None:
        try:
            self.state.release(session, lease)
        except Exception:
            log.warning("could not release a session's lease", exc_info=True)

    async def _step(
        self,
        session: str,
        doc: Document,
        asked: Asked,
        extra_tokens: int,
        evidence: Evidence,
        writable: bool,
    ) -> TurnResult:
        """One turn; without the session's lease (`writable` False: a turn of the same session
        is running elsewhere) it only re-applies the stored plan and writes nothing."""
        loaded, answered, aliases = await asyncio.to_thread(self._load, session, evidence.aliases)
        turn = self._turn(session, doc, asked, extra_tokens, loaded, answered)
        result = TurnResult(
            outcome="reapplied" if turn.reapplied else "passthrough",
            tokens_before=turn.tokens,
            tokens_after=turn.tokens,
            trigger_tokens=turn.trigger,
            reapplied=len(turn.reapplied),
            compactions=turn.state.compactions,
            estimated_sent=turn.estimated,
            mark=turn.state.mark,
            prices=turn.prices,
        )
        writes = fence_turn(turn, evidence, aliases, self.options.fence, int(self._clock() * 1000))
        tainted_now = bool(writes) and writes[-1][0] == session
        result.fenced = tainted_now and not self.judge.local and self.judge.kind != "rules"
        if not writable:
            if turn.reapplied:
                result.document = turn.emit(turn.work)
            return result
        await asyncio.to_thread(self._save_all, writes[:-1] if tainted_now else writes)
        idle = self._idle_s(turn.state)
        lines = self.options.trigger.lines(turn.trigger, turn.state.baseline_tokens)
        is_due, turn.line = due(turn.tokens, lines)
        if turn.trigger > 0 and is_due:
            gate = self.gate.decide(turn, idle, self._verbatim(turn) | self._frozen(turn))
            result.decision = gate.decision
            if gate.go:
                compacted = await self._compact(turn, result, gate)
                if compacted is not None:
                    return compacted
                result.decision = "declined"
                return await self._pass(turn, result, persist=True)  # the judge's answers
        return await self._pass(turn, result, persist=tainted_now or idle is None or idle > TOUCH_S)

    async def _pass(self, turn: Turn, result: TurnResult, *, persist: bool) -> TurnResult:
        """A turn that does not compact: the re-applied transcript (or nothing) goes on."""
        if persist:
            await self._persist(turn)  # the taint, or when the session was last seen
        result.frozen_through = self._frozen_end(turn, turn.work)
        share = self.options.prepare_share
        if turn.trigger > 0 and share > 0 and turn.tokens >= turn.trigger * share:
            result.after_answer = functools.partial(
                self.analyses.prepare_later, turn.session, turn.work
            )
        if turn.reapplied:
            result.document = turn.emit(turn.work)
        return result

    def _idle_s(self, state: SessionState) -> float | None:
        """Seconds since the session's last request was seen (None: never seen)."""
        if not state.updated_ms:
            return None
        return max(0.0, self._clock() - state.updated_ms / 1000)

    def _prices(self, asked: Asked) -> Prices:
        profile = profile_for(self.options.price_profile, asked.model)
        return prices(profile, asked.model, asked.cache_ttl_s, self.options.model_prices)

    def _load(
        self, session: str, aliases: Sequence[str]
    ) -> tuple[SessionState | None, bool, Aliases]:
        """The session's state, whether the store answered, and the states of its aliases."""
        loaded, answered = self.state.fetch(session)
        return loaded, answered, [(key, *self.state.fetch(key)) for key in aliases]

    def _turn(
        self,
        session: str,
        doc: Document,
        asked: Asked,
        extra_tokens: int,
        loaded: SessionState | None,
        answered: bool,
    ) -> Turn:
        state = loaded or SessionState(plan={})
        whole, reapplied = reapply_plan(doc.messages, state.plan)
        head, work = whole[: doc.live], whole[doc.live :]
        return Turn(
            session=session,
            doc=doc,
            state=state,
            work=work,
            head=head,
            reapplied=reapplied,
            trigger=self.options.trigger.for_model(asked.model, asked.window),
            window=self.options.trigger.window_for(asked.model, asked.window),
            ratio=state.calibration or 1.0,
            estimated=self.transcript_tokens(work) + extra_tokens,
            turns=max(sum(1 for m in whole if m.role == "assistant"), 1),
            extra=extra_tokens,
            taint=TaintScan(),
            prices=self._prices(asked),
            answered=answered,
            asked=asked,
        )

    async def _compact(self, turn: Turn, result: TurnResult, gate: Gate) -> TurnResult | None:
        """Judge, run the rails, save, persist; None (it does not happen) when what the rails
        actually do falls short of what `gate` allowed the compaction for."""
        preserve = self.gate.pinned(turn, gate)
        judged = await self.judging.run(
            turn.session, turn.work, turn.reapplied, turn.state, turn.taint, preserve
        )
        result.judge, result.reason = judged.judge, judged.reason
        result.judge_requests = judged.requests
        result.judge_errors = judged.errors
        result.judge_outcomes = judged.outcomes
        turn.calls_kept = judged.calls_kept
        # The rails are CPU-bound and saving outputs is file I/O: off the event loop, so other
        # requests (and streams) keep flowing while a large transcript is compacted.
        actions = dict(judged.actions)
        for tool_use_id in self._verbatim(turn):
            actions[tool_use_id] = "keep"
        originals = result_texts(turn.doc.messages)
        applied = await asyncio.to_thread(self._apply, turn, actions, self.gate.reduction(turn))
        if gate.invalidated is not None and not self.gate.pays_off(turn, applied, gate.invalidated):
            return None
        if gate.decision == "forced" and not self.gate.relieves(turn, applied):
            return None
        saved = await asyncio.to_thread(self._save, turn, applied, originals)
        sent_texts = result_texts(applied.messages)
        result.save_failures = saved.failures
        first = first_changed(applied.messages, result_texts(turn.work), applied.briefed)
        result.reduced = self._record_plan(turn, applied, saved, originals, sent_texts)
        self._settle(turn, preserve)
        sent = self.transcript_tokens(applied.messages) + turn.extra
        after = math.ceil(sent * turn.ratio)
        turn.state.baseline_tokens = after
        turn.state.updated_ms = int(self._clock() * 1000)
        if first is None:
            # Due, but nothing left to reduce: not a compaction (the cache is intact), and the
            # re-arm gap from here keeps the next turns from trying again at once.
            await self._persist(turn)
            result.frozen_through = self._frozen_end(turn, turn.work)
            if turn.reapplied:
                result.document = turn.emit(turn.work)
            return result
        turn.state.compactions += 1
        if turn.asked.shadow:  # projected, never sent: `bets`, `forced`, `cold` count sent ones
            turn.state.shadow += 1
        else:
            count(turn.state, gate.decision)
        changed_on = self.transcript_tokens(applied.messages[first:])
        result.invalidated_tokens = math.ceil(changed_on * turn.ratio)
        # Cut by the rescue and sent so (a result whose original could not be saved goes whole).
        rescued = {i for i in applied.rescued if sent_texts.get(i) != originals.get(i)}
        result.rescued = len(rescued)
        turn.state.history = [
            *turn.state.history[-(MAX_HISTORY - 1) :],
            compaction_record(
                turn,
                result,
                applied,
                saved,
                after,
                (originals, sent_texts, first),
                rescued,
                int(self._clock() * 1000),
            ),
        ]
        await self._persist(turn)

        result.outcome = "compacted"
        result.frozen_through = self._frozen_end(turn, applied.messages)
        result.document = turn.emit(applied.messages)
        result.tokens_after = after
        result.estimated_sent = sent
        result.tier = applied.tier
        result.saved = saved.count
        result.redactions = saved.redactions
        result.compactions = turn.state.compactions
        return result

    def _apply(self, turn: Turn, actions: Mapping[str, Action], reduction: Reduction) -> Applied:
        """Run the rails (past the hard line on the newer results first: `CostGate.cheaper`)."""
        analysis = self.analyses.take(turn.session)
        verbatim = self._verbatim(turn)
        with collector_paused():
            applied = None
            if turn.line == "hard-line" and turn.state.settled:
                settled = frozenset(turn.reapplied).union(turn.state.settled, verbatim)
                applied = self._rails(turn, actions, reduction, settled, analysis)
                if applied.tier >= LAST_RESORT_TIER or past(applied, reduction.hard):
                    opened = self._rails(
                        turn, actions, reduction, self._frozen(turn) | verbatim, analysis
                    )
                    applied = self.gate.cheaper(turn, applied, opened, reduction)
            if applied is None:
                final = self._frozen(turn) | verbatim
                applied = self._rails(turn, actions, reduction, final, analysis)
        self.analyses.keep(turn.session, analysis)
        return applied

    def _save(self, turn: Turn, applied: Applied, originals: Mapping[str, str]) -> Saved:
        """Save every newly reduced original (and briefed argument) before the request leaves."""
        if self.writer is None:
            return Saved()
        saved = self.writer.save_outputs(turn.session, applied.changed, originals, applied.messages)
        plan = turn.state.plan
        fresh = {
            k: v
            for k, v in applied.briefed.items()
            if (entry := _entry_for(plan, k, originals.get(k, ""))) is None or entry.input is None
        }
        if fresh:
            unsaved = self.writer.save_inputs(
                turn.session, fresh, turn.doc.messages, applied.messages, saved
            )
            for tool_use_id in unsaved:
                del applied.briefed[tool_use_id]
        self.writer.expire(self._clock())
        return saved

    def _rails(
        self,
        turn: Turn,
        actions: Mapping[str, Action],
        reduction: Reduction,
        final: AbstractSet[str],
        analysis: Analysis,
    ) -> Applied:
        """The rails over the turn's transcript, leaving `final` as it is."""
        return apply(
            turn.work,
            actions,
            reduction=reduction,
            head_chars=self.options.plan.head_chars,
            final=final,
            count=self._tokens,
            memo=analysis,
            phrase=None if self.writer is None else self.writer.phrase(turn.session),
            calls_kept=turn.calls_kept,
            min_cut=self.options.min_cut_chars,
        )

    def _verbatim(self, turn: Turn) -> frozenset[str]:
        """The calls the rails never touch, found once per turn."""
        if turn.verbatim is None:
            turn.verbatim = frozenset(verbatim_calls(turn.work, self.options.keep_tools))
        return turn.verbatim

    def _frozen(self, turn: Turn) -> frozenset[str]:
        """Results this compaction leaves as they are: those re-applied from earlier ones and,
        until the hard line, every call an earlier compaction already decided."""
        if turn.line == "hard-line":
            return frozenset(turn.reapplied)
        return frozenset(turn.reapplied).union(turn.state.settled)

    def _frozen_end(self, turn: Turn, messages: Sequence[Message]) -> int | None:
        """The end of the frozen zone (`TurnResult.frozen_through`): the last message holding a
        settled result; before any, once the transcript is past `MARK_SHARE` of the trigger,
        the last message before the first call a compaction could change (None below that, so
        a session far from its trigger is forwarded as the client sent it)."""
        end = frozen_through(messages, turn.state.settled)
        if end is None and turn.trigger > 0 and turn.tokens >= turn.trigger * MARK_SHARE:
            end = stable_head(messages, self.options.keep_tools)
        return None if end is None else end + len(turn.head)

    def _settle(self, turn: Turn, preserve: int) -> None:
        """Remember every call this compaction decided (all but the pinned ones)."""
        present = {c.tool_use_id for c in collect_tool_calls(turn.work, preserve) if not c.pinned}
        kept = [i for i in turn.state.settled if i in present]
        turn.state.settled = kept + sorted(present.difference(kept))

    def _record_plan(
        self,
        turn: Turn,
        applied: Applied,
        saved: Saved,
        originals: Mapping[str, str],
        sent: Mapping[str, str],
    ) -> int:
        """Store how each result (and each briefed call) was reduced, for the next turns to
        re-apply byte for byte; how many results were reduced."""
        plan = turn.state.plan
        reduced = 0
        inputs = {u.tool_use_id: u.input for m in turn.doc.messages for u in m.tool_uses}
        for tool_use_id in {*applied.changed, *applied.briefed}:
            original = originals.get(tool_use_id)
            if original is None:
                continue
            final = saved.texts.get(tool_use_id, sent.get(tool_use_id, original))
            entry = _entry_for(plan, tool_use_id, original)
            briefed = applied.briefed.get(tool_use_id, entry.input if entry else None)
            if final == original and briefed is None:
                plan.pop(tool_use_id, None)
                continue
            reduced += tool_use_id in applied.changed and final != original
            plan[tool_use_id] = plan_entry(original, final, briefed, inputs.get(tool_use_id))
        turn.state.plan = {k: v for k, v in plan.items() if k in originals}
        return reduced

    async def _persist(self, turn: Turn) -> None:
        """Save the turn's state, off the event loop (a slow store delays only this turn)."""
        await asyncio.to_thread(self._save_all, [(turn.session, turn.state)])

    def _save_all(self, writes: Sequence[tuple[str, SessionState]]) -> None:
        for key, state in writes:
            try:
                self.state.save(key, state)
            except Exception:  # losing the state costs cache hits, never this request
                log.warning("could not save a session's state", exc_info=True)


def _entry_for(plan: Mapping[str, PlanEntry], tool_use_id: str, original: str) -> PlanEntry | None:
    """The plan's entry for this very original (one made for another call under the same id
    lends nothing: not its reduction, not its briefed arguments)."""
    entry = plan.get(tool_use_id)
    return entry if entry is not None and entry.original_hash == text_hash(original) else None


def count(state: SessionState, decision: Decision | None) -> None:
    """Count a sent compaction by why the cost gate ran it (a count that is None, of a record
    from before it was kept, stays None)."""
    if state.bets is not None:
        state.bets += decision == "pays"
    if state.forced is not None:
        state.forced += decision == "forced"
    if state.cold is not None:
        state.cold += decision == "cold"
