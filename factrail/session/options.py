"""The session step's options: a typed section of `factrail.settings.Settings`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from factrail.core.plan import CompactOptions
from factrail.policy.cost import Prices
from factrail.policy.taint import TaintFence
from factrail.policy.trigger import Trigger


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """What one compaction step needs to know about its deployment."""

    trigger: Trigger
    fence: TaintFence
    plan: CompactOptions
    """The judge's plan options; `preserve_recent` and `head_chars` also bound the rules."""
    judge_deadline_ms: int
    save_outputs: bool
    record_decisions: bool
    outputs_route: str | None
    """When set, the note in reduced text names this HTTP route beside the file path."""
    prepare_share: float
    """Below the trigger but past this share of it, a turn's new results are analysed in the
    background while the upstream answers, so the compaction turn has less to do (0: never)."""
    analysis_sessions: int
    """How many sessions' analyses are kept in memory (least recently used go first)."""
    price_profile: str
    """`anthropic`, `openai`, `none`, or `auto` (by the model's name)."""
    cache_ttl_s: float
    """Past this idle time the provider's cache is cold and a soft-line compaction is free."""
    keep_tools: tuple[str, ...] = ()
    """Tools whose results stay verbatim, besides the built-in ones."""
    model_prices: Mapping[str, Prices] = field(default_factory=dict)
    """Model-name prefix → prices, over the built-in tables (`FACTRAIL_MODEL_PRICES`)."""
    payback_horizon: float = 1.0
    """The remaining turns the cost gate bets on, as a multiple of the turns so far."""
    min_cut_chars: int = 0
    """A result is reduced only when that saves at least this many chars (`apply`'s
    `min_cut`)."""
