"""One compaction step per request, shared by the gateway and `factrail eval --sim`.

Re-apply the session's stored plan, count tokens, decide whether the soft line (5/6 of the
trigger) is crossed past the re-arm gap, ask the judge under a deadline (rules on any failure),
apply the fact rails, save the full outputs before anything is returned, persist the plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import hashlib
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from factrail.core.analysis import Analysis
from factrail.core.apply import Applied, Reduction, apply, prepare
from factrail.core.formats.base import Document
from factrail.core.marks import is_compacted, saved_output_phrase, swap_full_output_note
from factrail.core.model import (
    Action,
    Message,
    input_json,
    is_prompt,
    transcript_tokens,
)
from factrail.core.plan import (
    CallAnswer,
    CompactOptions,
    Plan,
    PlanError,
    build_plan,
    rules_actions,
)
from factrail.core.pressure import pressure
from factrail.core.redact import redact_value
from factrail.core.tev import PROMPT_VERSION
from factrail.core.tokens import TokenCache
from factrail.judges.base import Judge
from factrail.policy.decide import decide
from factrail.policy.options import DEFAULT_DEADLINE_MS, DEFAULT_TAINT_SKILLS, DEFAULT_TAINT_TOOLS
from factrail.policy.taint import TaintFence, TaintScan, merge_taint, taint_write, tool_refs
from factrail.policy.trigger import due, lines
from factrail.policy.trigger import rearm_gap as policy_rearm_gap
from factrail.stores.decisions import DecisionLog
from factrail.stores.outputs import OutputStore, SavedOutput, output_id
from factrail.stores.saver import OutputSaver, Staging
from factrail.stores.state import (
    PlanEntry,
    SessionState,
    StateStore,
    answer_key,
    remember_answers,
    text_hash,
)

log = logging.getLogger("factrail.session")

Outcome = Literal["passthrough", "reapplied", "compacted"]
MAX_QUEUED_PREPARATIONS = 8


class _CollectorPause:
    """The cyclic garbage collector off while the rails run: they allocate tens of thousands of
    short-lived sets and tuples and no cycles, and the collections that triggers over a large heap
    cost ≈ 15% of a compaction. Concurrent pauses nest; the last one out turns the collector back
    on, if it was on before the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._was_enabled:
                    gc.enable()


_gc_paused = _CollectorPause()
_yield = functools.partial(time.sleep, 0)


@dataclass(frozen=True, slots=True)
class CompactorConfig:
    """Per-deployment compaction settings (the gateway builds it from its settings)."""

    trigger_tokens: int = 180_000
    """Absolute trigger T; the per-model trigger is min(percent × window, this)."""
    trigger_percent: float = 60.0
    rearm_tokens: int = 40_000
    """Hysteresis: after a compaction the next is due only past baseline + this gap."""
    preserve_recent: int = 6
    head_chars: int = 200
    judge_deadline_ms: int = DEFAULT_DEADLINE_MS
    egress: Literal["full", "metadata"] = "full"
    keep_threshold: float = 0.5
    taint_tools: tuple[str, ...] = DEFAULT_TAINT_TOOLS
    taint_skills: tuple[str, ...] = DEFAULT_TAINT_SKILLS
    save_outputs: bool = True
    record_decisions: bool = True
    outputs_route: str | None = "/v1/factrail/outputs/"
    """When set, the note in reduced text names this HTTP route beside the file path."""
    context_windows: dict[str, int] = field(default_factory=dict)
    """Model-name prefix → context window in tokens (longest prefix wins)."""
    trigger_by_model: dict[str, int] = field(default_factory=dict)
    """Model-name prefix → absolute trigger for that family, in place of `trigger_tokens`."""
    prepare_share: float = 0.5
    """Below the trigger but past this share of it, a turn's new results are analysed in the
    background while the upstream answers, so the compaction turn has less to do (0: never)."""
    analysis_sessions: int = 8
    """How many sessions' analyses are kept in memory (least recently used go first)."""


