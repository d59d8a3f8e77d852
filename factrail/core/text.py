"""Small text helpers shared by the engine: compact JSON, truncation, abridging, rounding."""

from __future__ import annotations

import json
import math
from typing import Any

ELLIPSIS = "…"


def compact_json(value: Any) -> str:
    """Compact JSON, insertion-ordered keys, no ASCII escaping: every length is measured on it."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return '"<unserialisable>"'


def truncate(s: str, n: int) -> str:
    """`s` unchanged if it fits in `n` chars, else its first n-1 chars plus an ellipsis."""
    if len(s) <= n:
        return s
    if n <= 0:
        return ""
    return s[: n - 1] + ELLIPSIS


def abridge(s: str, head: int, tail: int) -> str:
    """Keep `head` and `tail` chars with a bracketed count of what was cut between them."""
    if len(s) <= head + tail + 40:
        return s
    omitted = len(s) - head - tail
    return f"{s[:head]}\n[… {omitted} chars omitted …]\n{s[len(s) - tail :]}"


def round_half_away(x: float) -> int:
    """Round half away from zero (Python's round() is banker's rounding)."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)
