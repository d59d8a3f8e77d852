"""When to compact: the trigger, the soft line below it, the hard line, and re-arm hysteresis.

This module is the only place that does this arithmetic. The trigger T of a model is
min(percent × its context window, the absolute trigger of its family). The rails run once a
transcript crosses the soft line (5/6 of T) and aim back under it; the oldest results give way
further only while it is past the hard line (T itself). Each compaction costs the provider's
prompt cache from its first changed message, so after one (its size is the session's
*baseline*) the next waits until the transcript has grown by the re-arm gap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar

V = TypeVar("V")

DueReason = Literal["below-soft-line", "hysteresis", "soft-line", "hard-line"]

SOFT_SHARE = 5 / 6
"""The soft line's share of the trigger."""
DANGER_TIMES = 2
"""The danger line is never more than this many times the trigger."""
FIT_SHARE = 0.9
"""A request past this share of its model's window leaves too little room for the answer."""
REARM_SHARE = 1 / 8
"""The re-arm gap when none is configured: room for an eighth of the trigger of new context."""


def soft_line(trigger: float) -> float:
    """Five sixths of the trigger: where compaction starts and what the rails aim under."""
    return trigger * SOFT_SHARE


def rearm_gap(trigger: int, rearm: int) -> int:
    """The configured gap when > 0, else an eighth of the trigger (rounded up)."""
    if rearm > 0:
        return rearm
    return math.ceil(trigger * REARM_SHARE) if trigger > 0 else 0


def by_prefix(model: str, table: Mapping[str, V]) -> V | None:
    """The value for `model` by longest matching prefix (case-insensitive, `provider/` dropped).
    A prefix never splits a number: `claude-fable-5-2` is not a prefix of the dated
    `claude-fable-5-20260609`, whose longest prefix is `claude-fable-5`."""
    name = model.rsplit("/", 1)[-1].lower()
    best: tuple[int, V] | None = None
    for prefix, value in table.items():
        p = prefix.lower()
        if not name.startswith(p) or (best is not None and len(p) <= best[0]):
            continue
        if p and p[-1].isdigit() and name[len(p) : len(p) + 1].isdigit():
            continue
        best = (len(p), value)
    return best[1] if best else None


@dataclass(frozen=True, slots=True)
class TriggerLines:
    """The soft line, the hard line (the trigger) and the size the next compaction waits for."""

    soft: int
    hard: int
    need: int


@dataclass(frozen=True, slots=True)
class Trigger:
    """The trigger settings of a deployment (a section of `factrail.settings.Settings`)."""

    tokens: int
    """Absolute trigger; the per-model trigger is min(percent × window, this)."""
    percent: float
    """Share of the model's context window, in percent (≤ 0: the window is not used)."""
    rearm: int
    """Re-arm gap after a compaction (≤ 0: an eighth of the trigger)."""
    windows: Mapping[str, int] = field(default_factory=dict)
    """Model-name prefix → context window in tokens (longest prefix wins)."""
    by_model: Mapping[str, int] = field(default_factory=dict)
    """Model-name prefix → absolute trigger for that family, in place of `tokens`."""

    def for_model(self, model: str, window: int | None = None) -> int:
        """T = min(percent × context window, absolute trigger), whichever exist (0: never);
        `window`: the request's own (a client that asked for a longer one), else the table's."""
        window = window or by_prefix(model, self.windows)
        absolute = by_prefix(model, self.by_model) or self.tokens
        candidates = []
        if window and self.percent > 0:
            candidates.append(int(window * self.percent / 100))
        if absolute > 0:
            candidates.append(absolute)
        return min(candidates) if candidates else 0

    def smallest(self) -> int:
        """The smallest trigger any model can have: bounds the no-parse fast path."""
        by_percent = [int(w * self.percent / 100) for w in self.windows.values() if w > 0]
        absolute = [self.tokens, *(t for t in self.by_model.values() if t > 0)]
        return min([t for t in by_percent if t > 0] + [t for t in absolute if t > 0] or [0])

    def window_for(self, model: str, window: int | None = None) -> int | None:
        """The request's own context window when given, else the model's from the table."""
        return window or by_prefix(model, self.windows)

    def danger(self, model: str, trigger: int, window: int | None = None) -> int:
        """The size a session must never pass without a compaction, even one that cannot get
        under the hard line: halfway from the trigger to the model's window, never past `fit`
        nor `DANGER_TIMES` the trigger (a fifth past the trigger when the window is unknown).
        The cap keeps the trigger the bound the user chose on a model whose window is many
        times larger (1M: halfway would be 590K for a 180K trigger)."""
        window = self.window_for(model, window)
        if window is not None and window > trigger:
            halfway = trigger + (window - trigger) // 2
            return min(halfway, self.fit(model, window) or window, DANGER_TIMES * trigger)
        return trigger + trigger // 5

    def fit(self, model: str, window: int | None = None) -> int | None:
        """Past this size a request would leave too little of the model's window for the answer
        (`FIT_SHARE` of it): even the agent's recent results give way (None: window unknown)."""
        window = self.window_for(model, window)
        return math.floor(FIT_SHARE * window) if window else None

    def gap(self, trigger: int) -> int:
        """The re-arm gap for a trigger."""
        return rearm_gap(trigger, self.rearm)

    def lines(self, trigger: int, baseline: float | None) -> TriggerLines:
        """The lines for a session of this baseline. After a compaction, `need` is the baseline
        plus the re-arm gap, but hysteresis never holds a transcript past the hard line, unless
        the compaction itself could not get under it (then every turn would compact; wait for
        the gap instead)."""
        soft = math.floor(soft_line(trigger))
        if baseline is None or not math.isfinite(baseline) or baseline <= 0:
            return TriggerLines(soft, trigger, soft)
        rearmed = math.ceil(baseline + self.gap(trigger))
        held = rearmed if baseline >= trigger else min(rearmed, trigger)
        return TriggerLines(soft, trigger, max(soft, held))


def due(tokens: float, lines: TriggerLines) -> tuple[bool, DueReason]:
    """Whether a transcript of `tokens` is due for compaction against these lines."""
    if tokens < lines.soft:
        return False, "below-soft-line"
    if tokens < lines.need:
        return False, "hysteresis"
    return True, "hard-line" if tokens >= lines.hard else "soft-line"