@dataclass(slots=True)
class TurnResult:
    """What one step did, for the response header, the metrics and the log line."""

    outcome: Outcome
    document: Any | None = None
    """The emitted wire document when anything changed, else None (forward the original)."""
    tokens_before: int = 0
    tokens_after: int = 0
    trigger_tokens: int = 0
    judge: str = "rules"
    reason: str = ""
    tier: int = 0
    reapplied: int = 0
    reduced: int = 0
    saved: int = 0
    judge_requests: int = 0
    judge_errors: list[str] = field(default_factory=list)
    judge_outcomes: dict[str, int] = field(default_factory=dict)
    """The judge's HTTP calls by outcome (`ok`, `status`, `transport`, `deadline`, …)."""
    redactions: dict[str, int] = field(default_factory=dict)
    fenced: bool = False
    """The fence kept a model judge away from this session for the first time."""
    compactions: int = 0
    estimated_sent: int = 0
    """Uncalibrated estimate of the tokens forwarded (what `observe_usage` compares against)."""
    after_answer: Callable[[], None] | None = None
    """Set when the turn's results are worth analysing ahead of the compaction turn: the caller
    invokes it once the answer is sent (so the analysis never delays this answer); it queues the
    work on the compactor's preparation thread and returns at once."""


def by_prefix(model: str, table: Mapping[str, int]) -> int | None:
    """The value for `model` by longest matching prefix (case-insensitive, provider/ dropped)."""
    name = model.rsplit("/", 1)[-1].lower()
    best: tuple[int, int] | None = None
    for prefix, value in table.items():
        p = prefix.lower()
        if name.startswith(p) and (best is None or len(p) > best[0]):
            best = (len(p), value)
    return best[1] if best else None


def trigger_for(model: str, config: CompactorConfig) -> int:
    """T = min(percent × context window, absolute tokens), whichever exist; the absolute
    trigger of the model's family when one is configured."""
    window = by_prefix(model, config.context_windows)
    absolute = by_prefix(model, config.trigger_by_model) or config.trigger_tokens
    candidates = []
    if window and config.trigger_percent > 0:
        candidates.append(int(window * config.trigger_percent / 100))
    if absolute > 0:
        candidates.append(absolute)
    return min(candidates) if candidates else 0


def rearm_gap(trigger: int, rearm: int) -> int:
    """The configured re-arm gap, or an eighth of the trigger (one compaction, then room for
    about an eighth of the trigger of new context before the next is due)."""
    return policy_rearm_gap(trigger, rearm, share=1 / 8)


