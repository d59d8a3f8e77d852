"""What one compaction step did (`TurnResult`): for the response header, the metrics, the
log line and the caller's bill."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from factrail.policy.cost import Prices
from factrail.session.gate import Decision

Outcome = Literal["passthrough", "reapplied", "compacted"]


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
    save_failures: dict[str, int] = field(default_factory=dict)
    """Reduced originals that could not be saved, by reason (`quota`, `error`)."""
    rescued: int = 0
    """Recent results (kept by their action) cut because the request would not fit the model's
    window."""
    fenced: bool = False
    """The fence kept a model judge away from this session for the first time."""
    decision: Decision | None = None
    """What the cost gate made of the turn when it was due (None: not due)."""
    compactions: int = 0
    invalidated_tokens: int = 0
    """Tokens from the first message this compaction changed to the end: what the provider's
    prompt cache re-reads at full price (0 when nothing was compacted)."""
    frozen_through: int | None = None
    """The last message (engine index, one per wire message) of the frozen zone: what earlier
    compactions decided and no compaction short of the danger line will change; before the
    first one, once a compaction is in sight (`MARK_SHARE`), the messages before the first
    call it could change. A cache breakpoint there lets the next compaction re-read everything
    before it from cache."""
    estimated_sent: int = 0
    """Uncalibrated estimate of the tokens forwarded (what `observe_usage` compares against)."""
    prices: Prices | None = None
    """The prices the turn is billed at (its model's, under the configured profile): what the
    gateway prices the answer's usage at for the session's bill."""
    mark: dict[str, Any] | None = None
    """Where the gateway last put the session's cache marker, as the state store holds it
    (`SessionState.mark`, opaque here)."""
    after_answer: Callable[[], None] | None = None
    """Set when the turn's results are worth analysing ahead of the compaction turn: the caller
    invokes it once the answer is sent (so the analysis never delays this answer); it queues the
    work on the preparation thread and returns at once."""
