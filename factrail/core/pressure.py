"""How much to reduce: aim back at 5/6 of the trigger; evict only to get under the trigger.

Every figure is in estimated tokens, and so are the fractions: `target` and `hard` are the shares
of the transcript's estimated tokens to remove (the context's overhead, i.e. system prompt and
tool schemas, does not shrink and is taken out first).
"""

from __future__ import annotations

from dataclasses import dataclass

from factrail.core.apply import Reduction

RAIL_FLOOR = 0.3
GATE_WITHOUT_FIGURES = 0.25
SOFT_SHARE = 5 / 6
TARGET_MIN = 0.05
TARGET_MAX = 0.9


@dataclass(frozen=True, slots=True)
class Pressure:
    """`target`: share to remove (soft line); `hard`: share past which the oldest give way;
    `gate`: the least reduction worth sending."""

    target: float
    hard: float
    gate: float

    def reduction(self) -> Reduction:
        """The `Reduction` that `apply` takes."""
        return Reduction(target=self.target, hard=self.hard)


def _clamp(x: float, lo: float, hi: float) -> float:
    return min(max(x, lo), hi)


def _positive(x: float | None) -> bool:
    return x is not None and x > 0 and x == x and x != float("inf")


def pressure(
    context_tokens: float | None,
    trigger_tokens: float | None,
    transcript_tokens: float | None,
    headroom: float = 0.0,
) -> Pressure:
    """Targets from the context size, the trigger and the transcript's estimated tokens.

    The rails aim `headroom` tokens under the soft line (5/6 of the trigger), so that a
    compaction frees room for a re-arm gap before the next one is due; the hard line stays the
    trigger itself.
    """
    if not (
        _positive(context_tokens) and _positive(trigger_tokens) and _positive(transcript_tokens)
    ):
        return Pressure(target=RAIL_FLOOR, hard=RAIL_FLOOR, gate=GATE_WITHOUT_FIGURES)
    assert context_tokens is not None and trigger_tokens is not None
    assert transcript_tokens is not None
    overhead = max(0.0, context_tokens - transcript_tokens)

    def need(line: float) -> float:
        return 1 - (line - overhead) / transcript_tokens

    hard = _clamp(need(trigger_tokens), 0.0, TARGET_MAX)
    return Pressure(
        target=_clamp(
            need(max(trigger_tokens * SOFT_SHARE - max(headroom, 0.0), 0.0)), TARGET_MIN, TARGET_MAX
        ),
        hard=hard,
        gate=hard,
    )


def reduction_for(
    context_tokens: float | None, trigger_tokens: float | None, transcript_tokens: float | None
) -> Reduction:
    """Shorthand for `pressure(...).reduction()`."""
    return pressure(context_tokens, trigger_tokens, transcript_tokens).reduction()