def session_key(header: str | None, doc: Document, model: str) -> str:
    """The caller's `X-Factrail-Session`, else a hash of the transcript's stable head."""
    if header and header.strip():
        return "h-" + hashlib.blake2b(header.strip().encode(), digest_size=12).hexdigest()
    first_user = next((m.text for m in doc.messages if is_prompt(m)), "")
    family = re.split(r"[-:@/]", model.lower(), maxsplit=1)[0] if model else ""
    head = "\x00".join([*doc.system_texts, first_user, family])
    return "s-" + hashlib.blake2b(head.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


class SessionCompactor:
    """Compacts one request's transcript for its session; the same object serves every request."""

    def __init__(
        self,
        config: CompactorConfig,
        *,
        state: StateStore,
        outputs: OutputStore | None,
        judge: Judge,
        decisions: DecisionLog | None = None,
        clock: Callable[[], float] = time.time,
        observe_preparation: Callable[[str, float], None] | None = None,
        saver: OutputSaver | None = None,
    ) -> None:
        """`observe_preparation(outcome, seconds)` hears of every background preparation:
        `done`, `failed` or `skipped` (the queue was full). `saver`, a process staging outputs
        for `outputs` while the rails run, is optional (without it they are saved after)."""
        self.config = config
        self.state = state
        self.outputs = outputs
        self.judge = judge
        self.decisions = decisions
        self.saver = saver
        self._clock = clock
        self._tokens = TokenCache()
        self._analyses: OrderedDict[str, Analysis] = OrderedDict()
        self._analyses_lock = threading.Lock()
        self._preparing: set[asyncio.Future[None]] = set()
        self._preparer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="factrail-prepare")
        """One thread: preparations queue behind each other, never in front of a compaction."""
        self._observe_preparation = observe_preparation or (lambda outcome, seconds: None)

    # -- what earlier turns learnt ----------------------------------------------------------

    def _take_analysis(self, session: str) -> Analysis | None:
        """The session's analysis, for this caller alone until `_keep_analysis` (None while
        another compaction or preparation of the session holds it)."""
        with self._analyses_lock:
            return self._analyses.pop(session, None)

    def _keep_analysis(self, session: str, analysis: Analysis) -> None:
        dropped: list[Analysis] = []
        with self._analyses_lock:
            self._analyses[session] = analysis
            while len(self._analyses) > max(self.config.analysis_sessions, 0):
                dropped.append(self._analyses.popitem(last=False)[1])
        if dropped:
            # Freeing a long session's analysis (tens of thousands of objects) takes ≈ 2 ms:
            # on the preparation thread, not on the path of the request that evicted it.
            with contextlib.suppress(RuntimeError):  # shut down: freed here instead
                self._preparer.submit(dropped.clear)

    def _prepare(self, session: str, messages: Sequence[Message]) -> None:
        """Analyse the turn's new results into the session's analysis (a worker thread)."""
        analysis = self._take_analysis(session) or Analysis()
        started = time.perf_counter()
        try:
            with _gc_paused():
                # Sleeping 0 s after each result hands the interpreter to the threads serving
                # requests, which would otherwise wait up to the 5 ms switch interval each time.
                prepare(messages, analysis, head_chars=self.config.head_chars, between=_yield)
        except Exception:  # an analysis is only ever a head start: the compaction redoes it
            self._observe_preparation("failed", time.perf_counter() - started)
            return
        self._keep_analysis(session, analysis)
        self._observe_preparation("done", time.perf_counter() - started)

    def _prepare_later(self, session: str, messages: Sequence[Message]) -> None:
        """Queue `_prepare` on the preparation thread without waiting for it (skipped while the
        queue is full: a preparation is only ever a head start). Needs a running event loop."""
        if len(self._preparing) >= MAX_QUEUED_PREPARATIONS:
            self._observe_preparation("skipped", 0.0)
            return
        job = asyncio.get_running_loop().run_in_executor(
            self._preparer, self._prepare, session, messages
        )
        self._preparing.add(job)
        job.add_done_callback(self._preparing.discard)

    async def settled(self) -> None:
        """Wait for the background preparations started so far (tests, shutdown)."""
        while self._preparing:
            await asyncio.gather(*self._preparing, return_exceptions=True)

    # -- counting ---------------------------------------------------------------------------

    def transcript_tokens(self, messages: Sequence[Message]) -> int:
        """Estimated tokens of texts, inputs and results (memoised for resent history)."""
        return transcript_tokens(messages, self._tokens)

    def observe_usage(self, session: str, prompt_tokens: int, estimated_tokens: int) -> None:
        """Calibrate the estimate from the upstream's `usage.prompt_tokens` (smoothed ratio)."""
        if prompt_tokens <= 0 or estimated_tokens <= 0:
            return
        with contextlib.suppress(Exception):  # the store smooths and bounds the ratio
            self.state.update_calibration(session, prompt_tokens / estimated_tokens)

    def close(self) -> None:
        """Stop the saver process and the preparation thread (queued preparations are
        dropped: they were only ever a head start)."""
        if self.saver is not None:
            self.saver.close()
        self._preparer.shutdown(wait=False, cancel_futures=True)

    # -- the step ---------------------------------------------------------------------------

    async def compact(
        self,
        session: str,
        doc: Document,
        *,
        model: str = "",
        extra_tokens: int = 0,
    ) -> TurnResult:
        """Re-apply the stored plan; compact when the soft line is crossed; save; persist."""
        cfg = self.config
        state = self.state.load(session) or SessionState(plan={})
        work, reapplied = reapply_plan(doc.messages, state.plan)
        ratio = state.calibration or 1.0
        transcript = self.transcript_tokens(work)
        tokens = math.ceil((transcript + extra_tokens) * ratio)
        trigger = trigger_for(model, cfg)
        result = TurnResult(
            outcome="reapplied" if reapplied else "passthrough",
            tokens_before=tokens,
            tokens_after=tokens,
            trigger_tokens=trigger,
            reapplied=len(reapplied),
            compactions=state.compactions,
            estimated_sent=transcript + extra_tokens,
        )
        # The fence is scanned on every request, not only at compaction: a fenced call seen once
        # taints the session for good, even if the agent's own summary later drops it.
        fence = TaintFence(tools=cfg.taint_tools, skills=cfg.taint_skills)
        scan = fence.scan(tool_refs(work))
        taint = merge_taint(state.taint, scan)
        record = taint_write(state.taint, scan, int(self._clock() * 1000))
        if record is not None:
            state.taint = record
            result.fenced = not self.judge.local and self.judge.kind != "rules"
        gap = rearm_gap(trigger, cfg.rearm_tokens)
        if trigger <= 0 or not due(tokens, lines(trigger, state.baseline_tokens, gap))[0]:
            if record is not None:
                with contextlib.suppress(Exception):
                    self.state.save(session, state)
            if trigger > 0 and cfg.prepare_share > 0 and tokens >= trigger * cfg.prepare_share:
                result.after_answer = functools.partial(self._prepare_later, session, work)
            return self._finish_without_compaction(result, doc, work, reapplied)
        return await self._compact(
            session, doc, work, reapplied, state, taint, result, ratio, transcript, extra_tokens
        )

    def _finish_without_compaction(
        self, result: TurnResult, doc: Document, work: list[Message], reapplied: set[str]
    ) -> TurnResult:
        if reapplied:
            result.document = doc.emit(work)
        return result

    async def _compact(
        self,
        session: str,
        doc: Document,
        work: list[Message],
        reapplied: set[str],
        state: SessionState,
        taint: TaintScan,
        result: TurnResult,
        ratio: float,
        transcript: int,
        extra_tokens: int,
    ) -> TurnResult:
        cfg = self.config
        decisions = await self._decide(session, work, reapplied, state, taint, result)
        trigger_est = result.trigger_tokens / ratio
        gap = rearm_gap(result.trigger_tokens, cfg.rearm_tokens) / ratio
        reduction = pressure(transcript + extra_tokens, trigger_est, transcript, gap).reduction()
        # The rails are CPU-bound and saving outputs is file I/O: off the event loop, so other
        # requests (and streams) keep flowing while a large transcript is compacted.
        applied, originals, saved = await asyncio.to_thread(
            self._apply_and_save, session, doc, work, decisions, reduction, reapplied, state, result
        )
        messages = applied.messages

        reduced = 0
        for tool_use_id, text in applied.changed.items():
            original = originals.get(tool_use_id)
            if original is None:
                continue
            final = saved.get(tool_use_id, text)
            briefed = applied.briefed.get(tool_use_id, _planned_input(state, tool_use_id))
            if final == original and briefed is None:
                state.plan.pop(tool_use_id, None)
                continue
            reduced += final != original
            state.plan[tool_use_id] = PlanEntry(
                original_hash=text_hash(original), reduced_text=final, input=briefed
            )
        present = set(originals)
        state.plan = {k: v for k, v in state.plan.items() if k in present}
        sent = self.transcript_tokens(messages) + extra_tokens
        after = math.ceil(sent * ratio)
        result.estimated_sent = sent
        state.baseline_tokens = after
        state.compactions += 1
        state.updated_ms = int(self._clock() * 1000)
        with contextlib.suppress(Exception):
            self.state.save(session, state)

        result.outcome = "compacted"
        result.document = doc.emit(messages)
        result.tokens_after = after
        result.tier = applied.tier
        result.reduced = reduced
        result.compactions = state.compactions
        return result

    def _apply_and_save(
        self,
        session: str,
        doc: Document,
        work: list[Message],
        decisions: Mapping[str, Action],
        reduction: Reduction,
        reapplied: set[str],
        state: SessionState,
        result: TurnResult,
    ) -> tuple[Applied, dict[str, str], dict[str, str]]:
        """Apply the rails, then save every newly reduced original (and briefed argument)."""
        originals = {r.tool_use_id: r.text for m in doc.messages for r in m.tool_results}
        staging = self._stage_ahead(session, decisions, reapplied, originals)
        analysis = self._take_analysis(session) or Analysis()
        with _gc_paused():
            applied = apply(
                work,
                decisions,
                reduction=reduction,
                head_chars=self.config.head_chars,
                final=frozenset(reapplied),
                count=self._tokens,
                memo=analysis,
            )
        self._keep_analysis(session, analysis)
        saved = self._save_outputs(
            session, applied.changed, originals, applied.messages, result, staging
        )
        self._save_inputs(session, applied.briefed, doc.messages, state)
        if self.outputs is not None:
            # Saved outputs expire after 30 days; the sweep runs at most once a day.
            with contextlib.suppress(OSError):
                self.outputs.maybe_expire(self._clock())
        return applied, originals, saved

    async def _decide(
        self,
        session: str,
        work: list[Message],
        reapplied: set[str],
        state: SessionState,
        taint: TaintScan,
        result: TurnResult,
    ) -> dict[str, Action]:
        """Actions per call: the judge's where it answered in time, the rules everywhere else."""
        cfg = self.config
        if self.judge.kind == "rules":
            result.judge, result.reason = "rules", "rules"
            return rules_actions(work, cfg.preserve_recent)
        verdict = decide(
            enabled=True,
            credentials=True,
            taint=taint,
            local=self.judge.local,
            fallback="rules",
        )
        if verdict.judge != "model":
            result.judge, result.reason = "rules", verdict.reason
            return rules_actions(work, cfg.preserve_recent)
        options = CompactOptions(
            preserve_recent=cfg.preserve_recent,
            head_chars=cfg.head_chars,
            egress=cfg.egress,
            keep_threshold=cfg.keep_threshold,
        )
        prefix = f"|{self.judge.model}|{PROMPT_VERSION}"
        known = {
            key.split("|", 1)[0]: CallAnswer(keep_call=v["keepCall"], keep_result=v["keepResult"])
            for key, v in state.answers.items()
            if key.endswith(prefix)
        }
        try:
            plan = build_plan(work, options, known, frozenset(reapplied))
        except PlanError as err:
            result.judge, result.reason = "rules", "ok-rules"
            result.judge_errors.append(f"plan: {err}")
            return rules_actions(work, cfg.preserve_recent)
        answers: dict[str, float] = {}
        if plan.requests:
            deadline = time.monotonic() + cfg.judge_deadline_ms / 1000
            round_ = await self.judge.ask(plan.requests, deadline=deadline)
            answers = round_.answers
            result.judge_requests = round_.requests
            result.judge_errors.extend(e.outcome for e in round_.errors)
            result.judge_outcomes = dict(round_.outcomes)
        outcome = plan.decide(answers)
        result.judge = self.judge.kind
        judged_all = not result.judge_errors
        result.reason = verdict.reason if judged_all else "ok-rules"
        remember_answers(
            state,
            {
                answer_key(tool_use_id, self.judge.model, PROMPT_VERSION): {
                    "keepCall": answer.keep_call,
                    "keepResult": answer.keep_result,
                }
                for tool_use_id, answer in outcome.new_answers.items()
            },
        )
        if (
            self.decisions is not None
            and cfg.record_decisions
            and plan.requests
            and not taint.tainted
        ):
            self.decisions.append(
                decision_record(session, self.judge, cfg.egress, plan, answers, outcome),
                now=self._clock(),
            )
        return dict(outcome.actions)

    def _save_inputs(
        self,
        session: str,
        briefed: Mapping[str, dict[str, Any]],
        originals: Sequence[Message],
        state: SessionState,
    ) -> None:
        """Save the full arguments of every call briefed for the first time, as
        `<tool_use_id>.input.txt` beside the saved outputs (nothing is lost)."""
        if self.outputs is None or not self.config.save_outputs or not briefed:
            return
        fresh = {k for k in briefed if k not in state.plan or state.plan[k].input is None}
        for m in originals:
            for u in m.tool_uses:
                if u.tool_use_id in fresh:
                    with contextlib.suppress(OSError):
                        self.outputs.save(session, f"{u.tool_use_id}.input", input_json(u))

    def _stage_ahead(
        self,
        session: str,
        decisions: Mapping[str, Action],
        reapplied: AbstractSet[str],
        originals: Mapping[str, str],
    ) -> Staging | None:
        """Have the saver process stage every original the rails may reduce while they run
        (None: `_save_outputs` saves in this thread)."""
        if self.saver is None or self.outputs is None or not self.config.save_outputs:
            return None
        candidates = [
            (tool_use_id, text)
            for tool_use_id, text in originals.items()
            if decisions.get(tool_use_id, "keep") != "keep"
            and tool_use_id not in reapplied
            and not is_compacted(text)
        ]
        try:
            return self.saver.stage(session, candidates)
        except Exception:  # the saver only ever saves time: never a reason not to compact
            log.warning("could not stage outputs; saving in-line", exc_info=True)
            return None

    def _save_outputs(
        self,
        session: str,
        changed: dict[str, str],
        originals: Mapping[str, str],
        messages: list[Message],
        result: TurnResult,
        staging: Staging | None = None,
    ) -> dict[str, str]:
        """Save every newly reduced original before the reduced request leaves; swap the notes.

        A result whose note, once it names the file, would be no shorter than the original keeps
        its original text: a reduction never lengthens a result. What the saver process staged
        is committed (the rest of it removed); anything it could not stage is saved here.
        """
        if self.outputs is None or not self.config.save_outputs:
            return {}
        swapped: dict[str, str] = {}
        notes: dict[str, str] = {}
        paths = self.outputs.paths_for(session, changed)
        for tool_use_id, text in changed.items():
            original = originals.get(tool_use_id)
            if original is None or is_compacted(original):
                continue
            where = paths[tool_use_id]
            if self.config.outputs_route:
                where += f" (GET {self.config.outputs_route}{output_id(session, tool_use_id)})"
            note = swap_full_output_note(text, tool_use_id, saved_output_phrase(where))
            if len(note) >= len(original):
                swapped[tool_use_id] = original
            else:
                notes[tool_use_id] = note
        saved: dict[str, SavedOutput | OSError] = {}
        if staging is not None and self.saver is not None:
            try:
                saved = self.saver.commit(staging, notes) or {}
            except Exception:  # whatever the staging did, what is missing is saved in-line
                log.warning("could not commit staged outputs; saving in-line", exc_info=True)
        rest = [(i, originals[i]) for i in notes if not isinstance(saved.get(i), SavedOutput)]
        if rest:
            saved.update(self.outputs.save_all(session, rest))
        for tool_use_id, got in saved.items():
            if isinstance(got, OSError):
                continue  # its note keeps naming the call, as before any save
            swapped[tool_use_id] = notes[tool_use_id]
            result.saved += 1
            for family, n in got.redactions.items():
                result.redactions[family] = result.redactions.get(family, 0) + n
        if swapped:
            for m in messages:
                for r in m.tool_results:
                    if r.tool_use_id in swapped:
                        r.text = swapped[r.tool_use_id]
                for u in m.tool_uses:
                    if u.tool_use_id in swapped and u.text is not None:
                        u.text = swapped[u.tool_use_id]
        return swapped


