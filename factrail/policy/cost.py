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
from collections.abc import Mapping
from dataclasses import dataclass, replace
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
LONG_CONTEXT_TOKENS = 272_000
"""OpenAI bills a request of more input tokens than this at twice the input prices, for the
whole request (GPT-5.6 and GPT-6 families)."""
OPENAI_LONG_TTL_S = 43_200.0
OPENAI_LONG_WRITE = 2.5
"""OpenAI's 12-hour cache writes cost 2.5 times input (GPT-6.2 Sol's published price)."""
WRITE_BILLED_TTL_S = 1800.0
"""OpenAI's cache from the GPT-5.6 family on lives 30 minutes (`prompt_cache_options.ttl`,
whose only value is `"30m"`)."""


@dataclass(frozen=True, slots=True)
class Prices:
    """Input prices relative to an uncached input token."""

    cached: float
    """A token read from the prompt cache."""
    write: float
    """A token not read from the cache (written to it where the provider charges for that)."""
    long_context: int | None = None
    """Past this many input tokens the whole request's input costs `long_context_factor` times
    as much (OpenAI's GPT-5.6 and GPT-6 families past 272K, Claude Haiku 5.5 past 100K)."""
    long_context_factor: float = 2.0

    def tier(self, tokens: float) -> float:
        """What every input token of a request of `tokens` costs, relative to the base prices."""
        above = self.long_context is not None and tokens > self.long_context
        return self.long_context_factor if above else 1.0

    def billed(self, cached: float, uncached: float) -> float:
        """Token-units billed for a request of `cached` + `uncached` input tokens."""
        return cached * self.cached + uncached * self.write


ANTHROPIC = Prices(cached=0.1, write=1.25)
ANTHROPIC_LONG_WRITE = 2.0
"""Anthropic writes entries of its one-hour cache at twice the input price."""
ANTHROPIC_BY_MODEL = {
    "claude-fable-5-1": Prices(cached=0.025, write=1.25),
    "claude-mythos-5-1": Prices(cached=0.025, write=1.25),
    "claude-fable-5-2": Prices(cached=0.025, write=1.25),
    "claude-mythos-5-2": Prices(cached=0.025, write=1.25),
    "claude-opus-5-5": Prices(cached=0.05, write=1.25),
    "claude-sonnet-5-5": Prices(cached=0.05, write=1.25),
    "claude-haiku-5-5": Prices(
        cached=0.1, write=1.25, long_context=100_000, long_context_factor=5.0
    ),
}
"""Claude models whose prices differ from `ANTHROPIC` (longest prefix wins): Fable and Mythos
5.1 and 5.2 read the cache at 0.025 of input ($0.25 of $10, $0.20 of $8), Opus 5.5 and Sonnet
5.5 (since 2026-10-07) at 0.05; Haiku 5.5 bills a prompt past 100K tokens at five times its
prices, all of it."""
NO_CACHE = Prices(cached=1.0, write=1.0)
OPENAI_BY_MODEL = {
    "gpt-4o": Prices(cached=0.5, write=1.0),
    "o1": Prices(cached=0.5, write=1.0),
    "gpt-4.1": Prices(cached=0.25, write=1.0),
    "o3": Prices(cached=0.25, write=1.0),
    "o4": Prices(cached=0.25, write=1.0),
    "gpt-5": Prices(cached=0.1, write=1.0),
    "codex": Prices(cached=0.25, write=1.0),
    "gpt-5.6": Prices(cached=0.1, write=1.25, long_context=LONG_CONTEXT_TOKENS),
    "gpt-6": Prices(cached=0.1, write=1.25, long_context=LONG_CONTEXT_TOKENS),
    "gpt-6.1": Prices(cached=0.05, write=1.25, long_context=LONG_CONTEXT_TOKENS),
    "gpt-6.2": Prices(cached=0.05, write=1.25, long_context=LONG_CONTEXT_TOKENS),
}
"""OpenAI's input prices by model family (longest prefix wins): what a cached token costs, and
from the GPT-5.6 family on what a token written to the cache costs (earlier models bill no
writes). GPT-6 Astra, Sol and Luna read at 0.1; GPT-6.1 and GPT-6.2 at 0.05. The write-billed
families also bill a request past 272K input tokens at twice the input prices."""
OPENAI_DEFAULT = Prices(cached=0.5, write=1.0)
"""A model the table does not know: the oldest cache's prices, which bet the least on a cache."""


def model_price(entry: Mapping[str, float]) -> Prices:
    """Prices from a `FACTRAIL_MODEL_PRICES` entry (`cached`, `write`, and optionally
    `long_context`, `long_context_factor`)."""
    long_context = entry.get("long_context")
    return Prices(
        cached=float(entry["cached"]),
        write=float(entry["write"]),
        long_context=int(long_context) if long_context else None,
        long_context_factor=float(entry.get("long_context_factor", 2.0)),
    )


