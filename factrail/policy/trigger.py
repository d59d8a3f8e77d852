"""When to compact: the token trigger, the soft line below it, and re-arm hysteresis.

Each compaction costs the provider's prompt cache from its first changed message, so after one
(its size is the session's *baseline*) the next waits until the transcript has grown by the
re-arm gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from factrail.policy.options import PolicyOptions

TriggerReason = Literal["below-threshold", "hysteresis", "threshold", "percent", "no-usage"]
DueReason = Literal["below-soft-line", "hysteresis", "soft-line", "hard-line"]


def _positive(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) and x > 0 else None


def trigger_tokens(window: float | None, percent: float, absolute: float) -> int | None:
    """The lower of `percent` of the context window and the absolute cap; None when neither is
    set (a figure ≤ 0 disables its half)."""
    w, p, cap = _positive(window), _positive(percent), _positive(absolute)
    candidates = [math.floor(cap)] if cap is not None else []
    if w is not None and p is not None:
        candidates.append(math.floor(w * p / 100))
    return min(candidates) if candidates else None


def rearm_gap(threshold: int | None, rearm: float, share: float = 0.25) -> int:
    """The configured gap when > 0, else `share` of the trigger (a quarter for the estate
    policy; rounded up), else 0."""
    gap = _positive(rearm)
    if gap is not None:
        return math.ceil(gap)
    return math.ceil(threshold * share) if threshold else 0


def soft_line(trigger: int) -> int:
    """Five sixths of the trigger: where the gateway starts compacting."""
    return trigger * 5 // 6


def baseline_key(session: str) -> str:
    """The session-store key of the size a session had right after its last compaction."""
    return f"baseline:{session}"


@dataclass(frozen=True, slots=True)
class TriggerLines:
    """The soft line, the hard line (the trigger) and the size the next compaction waits for."""

    soft: int
    hard: int
    need: int


def lines(trigger: int, baseline: float | None, rearm: float) -> TriggerLines:
    """The gateway's lines. After a compaction, `need` is the baseline plus the re-arm gap, but
    hysteresis never holds a transcript past the hard line, unless the compaction itself could
    not get under it (then every turn would compact; wait for the gap instead)."""
    soft = soft_line(trigger)
    base = _positive(baseline)
    if base is None:
        return TriggerLines(soft, trigger, soft)
    rearmed = math.ceil(base + rearm_gap(trigger, rearm))
    held = rearmed if base >= trigger else min(rearmed, trigger)
    return TriggerLines(soft, trigger, max(soft, held))


def due(tokens: float, lines: TriggerLines) -> tuple[bool, DueReason]:
    """Whether a transcript of `tokens` is due for compaction against the gateway's lines."""
    if tokens < lines.soft:
        return False, "below-soft-line"
    if tokens < lines.need:
        return False, "hysteresis"
    return True, "hard-line" if tokens >= lines.hard else "soft-line"


@dataclass(frozen=True, slots=True)
class TriggerDecision:
    """Whether to compact, why, and the lines used (None: never)."""

    run: bool
    reason: TriggerReason
    threshold: int | None
    need: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "reason": self.reason,
            "threshold": self.threshold,
            "need": self.need,
        }


def should_compact(
    tokens: float | None,
    *,
    percent_used: float | None,
    window: float | None,
    baseline: float | None,
    options: PolicyOptions,
    soft: bool = False,
) -> TriggerDecision:
    """The trigger decision; with `soft`, the threshold is the soft line (see `lines`).

    Without a token figure, only an enabled percent trigger fires, and never after a compaction.
    """
    trigger = trigger_tokens(window, options.compact_at_percent, options.compact_at_tokens)
    base = _positive(baseline)
    threshold = need = None
    if trigger is not None and soft:
        gateway = lines(trigger, base, options.rearm_tokens)
        threshold, need = gateway.soft, gateway.need
    elif trigger is not None:
        threshold = need = trigger
        if base is not None:
            need = max(trigger, math.ceil(base + rearm_gap(trigger, options.rearm_tokens)))
    if tokens is not None and math.isfinite(tokens):
        if threshold is None or need is None or tokens < threshold:
            return TriggerDecision(False, "below-threshold", threshold, need)
        if tokens < need:
            return TriggerDecision(False, "hysteresis", threshold, need)
        return TriggerDecision(True, "threshold", threshold, need)
    percent_trigger = _positive(options.compact_at_percent)
    used = percent_used if percent_used is not None and math.isfinite(percent_used) else None
    if percent_trigger is not None and used is not None and used >= percent_trigger and not base:
        return TriggerDecision(True, "percent", threshold, need)
    return TriggerDecision(False, "no-usage", threshold, need)
