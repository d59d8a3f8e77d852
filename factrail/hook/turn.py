"""`factrail hook turn` (`turn.complete`): compact now, arm the cache-warm nudge, or wait.

The lines are the gateway's: due past the soft line (5/6 of T) once the session has grown by the
re-arm gap since its last compaction (`baseline`). Whether a due compaction is worth the prompt
cache it breaks is decided where the transcript is, by `factrail hook compact` (the session
step's cost gate, `factrail.session.gate`): this answer only says it is due. While it is due
the nudge is armed too: if the session then sits idle until just before the provider's cache
expires, the plugin compacts (or, with `cacheWarm: notify`, suggests `/compact`), because the
next request will find the cache cold and a compaction then costs nothing extra.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from factrail.hook.fence import merged_taint, request_refs
from factrail.hook.lines import session_trigger
from factrail.hook.options import HookOptions, read_options, resolve_enabled
from factrail.hook.protocol import now_ms, number, section, stored, text
from factrail.policy.cost import LONG_TTL_S
from factrail.policy.taint import taint_write
from factrail.policy.trigger import due

MAIN_LOOP_REASON = "answer"


def nudge_delay_ms(ttl_s: float, margin_s: float) -> int:
    """How long after the turn the nudge fires: the TTL less the margin when the TTL is over
    twice the margin, else half the TTL (rounded half up, in ms; bad figures count as 0)."""
    ttl = ttl_s if math.isfinite(ttl_s) and ttl_s > 0 else 0.0
    margin = margin_s if math.isfinite(margin_s) and margin_s > 0 else 0.0
    seconds = ttl - margin if ttl > 2 * margin else ttl / 2
    return math.floor(seconds * 1000 + 0.5)


def cache_ttl_s(options: HookOptions, rate_limits: int) -> float:
    """The provider cache's lifetime: as the options name it; else an hour for a subscription
    session (Claude Code reports its rate-limit windows), else `FACTRAIL_CACHE_TTL_S`."""
    if options.ttl_s is not None:
        return options.ttl_s
    if rate_limits > 0:
        return LONG_TTL_S
    return options.settings.cache_ttl_s


def baseline_tokens(value: Any) -> float | None:
    """The size the last compaction left, from the plugin's `baseline:<session>` record."""
    if not isinstance(value, dict):
        return None
    tokens = number(value.get("tokens"))
    return tokens if tokens is not None and tokens > 0 else None


def turn(request: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to one `turn` request."""
    options = read_options(section(request, "config"))
    now = now_ms(request)
    record = stored(request, "taint")
    scan = merged_taint(record, options.settings.fence().scan(request_refs(request)))
    taint_out = taint_write(record, scan, now)
    body: dict[str, Any] = {
        "compact": False,
        "reason": "",
        "threshold": None,
        "need": None,
        "baseline": None,
        "taint": taint_out,
        "nudge": None,
        "log": None,
    }
    event = section(request, "event")
    if text(event.get("agentId")) or event.get("reason") != MAIN_LOOP_REASON:
        return {**body, "reason": "not-an-answer"}
    if not resolve_enabled(stored(request, "enabled"), options.enabled_by_default):
        return {**body, "reason": "switched-off"}

    usage = section(request, "usage")
    window = number(usage.get("window"))
    tokens = number(usage.get("tokens"))
    percent = number(usage.get("percent"))
    if tokens is None and percent is not None and window is not None:
        tokens = window * percent / 100
    raw_baseline = request.get("baseline")
    baseline = baseline_tokens(raw_baseline)
    if isinstance(raw_baseline, dict) and raw_baseline.get("pending") is True and tokens:
        baseline = tokens  # the first turn after a compaction: its size is the new baseline
        body["baseline"] = {"tokens": math.ceil(tokens), "at": now}

    lines = session_trigger(options, window)
    if lines.tokens <= 0:
        return {**body, "reason": "no-trigger"}
    if tokens is None:
        return {**body, "reason": "no-usage"}
    marks = lines.trigger.lines(lines.tokens, baseline)
    is_due, reason = due(tokens, marks)
    body.update(threshold=lines.tokens, need=marks.need, reason=reason)
    if reason == "hysteresis":
        body["log"] = (
            f"factrail: at {round(tokens)} tokens, holding until {marks.need}"
            " (re-arm after the last compaction)"
        )
    if not is_due:
        return body
    if tokens >= lines.danger():
        body["reason"] = "danger-line"
    body["compact"] = True
    if options.cache_warm != "off" and tokens >= options.warm_floor:
        rate_limits = request.get("rateLimits")
        ttl = cache_ttl_s(options, rate_limits if isinstance(rate_limits, int) else 0)
        body["nudge"] = {
            "delayMs": nudge_delay_ms(ttl, options.ttl_margin_s),
            "mode": options.cache_warm,
            "tokens": round(tokens),
            "ttlSeconds": ttl,
        }
    return body
