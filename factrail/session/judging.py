"""The judge round of one compaction: which calls still matter, under the fence and a deadline.

The rules decide whenever no model judge is configured, the fence keeps the session from it, the
plan cannot be built, or the judge does not answer in time; remembered answers are not asked
again. Model-judged, untainted rounds are written to the decision log, redacted as sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from factrail.core.model import Action, Message
from factrail.core.plan import (
    CompactOptions,
    Decisions,
    Plan,
    PlanError,
    build_plan,
    rules_actions,
)
from factrail.core.redact import redact_value
from factrail.core.tev import PROMPT_VERSION
from factrail.judges.base import Judge
from factrail.policy.decide import decide
from factrail.policy.taint import TaintScan
from factrail.stores.decisions import DecisionLog
from factrail.stores.schema import DECISION_SCHEMA, VERSION
from factrail.stores.state import SessionState, known_answers, remember_answers


@dataclass(slots=True)
class Judged:
    """The actions per call and how they were reached."""

    actions: dict[str, Action]
    judge: str = "rules"
    """`rules`, or the kind of the model judge that was asked."""
    reason: str = "rules"
    """The verdict: `rules`, `ok`, `ok-local`, `tainted`, `unproven`, `ok-rules` (the judge
    failed or left calls unanswered and the rules finished)."""
    requests: int = 0
    errors: list[str] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    """The judge's HTTP calls by outcome (`ok`, `status`, `transport`, `deadline`, …)."""
    calls_kept: frozenset[str] = frozenset()
    """Calls the judge said matter with their arguments though their results may go
    (`result_dropped`): their arguments are not briefed."""


class JudgeRound:
    """Asks the configured judge about one transcript (one instance serves every request)."""

    def __init__(
        self,
        judge: Judge,
        options: CompactOptions,
        *,
        deadline_ms: int,
        decisions: DecisionLog | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`decisions`: where model-judged, untainted rounds are logged (None: nowhere)."""
        self.judge = judge
        self.options = options
        self.deadline_ms = deadline_ms
        self.decisions = decisions
        self._clock = clock

    @property
    def remembers(self) -> str:
        """The judge's model and prompt version: answers from another are not reused."""
        return f"{self.judge.model}|{PROMPT_VERSION}"

    def _pinning(self, preserve: int | None) -> CompactOptions:
        """The plan options with `preserve` newest messages pinned (None: as configured)."""
        if preserve is None or preserve == self.options.preserve_recent:
            return self.options
        return replace(self.options, preserve_recent=preserve)

    async def run(
        self,
        session: str,
        messages: Sequence[Message],
        final: AbstractSet[str],
        state: SessionState,
        taint: TaintScan,
        preserve: int | None = None,
    ) -> Judged:
        """Actions for every call of `messages` (`final`: results not to be reduced again);
        new answers are remembered in `state`. `preserve`: the newest messages pinned on this
        compaction (None: `preserve_recent`)."""
        options = self._pinning(preserve)
        preserve = options.preserve_recent
        if self.judge.kind == "rules":
            return Judged(rules_actions(messages, preserve))
        verdict = decide(taint=taint, local=self.judge.local)
        if not verdict.model:
            return Judged(rules_actions(messages, preserve), reason=verdict.reason)
        try:
            plan = build_plan(
                messages, options, known_answers(state, self.remembers), frozenset(final)
            )
        except PlanError as err:
            return Judged(
                rules_actions(messages, preserve), "rules", "ok-rules", errors=[f"plan: {err}"]
            )
        judged = Judged({}, judge=self.judge.kind)
        answers: dict[str, float] = {}
        if plan.requests:
            deadline = time.monotonic() + self.deadline_ms / 1000
            round_ = await self.judge.ask(plan.requests, deadline=deadline)
            answers = dict(round_.answers)
            judged.requests = round_.requests
            judged.errors = [e.outcome for e in round_.errors]
            judged.outcomes = dict(round_.outcomes)
        outcome = plan.decide(answers)
        judged.actions = dict(outcome.actions)
        judged.calls_kept = frozenset(
            d.tool_use_id for d in outcome.decisions if d.reason == "result_dropped"
        )
        judged.reason = verdict.reason if not judged.errors else "ok-rules"
        remember_answers(state, self.remembers, outcome.new_answers)
        if self.decisions is not None and plan.requests and not taint.fenced:
            record = decision_record(session, self.judge, options, plan, answers, outcome)
            self.decisions.append(record, now=self._clock())
        return judged


def decision_record(
    session: str,
    judge: Judge,
    options: CompactOptions,
    plan: Plan,
    answers: Mapping[str, float],
    outcome: Decisions,
) -> dict[str, Any]:
    """One decision-log line: what was asked (redacted, as sent), answered and decided."""
    known = judge.known_secrets
    return {
        VERSION: DECISION_SCHEMA,
        "session": session,
        "judge": {"kind": judge.kind, "endpoint": judge.endpoint, "model": judge.model},
        "egress": options.egress,
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
