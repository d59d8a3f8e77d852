"""Lenient coercion of configuration values (JSON, env strings, shell-projected text).

Every function here is total: a malformed value yields None or the caller's default, never an
exception.
"""

from __future__ import annotations

import math
from typing import Any

_TRUE_WORDS = frozenset({"1", "true", "on", "yes"})
_FALSE_WORDS = frozenset({"0", "false", "off", "no"})


def finite_number(value: Any) -> float | None:
    """A JSON number, or a trimmed decimal string (`"1e3"`), as a finite float; else None.

    Booleans are not numbers, and underscores (`"1_000"`) and non-ASCII digits are rejected.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if not text.isascii() or "_" in text:
            return None
        try:
            number = float(text)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def count(value: Any, default: int) -> int:
    """A finite number ≥ 0, floored; else `default`."""
    number = finite_number(value)
    return math.floor(number) if number is not None and number >= 0 else default


def keyword(value: Any) -> str | None:
    """A non-blank string, trimmed and lower-cased; else None."""
    if isinstance(value, str) and value.strip():
        return value.strip().lower()
    return None


def non_empty_string(value: Any) -> str | None:
    """A string of at least one char, as is (untrimmed); else None."""
    return value if isinstance(value, str) and value else None


def js_string(value: Any) -> str:
    """The text JavaScript's `String(value)` gives for a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return ",".join("" if v is None else js_string(v) for v in value)
    return "[object Object]"


def flag(value: Any, default: bool) -> bool:
    """A JSON bool, or `1|true|on|yes` / `0|false|off|no` (any case); else `default`."""
    if isinstance(value, bool):
        return value
    word = keyword(value)
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    return default


def is_flag(value: Any) -> bool:
    """Whether `flag` would read `value` rather than fall back to its default."""
    return isinstance(value, bool) or keyword(value) in _TRUE_WORDS | _FALSE_WORDS


def list_option(value: Any) -> tuple[str, ...] | None:
    """An array (each item as JavaScript text, trimmed, blanks dropped) or a comma string.

    None (use the default) for any other shape or a blank string; an explicit `[]` is empty.
    """
    if isinstance(value, list):
        items = [js_string(v).strip() if v is not None else "" for v in value]
    elif isinstance(value, str) and value.strip():
        items = [part.strip() for part in value.split(",")]
    else:
        return None
    return tuple(item for item in items if item)
