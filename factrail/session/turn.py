"""One request's transcript as the session step sees it (`Turn`), and what it asks of its
model (`Asked`): shared by the step and its cost gate."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from factrail.core.formats.base import Document
from factrail.core.model import Message
from factrail.policy.cost import Prices
from factrail.policy.taint import TaintScan
from factrail.policy.trigger import DueReason
from factrail.stores.state import SessionState


@dataclass(frozen=True, slots=True)
class Asked:
    """What a request asks of its model: which one, and the context window and prompt-cache
    lifetime it says it wants (None: it does not say)."""

    model: str
    window: int | None = None
    cache_ttl_s: float | None = None
    last: bool = False
    """The request asks the provider to summarize the transcript (Anthropic's `compaction`, a
    Responses `compaction_trigger`): no turn follows on it, so no compaction pays back, and the
    summary is made from what is sent."""
    shadow: bool = False
    """The gateway runs in shadow mode: what the step decides is recorded, never sent (a
    compaction is counted in `SessionState.shadow`)."""


@dataclass(slots=True)
class Turn:
    """One request's transcript as the step sees it, once the stored plan is re-applied."""

    session: str
    doc: Document
    state: SessionState
    work: list[Message]
    """The transcript with earlier reductions re-applied (what is sent unless it compacts),
    from the first message the provider reads (`Document.live`)."""
    head: list[Message]
    """The messages before those, which the provider's own compaction replaced: sent as the
    client sent them (re-applied), never counted, reduced or judged."""
    reapplied: set[str]
    trigger: int
    ratio: float
    """The session's calibration: upstream prompt tokens over our estimate."""
    estimated: int
    """Uncalibrated estimate of `work` plus the tokens outside the transcript."""
    extra: int
    """Tokens outside the transcript (system prompt, tool schemas)."""
    taint: TaintScan
    prices: Prices
    """What the request's model bills (the configured profile, the cache the client asked for)."""
    turns: int = 1
    """Assistant turns so far (at least 1): the session's age, for its growth rate and its
    expected remaining length."""
    answered: bool = True
    """Whether the state store answered for this session (False: it failed, or its record
    could not be read)."""
    asked: Asked = Asked("")
    """What the request asks of its model (which one, its window, its cache)."""
    window: int | None = None
    """The model's context window (None: unknown)."""
    line: DueReason = "below-soft-line"
    """The line this turn crossed."""
    verbatim: frozenset[str] | None = None
    """The calls the rails never touch (`SessionCompactor._verbatim`: found once, when a due
    turn first needs them)."""
    calls_kept: frozenset[str] = frozenset()
    """Calls the judge said matter with their arguments (`Judged.calls_kept`)."""

    @property
    def tokens(self) -> int:
        """The calibrated size of what would be sent."""
        return math.ceil(self.estimated * self.ratio)

    def emit(self, work: Sequence[Message]) -> Any:
        """The wire document with `work` in place of the transcript the provider reads."""
        return self.doc.emit([*self.head, *work])
