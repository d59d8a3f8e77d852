"""Cache-warm timing: when to nudge a session before the provider's prompt cache expires."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from factrail.core.text import round_half_away
from factrail.policy.coerce import finite_number, js_string

CacheWarm = Literal["compact", "notify", "off"]
CACHE_WARM_WORDS: Mapping[str, CacheWarm] = {
    **dict.fromkeys(("off", "false", "0", "no", "none"), "off"),
    **dict.fromkeys(("notify", "toast", "nudge"), "notify"),
    "compact": "compact",
}
SUBSCRIPTION_TTL_SECONDS = 3600.0
API_KEY_TTL_SECONDS = 300.0
SESSION_KEY_TTL_MS = 30 * 24 * 3600 * 1000
"""Sticky taint and baseline records are forgotten after 30 days."""
_EXPIRING_PREFIXES = ("taint:", "baseline:")


def parse_cache_warm(value: Any) -> CacheWarm:
    """`off,false,0,no,none` → off; `notify,toast,nudge` → notify; anything else → compact."""
    return CACHE_WARM_WORDS.get(js_string(value).strip().lower(), "compact")


def cache_ttl_seconds(configured: float, *, rate_limits: bool, has_api_key: bool) -> float:
    """A configured TTL > 0 wins; else 1 h on a subscription (rate limits), 5 min on an API key."""
    if math.isfinite(configured) and configured > 0:
        return configured
    if rate_limits:
        return SUBSCRIPTION_TTL_SECONDS
    return API_KEY_TTL_SECONDS if has_api_key else SUBSCRIPTION_TTL_SECONDS


def nudge_delay_ms(ttl: float, margin: float) -> int:
    """Wait `ttl − margin` when the TTL exceeds twice the margin, else half the TTL (in ms)."""
    ttl = ttl if ttl > 0 else 0.0  # NaN and negatives count as 0
    margin = margin if margin > 0 else 0.0
    seconds = ttl - margin if ttl > 2 * margin else ttl / 2
    return round_half_away(seconds * 1000)


def should_arm_nudge(
    tokens: float | None, *, floor: float = 100000, baseline: float | None = None, gap: float = 0
) -> bool:
    """A finite token figure at or above the floor, and not inside the re-arm gap of a baseline."""
    if tokens is None or not math.isfinite(tokens) or tokens < floor:
        return False
    return not (baseline is not None and baseline > 0 and tokens < baseline + gap)


def expired_session_keys(
    entries: Mapping[str, Any], now_ms: float, ttl_ms: float = SESSION_KEY_TTL_MS
) -> list[str]:
    """`taint:*` and `baseline:*` keys whose record's `at` is unreadable or older than the TTL."""
    expired: list[str] = []
    for key, record in entries.items():
        if not key.startswith(_EXPIRING_PREFIXES):
            continue
        at = finite_number(record.get("at")) if isinstance(record, Mapping) else None
        if at is None or now_ms - at > ttl_ms:
            expired.append(key)
    return expired
