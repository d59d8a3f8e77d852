"""Estate policy options: one frozen record read leniently from camelCase or snake_case keys.

A malformed value never raises: it falls back to its default (or, for `egress`, to the side that
sends less) and adds one warning naming the option.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, get_args

from factrail.policy.cache import CACHE_WARM_WORDS, CacheWarm
from factrail.policy.coerce import (
    count,
    finite_number,
    flag,
    is_flag,
    js_string,
    keyword,
    list_option,
    non_empty_string,
)

Backend = Literal["systemone", "tev", "rules"]
Egress = Literal["full", "metadata"]
Fallback = Literal["rules", "summary"]

DEFAULT_TAINT_TOOLS = ("mcp__email-gateway__", "mcp__claude_ai_Gmail__")
DEFAULT_TAINT_SKILLS = ("email-search",)
DEFAULT_DEADLINE_MS = 15000
KEEP_THRESHOLD_BOUNDS = (0.01, 0.99)
"""keepThreshold ≤ 0 would keep every call and ≥ 1 would drop every call: clamp inside."""


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """Every estate policy option (spec §7.2), with its default."""

    enabled_by_default: Any = None
    """Kept raw; `switch.resolve_enabled` interprets it."""
    taint_tools: tuple[str, ...] = DEFAULT_TAINT_TOOLS
    taint_skills: tuple[str, ...] = DEFAULT_TAINT_SKILLS
    taint_replace_defaults: bool = False
    """Configured taint lists replace the defaults instead of adding to them."""
    backend_local: bool = False
    backend: Backend = "systemone"
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    egress: Egress = "full"
    fallback: Fallback = "rules"
    keep_threshold: float = 0.5
    preserve_recent_messages: int = 6
    max_state_tokens: int = 25000
    max_request_tokens: int = 30000
    truncate_head_chars: int = 200
    compact_at_percent: float = 60.0
    compact_at_tokens: float = 180000.0
    rearm_tokens: float = 40000.0
    cache_warm: CacheWarm = "compact"
    cache_warm_floor_tokens: float = 100000.0
    cache_ttl_seconds: float = 0.0
    cache_ttl_margin_seconds: float = 300.0
    compaction_timeout_ms: int = DEFAULT_DEADLINE_MS
    save_full_outputs: bool = True
    record_decisions: bool = True
    min_reduction_ratio: float | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> tuple[PolicyOptions, list[str]]:
        """Read every option from `raw` (camelCase or snake_case); return it with warnings."""
        values: dict[str, Any] = {}
        warnings: list[str] = []
        for f in fields(cls):
            camel = _camel(f.name)
            value = raw.get(camel, raw.get(f.name))
            if value is None:
                continue
            read, problem = _READERS[f.name](value)
            if read is not _DEFAULT:
                values[f.name] = read
            if problem is not None:
                shown = "" if f.name in _SECRET_OPTIONS else f" {_show(value)}"
                resolved = values.get(f.name, getattr(cls(), f.name))
                warnings.append(f"{camel}:{shown} {problem}; using {resolved!r}")
        options = cls(**values)
        if not options.taint_replace_defaults:
            options = replace(
                options,
                taint_tools=_union(DEFAULT_TAINT_TOOLS, options.taint_tools),
                taint_skills=_union(DEFAULT_TAINT_SKILLS, options.taint_skills),
            )
        return options, warnings


def parse_backend(value: Any) -> Backend:
    """`tev` or `rules` by keyword; anything else is `systemone`."""
    word = keyword(value)
    return word if word in ("tev", "rules") else "systemone"  # type: ignore[return-value]


def parse_egress(value: Any) -> Egress:
    """Blank, absent or `full` → full; anything else, non-strings included, → metadata."""
    if value is None or (isinstance(value, str) and keyword(value) in (None, "full")):
        return "full"
    return "metadata"


def parse_fallback(value: Any) -> Fallback:
    """`summary` by keyword; anything else is `rules`."""
    return "summary" if keyword(value) == "summary" else "rules"


def declared_local(value: Any) -> bool:
    """A local judge is declared only by JSON true or the exact string "true"."""
    return value is True or value == "true"


def compaction_timeout_ms(value: Any) -> int:
    """A finite number > 0, rounded up; else the 15000 ms default."""
    resolved = _timeout(value)
    return DEFAULT_DEADLINE_MS if resolved is None else resolved


_DEFAULT: Any = object()
"""Reader result meaning "use the field's default"."""
Reader = Callable[[Any], tuple[Any, str | None]]
_SECRET_OPTIONS = frozenset({"api_key", "base_url"})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _union(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*first, *second)))


def _strict(read: Callable[[Any], Any], expected: str) -> Reader:
    """A reader for which None means malformed."""

    def reader(value: Any) -> tuple[Any, str | None]:
        result = read(value)
        return (_DEFAULT, f"is not {expected}") if result is None else (result, None)

    return reader


def _keyword_of(words: tuple[str, ...], resolve: Callable[[Any], Any]) -> Reader:
    def reader(value: Any) -> tuple[Any, str | None]:
        problem = None if keyword(value) in words else f"is not one of {'/'.join(words)}"
        return resolve(value), problem

    return reader


def _count(value: Any) -> int | None:
    number = count(value, -1)
    return None if number < 0 else number


def _timeout(value: Any) -> int | None:
    number = finite_number(value)
    return math.ceil(number) if number is not None and number > 0 else None


def _local(value: Any) -> bool | None:
    if value is False or value == "false":
        return False
    return True if declared_local(value) else None


def _flag(value: Any) -> bool | None:
    return flag(value, False) if is_flag(value) else None


def _egress(value: Any) -> tuple[Any, str | None]:
    resolved = parse_egress(value)
    exact = isinstance(value, str) and keyword(value) in (None, "full", "metadata")
    return resolved, None if exact else "is not full/metadata (sending less)"


def _keep_threshold(value: Any) -> tuple[Any, str | None]:
    number = finite_number(value)
    if number is None:
        return _DEFAULT, "is not a finite number"
    low, high = KEEP_THRESHOLD_BOUNDS
    if 0 < number < 1:
        return number, None
    return min(max(number, low), high), "is outside (0, 1)"


def _cache_warm(value: Any) -> tuple[Any, str | None]:
    word = js_string(value).strip().lower()
    if word in CACHE_WARM_WORDS:
        return CACHE_WARM_WORDS[word], None
    return _DEFAULT, "is not off/notify/compact"


_NUMBER = _strict(finite_number, "a finite number")
_COUNT = _strict(_count, "a count ≥ 0")
_READERS: dict[str, Reader] = {
    "enabled_by_default": lambda v: (v, None),
    "taint_tools": _strict(list_option, "a list or comma string"),
    "taint_skills": _strict(list_option, "a list or comma string"),
    "taint_replace_defaults": _strict(_flag, "a flag"),
    "backend_local": _strict(_local, "true or false"),
    "backend": _keyword_of(get_args(Backend), parse_backend),
    "base_url": _strict(non_empty_string, "a non-empty string"),
    "model": _strict(non_empty_string, "a non-empty string"),
    "api_key": _strict(non_empty_string, "a non-empty string"),
    "egress": _egress,
    "fallback": _keyword_of(get_args(Fallback), parse_fallback),
    "keep_threshold": _keep_threshold,
    "preserve_recent_messages": _COUNT,
    "max_state_tokens": _COUNT,
    "max_request_tokens": _COUNT,
    "truncate_head_chars": _COUNT,
    "compact_at_percent": _NUMBER,
    "compact_at_tokens": _NUMBER,
    "rearm_tokens": _NUMBER,
    "cache_warm": _cache_warm,
    "cache_warm_floor_tokens": _NUMBER,
    "cache_ttl_seconds": _NUMBER,
    "cache_ttl_margin_seconds": _NUMBER,
    "compaction_timeout_ms": _strict(_timeout, "a number of ms > 0"),
    "save_full_outputs": _strict(_flag, "a flag"),
    "record_decisions": _strict(_flag, "a flag"),
    "min_reduction_ratio": _NUMBER,
}