def prices(
    profile: Profile,
    model: str = "",
    ttl_s: float | None = None,
    overrides: Mapping[str, Prices] | None = None,
) -> Prices:
    """The prices of a profile for `model` (`OPENAI_BY_MODEL`, `ANTHROPIC_BY_MODEL`); on
    `anthropic`, the one-hour cache's writes when the client asked for it (`ttl_s`).
    `overrides` (`FACTRAIL_MODEL_PRICES`) come first, under either profile."""
    chosen = by_prefix(model, overrides) if overrides and profile != "none" else None
    if profile == "anthropic":
        price = chosen or by_prefix(model, ANTHROPIC_BY_MODEL) or ANTHROPIC
        long_lived = ttl_s is not None and ttl_s >= LONG_TTL_S
        return replace(price, write=ANTHROPIC_LONG_WRITE) if long_lived else price
    if profile == "openai":
        price = chosen or by_prefix(model, OPENAI_BY_MODEL) or OPENAI_DEFAULT
        if price.write > 1.0 and ttl_s is not None and ttl_s >= OPENAI_LONG_TTL_S:
            return replace(price, write=OPENAI_LONG_WRITE)
        return price
    return NO_CACHE


def writes_billed(model: str) -> bool:
    """Whether the model is one of OpenAI's families that bill cache writes (GPT-5.6 on): they
    cache only at breakpoints, for 30 minutes."""
    price = by_prefix(model, OPENAI_BY_MODEL)
    return price is not None and price.write > 1.0


def model_ttl_s(model: str) -> float | None:
    """The prompt cache's lifetime a model's provider keeps by default, when longer than the
    configured one is known: 30 minutes from OpenAI's GPT-5.6 family on."""
    return WRITE_BILLED_TTL_S if writes_billed(model) else None


def profile_for(configured: str, model: str) -> Profile:
    """The configured profile, or for `auto` the one the model's provider bills by."""
    if configured in PROFILES:
        return configured
    name = model.rsplit("/", 1)[-1].lower()
    return "anthropic" if name.startswith("claude") else "openai"


def pays(
    invalidated: float, saved: float, remaining_turns: float, price: Prices, tokens: float = 0.0
) -> bool:
    """Whether removing `saved` tokens from every one of `remaining_turns` later requests is
    worth re-billing the `invalidated` tokens once. `tokens`: the request's size before, when
    known, for a price that rises past a size (`Prices.long_context`): bringing a request back
    under that line saves the higher price on all of it."""
    if saved <= 0:
        return False
    before, now = price.tier(tokens), price.tier(max(tokens - saved, 0.0))
    per_turn = price.cached * (now * saved + (before - now) * tokens)
    extra = (price.write - price.cached) * now
    if extra <= 0 or invalidated <= 0:
        return True
    return remaining_turns * per_turn > invalidated * extra


def billed_input(uncached: int, cached: int, written: int, price: Prices) -> float:
    """The billed-equivalent input tokens (uncached input tokens' worth) of one answered
    request, from the provider's own split: tokens past every cache breakpoint at the input
    price, cache reads at `cached`, cache writes at `write`; a request past the long-context
    line at that tier's price throughout."""
    return (uncached + cached * price.cached + written * price.write) * price.tier(
        uncached + cached + written
    )


def spared(removed: float, rebilled: float, price: Prices) -> tuple[float, float]:
    """What one answered turn cost less and more than the same turn sent whole
    (billed-equivalent tokens), as `(kept out, re-written)`: the `removed` tokens it did not
    send, which sent whole would have been cache reads; and re-writing the `rebilled` tokens a
    compaction made the provider bill past its cache, over reading them (0 when the cache was
    cold anyway). An estimate that counts against factrail: the turn's own new messages,
    written either way, are among the re-billed tokens."""
    return removed * price.cached, rebilled * (price.write - price.cached)


def duration_s(value: object) -> float | None:
    """Seconds in a TTL such as `"30m"`, `"1h"` or `"300s"` (None for anything else)."""
    if not isinstance(value, str) or len(value) < 2 or not value[:-1].isdigit():
        return None
    unit = _UNITS_S.get(value[-1])
    return float(int(value[:-1]) * unit) if unit is not None else None


_UNITS_S = {"s": 1, "m": 60, "h": 3600}


def lifetime(configured_s: float, requested_s: float | None) -> float:
    """The prompt cache's lifetime: the longer of the configured one and the one the request
    asked for (a cache counted cold too soon makes a compaction look free when it is not)."""
    return max(configured_s, requested_s or 0.0)


def cold(idle_s: float | None, ttl_s: float) -> bool:
    """Whether a cache last read `idle_s` seconds ago has expired (unknown: warm)."""
    return idle_s is not None and math.isfinite(idle_s) and idle_s > ttl_s
