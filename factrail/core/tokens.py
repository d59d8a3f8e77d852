r"""Tokenizer-free token estimate: letter runs, digit runs and single symbols.

A run of L ASCII letters costs 1 + (L-1)//6, a run of digits L/2, any other char 0.9 (non-ASCII
letters included) but whitespace (`\s`: non-ASCII spaces are free too); the sum is rounded up.
`estimate_tokens` computes exactly that with byte-level counting (no per-token Python loop), so
a 1 MB body costs a few milliseconds. See docs/tokens.md for the estimate's measured bias
against a real BPE tokenizer.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from threading import Lock

from factrail.core.kernels import active

_K = active()

_PIECE = re.compile(r"[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")


def _class_table() -> tuple[bytes, bytes]:
    """Each UTF-8 byte's class (L letter, D digit, W space, S symbol); continuations dropped."""
    table = bytearray(b"S" * 256)
    for b in range(256):
        c = chr(b)
        if b < 128 and c.isalpha():
            table[b] = ord("L")
        elif b < 128 and c.isdigit():
            table[b] = ord("D")
        elif b < 128 and c.isspace():
            table[b] = ord("W")
    continuation = bytes(range(0x80, 0xC0))
    return bytes(table), continuation


_TABLE, _CONTINUATION = _class_table()
_LETTER_OR_NOT = bytes(ord("L") if b == ord("L") else ord("N") for b in range(256))


def _runs_at_least(letters: bytes, n: int) -> int:
    """How many letter runs in the L/N class string are at least `n` long."""
    tail = b"L" * n
    return letters.count(b"N" + tail) + (1 if letters.startswith(tail) else 0)


_WIDE_SPACE = re.compile(r"[^\S\x00-\x7f]")
r"""Whitespace outside ASCII (a no-break space, an ideographic space, …): free, like `\s`."""


def estimate_tokens(text: str) -> int:
    """Estimated token count of `text` (no tokenizer, no I/O)."""
    if (kernel := _K.estimate_tokens) is not None:
        return kernel(text)
    if not text:
        return 0
    if not text.isascii() and _WIDE_SPACE.search(text):
        text = _WIDE_SPACE.sub(" ", text)  # one byte class each, as the table sees ASCII space
    classes = text.encode("utf-8", "surrogatepass").translate(_TABLE, _CONTINUATION)
    total = classes.count(b"D") / 2 + classes.count(b"S") * 0.9
    letters = classes.translate(_LETTER_OR_NOT)
    runs = _runs_at_least(letters, 1)
    total += runs
    length = 7
    while runs:
        runs = _runs_at_least(letters, length)
        total += runs
        length += 6
    return math.ceil(total - 1e-9) if total > 0 else 0


class TokenCache:
    """Memoised `estimate_tokens` for long strings seen again (a session resends its history).

    Bounded by total cached chars; least recently used strings go first. Safe to share between
    the event loop and the worker thread that runs a compaction.
    """

    def __init__(self, max_chars: int = 64 * 1024 * 1024, min_len: int = 512) -> None:
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._chars = 0
        self._max_chars = max_chars
        self._min_len = min_len
        self._lock = Lock()

    def __call__(self, text: str) -> int:
        if len(text) < self._min_len:
            return estimate_tokens(text)
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        value = estimate_tokens(text)
        with self._lock:
            if text not in self._cache:
                self._cache[text] = value
                self._chars += len(text)
            while self._chars > self._max_chars and self._cache:
                old, _ = self._cache.popitem(last=False)
                self._chars -= len(old)
        return value


def estimate_tokens_reference(text: str) -> int:
    """The same estimate, one regex match at a time: the executable definition, for tests."""
    total = 0.0
    for m in _PIECE.finditer(text):
        s = m.group()
        c = s[0]
        if ("a" <= c <= "z") or ("A" <= c <= "Z"):
            total += 1 + (len(s) - 1) // 6
        elif "0" <= c <= "9":
            total += len(s) / 2
        else:
            total += 0.9
    return math.ceil(total - 1e-9) if total > 0 else 0
