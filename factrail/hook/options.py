"""The plugin's `userConfig`, as the plugin forwards it untouched, read into typed options.

Every option is optional: one left out (or malformed: a wrong type, a non-finite number, an
unknown keyword) keeps the value of this binary's own settings (`FACTRAIL_*`, the TOML file),
so an operator configures the plugin path and the proxy path in one place. A malformed value
never fails a request. Numbers may arrive as numeric strings (a shell-projected option);
keywords are trimmed and case-insensitive. Credentials never come from here: an `apiKey` option
is ignored (the judge's key is `FACTRAIL_JUDGE_API_KEY` in the binary's environment).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from factrail.settings import Settings

Fallback = Literal["rules", "summary"]
CacheWarm = Literal["compact", "notify", "off"]
DEFAULT_WARM_FLOOR = 100_000
DEFAULT_TTL_MARGIN_S = 300.0
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_OFF = ("0", "false", "off", "no")
_ON = ("1", "true", "on", "yes")


def finite(value: Any) -> float | None:
    """A finite number, from a JSON number or a numeric string (no `_`, no `inf`)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        number = float(value.strip())
        return number if math.isfinite(number) else None
    return None


def count(value: Any) -> int | None:
    """A whole count ≥ 0 (floored), else None."""
    number = finite(value)
    return math.floor(number) if number is not None and number >= 0 else None


def keyword(value: Any) -> str | None:
    """A non-blank string, trimmed and lower-cased, else None."""
    return value.strip().lower() if isinstance(value, str) and value.strip() else None


def flag(value: Any) -> bool | None:
    """A JSON bool, or a string `1|true|on|yes` / `0|false|off|no`, else None."""
    if isinstance(value, bool):
        return value
    word = keyword(value)
    if word in _ON:
        return True
    if word in _OFF:
        return False
    return None


def names(value: Any) -> tuple[str, ...] | None:
    """A list option: an array of strings or a comma-separated string (blanks dropped); an
    explicit `[]` is an empty list; anything else is None."""
    if isinstance(value, list):
        return tuple(s.strip() for s in value if isinstance(s, str) and s.strip())
    if isinstance(value, str) and value.strip():
        return tuple(s.strip() for s in value.split(",") if s.strip())
    return None


def declared_local(value: Any) -> bool:
    """Locality is declared, never inferred: only JSON `true` or the exact string `"true"`."""
    return value is True or value == "true"


def resolve_enabled(stored: Any, option: Any) -> bool:
    """The `/factrail` switch: a boolean in the plugin's store wins; else `enabledByDefault`
    (a bool, or a string that is off when it reads `0|false|off|no`); else on."""
    if isinstance(stored, bool):
        return stored
    if isinstance(option, bool):
        return option
    if isinstance(option, str):
        return option.lower() not in _OFF
    return True


@dataclass(frozen=True, slots=True)
class HookOptions:
    """What the hook reads of the plugin's options beyond the shared settings."""

    settings: Settings
    """This binary's settings with the plugin's options laid over them."""
    enabled_by_default: Any
    fallback: Fallback
    cache_warm: CacheWarm
    warm_floor: int
    ttl_s: float | None
    """The provider cache's lifetime when the options name it (None: detect)."""
    ttl_margin_s: float
    compact_at_tokens: int
    compact_at_percent: float


def read_options(config: Mapping[str, Any], base: Settings | None = None) -> HookOptions:
    """The plugin's options over `base` (this binary's settings)."""
    settings = base if base is not None else Settings()
    update: dict[str, Any] = {}
    backend = keyword(config.get("backend"))
    if backend in ("rules", "systemone", "tev"):
        update["judge"] = backend
    for option, field in (("baseUrl", "judge_url"), ("model", "judge_model")):
        value = config.get(option)
        if isinstance(value, str) and value.strip():
            update[field] = value.strip()
    local = config.get("backendLocal")
    if declared_local(local):
        update["judge_local"] = True
    elif local is False or local == "false":  # an unset option arrives as "": no declaration
        update["judge_local"] = False
    egress = keyword(config.get("egress"))
    if egress is not None:  # anything but `full` fails toward sending less
        update["egress"] = "full" if egress == "full" else "metadata"
    threshold = finite(config.get("keepThreshold"))
    if threshold is not None:
        update["keep_threshold"] = min(max(threshold, 0.01), 0.99)
    for option, field in (
        ("preserveRecentMessages", "preserve_recent"),
        ("maxStateTokens", "max_state_tokens"),
        ("maxRequestTokens", "max_request_tokens"),
        ("truncateHeadChars", "head_chars"),
        ("rearmTokens", "rearm_tokens"),
    ):
        value = count(config.get(option))
        if value is not None:
            update[field] = value
    deadline = finite(config.get("compactionTimeoutMs"))
    if deadline is not None and deadline > 0:
        update["judge_deadline_ms"] = math.ceil(deadline)
    for option, field in (
        ("saveFullOutputs", "save_outputs"),
        ("recordDecisions", "record_decisions"),
    ):
        value = flag(config.get(option))
        if value is not None:
            update[field] = value
    for option, field in (("taintTools", "taint_tools"), ("taintSkills", "taint_skills")):
        listed = names(config.get(option))
        if listed is not None:
            update[field] = listed
    at_tokens = finite(config.get("compactAtTokens"))
    at_percent = finite(config.get("compactAtPercent"))
    ttl = finite(config.get("cacheTtlSeconds"))
    margin = finite(config.get("cacheTtlMarginSeconds"))
    floor = count(config.get("cacheWarmFloorTokens"))
    merged = settings.model_copy(update=update)
    return HookOptions(
        settings=merged,
        enabled_by_default=config.get("enabledByDefault"),
        fallback="summary" if keyword(config.get("fallback")) == "summary" else "rules",
        cache_warm=_cache_warm(config.get("cacheWarm")),
        warm_floor=floor if floor is not None else DEFAULT_WARM_FLOOR,
        ttl_s=ttl if ttl is not None and ttl > 0 else None,
        ttl_margin_s=margin if margin is not None and margin >= 0 else DEFAULT_TTL_MARGIN_S,
        compact_at_tokens=int(at_tokens) if at_tokens is not None else merged.trigger_tokens,
        compact_at_percent=at_percent if at_percent is not None else merged.trigger_percent,
    )


def _cache_warm(value: Any) -> CacheWarm:
    if value is False:
        return "off"
    word = keyword(value) if isinstance(value, str) else (str(value) if value == 0 else None)
    if word in ("off", "false", "0", "no", "none"):
        return "off"
    if word in ("notify", "toast", "nudge"):
        return "notify"
    return "compact"
