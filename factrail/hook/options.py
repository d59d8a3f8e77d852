"""The plugin's `userConfig`, as the plugin forwards it untouched, laid over `Settings`.

Every option is optional. Each one naming a setting is read leniently from JSON (numbers may
arrive as numeric strings; keywords are trimmed and case-insensitive; counts are floored) and
then checked by that setting's own validators (`Settings.overlaid`): one left out or refused
keeps the value of this binary's own settings (`FACTRAIL_*`, the TOML file), so an operator
configures the plugin path and the proxy path in one place. The fence's lists are the exception:
they add to the settings' lists, and one that cannot be read (`;`-separated, a name with a
space) fails the request, so it never fences less than was meant.

Credentials never come from here: an `apiKey` option is ignored. The environment's judge key
(`FACTRAIL_JUDGE_API_KEY`) goes only to the judge the settings name: options that name another
backend or URL get no key, and are never local (`backendLocal` counts only for the settings' own
judge, and only when the settings declare it local too).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import SecretStr

from factrail.hook.protocol import HookError, number
from factrail.judges import systemone
from factrail.settings import KEEP_THRESHOLD_BOUNDS, Settings
from factrail.settings_check import parse_names

Fallback = Literal["rules", "summary"]
CacheWarm = Literal["compact", "notify", "off"]
DEFAULT_WARM_FLOOR = 100_000
DEFAULT_TTL_MARGIN_S = 300.0
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_OFF = ("0", "false", "off", "no")
_ON = ("1", "true", "on", "yes")
_COUNTS = (
    ("preserveRecentMessages", "preserve_recent"),
    ("maxStateTokens", "max_state_tokens"),
    ("maxRequestTokens", "max_request_tokens"),
    ("truncateHeadChars", "head_chars"),
    ("rearmTokens", "rearm_tokens"),
)
"""Whole-count options (floored) → the setting each overrides."""
_FLAGS = (("saveFullOutputs", "save_outputs"), ("recordDecisions", "record_decisions"))
_LISTS = (("taintTools", "taint_tools"), ("taintSkills", "taint_skills"))


def finite(value: Any) -> float | None:
    """A finite number of at most `MAX_NUMBER` (`protocol.number`), from a JSON number or a
    numeric string (no `_`, no `inf`)."""
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        value = float(value.strip())
    return number(value)


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


def names(value: Any, option: str = "list") -> tuple[str, ...] | None:
    """A list option, in the settings' grammar (an array of strings, or a comma- or
    newline-separated string); absent or blank: None. One that cannot be read is a
    `HookError`."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return parse_names(value)
    except ValueError as err:
        raise HookError(f"config.{option}: {err}") from None


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
    merged = _with_judge(config, settings).overlaid(_settings_values(config, settings))
    at_tokens = finite(config.get("compactAtTokens"))
    at_percent = finite(config.get("compactAtPercent"))
    ttl = finite(config.get("cacheTtlSeconds"))
    margin = finite(config.get("cacheTtlMarginSeconds"))
    floor = finite(config.get("cacheWarmFloorTokens"))
    return HookOptions(
        settings=merged,
        enabled_by_default=config.get("enabledByDefault"),
        fallback="summary" if keyword(config.get("fallback")) == "summary" else "rules",
        cache_warm=_cache_warm(config.get("cacheWarm")),
        warm_floor=math.floor(floor) if floor is not None and floor >= 0 else DEFAULT_WARM_FLOOR,
        ttl_s=ttl if ttl is not None and ttl > 0 else None,
        ttl_margin_s=margin if margin is not None and margin >= 0 else DEFAULT_TTL_MARGIN_S,
        compact_at_tokens=int(at_tokens) if at_tokens is not None else merged.trigger_tokens,
        compact_at_percent=at_percent if at_percent is not None else merged.trigger_percent,
    )


def _settings_values(config: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
    """The options that name a setting, read from JSON (numbers, trimmed keywords, floored
    counts), for the settings' validators to accept or refuse."""
    values: dict[str, Any] = {}
    egress = keyword(config.get("egress"))
    if egress is not None:  # anything but `full` fails toward sending less
        values["egress"] = "full" if egress == "full" else "metadata"
    threshold = finite(config.get("keepThreshold"))
    if threshold is not None:
        low, high = KEEP_THRESHOLD_BOUNDS
        values["keep_threshold"] = min(max(threshold, low), high)
    for option, field in _COUNTS:
        value = finite(config.get(option))
        if value is not None:
            values[field] = math.floor(value)
    deadline = finite(config.get("compactionTimeoutMs"))
    if deadline is not None:
        values["judge_deadline_ms"] = math.ceil(deadline)
    for option, field in _FLAGS:
        value = flag(config.get(option))
        if value is not None:
            values[field] = value
    for option, field in _LISTS:
        listed = names(config.get(option), option)
        if listed is not None:  # added to the settings' own names, never in place of them
            values[field] = (*getattr(settings, field), *listed)
    return values


def _with_judge(config: Mapping[str, Any], settings: Settings) -> Settings:
    """The settings with the judge the options name. The environment's key stays only while
    the backend and the endpoint are the settings' own; locality is the settings' declaration,
    which the options may withdraw (`backendLocal: false`) but never make."""
    named: dict[str, Any] = {"judge": keyword(config.get("backend"))}
    for option, field in (("baseUrl", "judge_url"), ("model", "judge_model")):
        value = config.get(option)
        named[field] = value.strip() if isinstance(value, str) else None
    chosen = settings.overlaid({k: v for k, v in named.items() if v})
    own = chosen.judge == settings.judge and _endpoint(chosen.judge, chosen.judge_url) == (
        _endpoint(settings.judge, settings.judge_url)
    )
    local = config.get("backendLocal")
    withdrawn = local is False or local == "false"  # an unset option arrives as ""
    update: dict[str, Any] = {"judge_local": settings.judge_local and own and not withdrawn}
    if not own:
        update["judge_api_key"] = SecretStr("")
    return chosen.model_copy(update=update)


def _endpoint(judge: str, url: str) -> str:
    """Where a judge's requests go, for comparing two configurations."""
    if not url and judge == "systemone":
        url = systemone.DEFAULT_URL
    return url.strip().rstrip("/")


def _cache_warm(value: Any) -> CacheWarm:
    if value is False:
        return "off"
    word = keyword(value) if isinstance(value, str) else (str(value) if value == 0 else None)
    if word in ("off", "false", "0", "no", "none"):
        return "off"
    if word in ("notify", "toast", "nudge"):
        return "notify"
    return "compact"