def _planned_input(state: SessionState, tool_use_id: str) -> dict[str, Any] | None:
    entry = state.plan.get(tool_use_id)
    return entry.input if entry else None


def reapply_plan(
    messages: Sequence[Message], plan: Mapping[str, PlanEntry]
) -> tuple[list[Message], set[str]]:
    """Swap in every stored reduction whose original text still hashes the same.

    Matching on the id *and* the hash means a reused tool-call id never picks up a wrong
    reduction. Messages without a planned result are shared, not copied.
    """
    if not plan:
        return list(messages), set()
    out: list[Message] = []
    done: dict[str, str] = {}
    inputs: dict[str, dict[str, Any]] = {}
    for m in messages:
        hits = [r for r in m.tool_results if r.tool_use_id in plan]
        if not hits:
            out.append(m)
            continue
        copy = m.copy()
        for r in copy.tool_results:
            entry = plan.get(r.tool_use_id)
            if entry is None or entry.reduced_text == r.text:
                continue
            if text_hash(r.text) != entry.original_hash:
                continue
            done[r.tool_use_id] = r.text
            r.text = entry.reduced_text
            if entry.input is not None:
                inputs[r.tool_use_id] = entry.input
        out.append(copy)
    for i, m in enumerate(out):
        if not any(u.tool_use_id in done for u in m.tool_uses):
            continue
        copy = m.copy()
        for u in copy.tool_uses:
            if u.tool_use_id in inputs:
                u.input = inputs[u.tool_use_id]
            if u.tool_use_id in done and u.text == done[u.tool_use_id]:
                u.text = plan[u.tool_use_id].reduced_text
        out[i] = copy
    return out, set(done)


def decision_record(
    session: str,
    judge: Judge,
    egress: str,
    plan: Plan,
    answers: Mapping[str, float],
    outcome: Any,
) -> dict[str, Any]:
    """One decision-log line: what was asked (redacted, as sent), answered and decided."""
    known = judge.known_secrets
    return {
        "session": session,
        "judge": {
            "kind": judge.kind,
            "endpoint": judge.endpoint,
            "model": judge.model,
        },
        "egress": egress,
        "requests": [
            {
                "state": redact_value(r.state, known)[0],
                "questions": redact_value(r.questions, known)[0],
                "answers": {q: answers[q] for q in r.questions if q in answers},
                "calls": [list(c) for c in r.calls],
            }
            for r in plan.requests
        ],
        "decisions": [asdict(d) for d in outcome.decisions],
    }
