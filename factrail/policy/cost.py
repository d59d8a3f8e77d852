"""What a compaction costs and saves under a provider's prompt-cache prices.

A provider bills a request's input from its cache up to the first byte that changed since the
last request, and at full price (or the cache-write price) after it. So a compaction costs the
tokens it invalidates, I, once at (write − cached) more than a cached read, and saves the tokens
it removes, H, at the cached price on every later turn: over R remaining turns it pays when
R · H · P_cached > I · (P_write − P_cached). Past the hard line it always runs; once the cache
has gone cold (idle past its TTL) the invalidation costs nothing extra.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from factrail.policy.trigger import by_prefix

Profile = Literal["anthropic", "openai", "none"]
PROFILES: tuple[Profile, ...] = ("anthropic", "openai", "none")
DEFAULT_TTL_S = 300.0
"""Provider prompt caches live five minutes after their last read by default."""
LONG_TTL_S = 3600.0
"""Anthropic's one-hour cache, when the client asks for it (`cache_control.ttl = "1h"`)."""
EXTENDED_RETENTION_S = 86_400.0
"""OpenAI's extended prompt-cache retention, when the client asks for it
(`prompt_cache_retention = "24h"`)."""
OPENAI_CACHED_BY_MODEL = {
    "gpt-4o": 0.5,
    "o1": 0.5,
    "gpt-4.1": 0.25,
    "o3": 0.25,
    "o4": 0.25,
    "gpt-5": 0.1,
    "codex": 0.25,
}
"""OpenAI's cached-input price over its input price, by model family (longest prefix wins)."""
OPENAI_CACHED_DEFAULT = 0.5


@dataclass(frozen=True, slots=True)
class Prices:
    """Input prices relative to an uncached input token."""

    cached: float
    """A token read from the prompt cache."""
    write: float
    """A token not read from the cache (written to it where the provider charges for that)."""

    def billed(self, cached: float, uncached: float) -> float:
        """Token-units billed for a request of `cached` + `uncached` input tokens."""
        return cached * self.cached + uncached * self.write


ANTHROPIC = Prices(cached=0.1, write=1.25)
ANTHROPIC_LONG = Prices(cached=0.1, write=2.0)
"""Anthropic's prices for entries of its one-hour cache: written at twice the input price."""
NO_CACHE = Prices(cached=1.0, write=1.0)


def prices(profile: Profile, model: str = "", ttl_s: float | None = None) -> Prices:
    """The prices of a profile (`openai`: the cached share of the model's family; `anthropic`:
    the one-hour cache's when the client asked for it, `ttl_s`)."""
    if profile == "anthropic":
        return ANTHROPIC_LONG if ttl_s is not None and ttl_s >= LONG_TTL_S else ANTHROPIC
    if profile == "openai":
        share = by_prefix(model, _OPENAI_PERCENT)
        return Prices(cached=share / 100 if share is not None else OPENAI_CACHED_DEFAULT, write=1.0)
    return NO_CACHE


_OPENAI_PERCENT = {k: round(v * 100) for k, v in OPENAI_CACHED_BY_MODEL.items()}


def profile_for(configured: str, model: str) -> Profile:
    """The configured profile, or for `auto` the one the model's provider bills by."""
    if configured in PROFILES:
        return configured
    name = model.rsplit("/", 1)[-1].lower()
    return "anthropic" if name.startswith("claude") else "openai"


def pays(invalidated: float, saved: float, remaining_turns: float, price: Prices) -> bool:
    """Whether removing `saved` tokens from every one of `remaining_turns` later requests is
    worth re-billing the `invalidated` tokens once."""
    if saved <= 0:
        return False
    extra = price.write - price.cached
    if extra <= 0 or invalidated <= 0:
        return True
    return remaining_turns * saved * price.cached > invalidated * extra


def lifetime(configured_s: float, requested_s: float | None) -> float:
    """The prompt cache's lifetime: the longer of the configured one and the one the request
    asked for (a cache counted cold too soon makes a compaction look free when it is not)."""
    return max(configured_s, requested_s or 0.0)


def cold(idle_s: float | None, ttl_s: float) -> bool:
    """Whether a cache last read `idle_s` seconds ago has expired (unknown: warm)."""
    return idle_s is not None and math.isfinite(idle_s) and idle_s > ttl_s
