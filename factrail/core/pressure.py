"""How much to reduce: aim back at a line (the policy's soft line, less room to grow), and evict
only to get under the hard line.

Every figure is in estimated tokens, and the result is in shares of the transcript's estimated
tokens to remove (the context's overhead, i.e. system prompt and tool schemas, does not shrink
and is taken out first).
"""

from __future__ import annotations

import math

from factrail.core.apply import Reduction

RAIL_FLOOR = 0.3
"""The reduction aimed at when the figures are missing."""
TARGET_MIN = 0.05
TARGET_MAX = 0.9


def _clamp(x: float, lo: float, hi: float) -> float:
    return min(max(x, lo), hi)


def _positive(x: float | None) -> bool:
    return x is not None and x > 0 and math.isfinite(x)


def pressure(
    context_tokens: float | None,
    transcript_tokens: float | None,
    *,
    aim: float,
    hard: float,
    evict_to: float | None = None,
    fit: float | None = None,
    rescue_to: float | None = None,
) -> Reduction:
    """The `Reduction` that brings a context of `context_tokens` (of which the transcript is
    `transcript_tokens`) down to `aim`, the oldest results giving way further while it is still
    past `hard` (down to `evict_to`, else to `aim`); past `fit` (where the request would no
    longer fit the model's window) even recent results give way, down to `rescue_to`."""
    if not (_positive(context_tokens) and _positive(transcript_tokens) and _positive(hard)):
        return Reduction(target=RAIL_FLOOR, hard=RAIL_FLOOR)
    assert context_tokens is not None and transcript_tokens is not None
    overhead = max(0.0, context_tokens - transcript_tokens)

    def need(line: float) -> float:
        return 1 - (line - overhead) / transcript_tokens

    fit_share = rescue = 0.0
    if fit is not None and _positive(fit):
        fit_share = _clamp(need(fit), 0.0, TARGET_MAX)
        to = rescue_to if rescue_to is not None and _positive(rescue_to) else fit
        rescue = _clamp(need(min(to, fit)), 0.0, TARGET_MAX)
    return Reduction(
        target=_clamp(need(aim), TARGET_MIN, TARGET_MAX),
        hard=_clamp(need(hard), 0.0, TARGET_MAX),
        evict=None if evict_to is None else _clamp(need(evict_to), TARGET_MIN, TARGET_MAX),
        fit=fit_share,
        rescue=rescue,
    )
