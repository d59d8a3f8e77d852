"""Candidate tokens: the ids, numbers and path-like words of a text whose value is learnt.

A candidate token is a run of `[A-Za-z0-9_.:/@#-]` (trailing `.:,` stripped) of at least 6 chars
holding a digit, or of at least 8 chars starting with a letter or `_`, holding no digit but a `/`,
`_` or `.`. No token holds a newline, so a text's tokens are those of its lines.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from factrail.core.kernels import active

_K = active()

_DIG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@#-]{5,}")
_DIG_OR_BREAK = re.compile(r"\n|[A-Za-z0-9][A-Za-z0-9_.:/@#-]{5,}")
_WRD = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{7,}")
_WRD_OR_BREAK = re.compile(r"\n|[A-Za-z_][A-Za-z0-9_./-]{7,}")
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_.:/@#-]{6,}")
"""A run of the chars every candidate token is made of, long enough to hold one."""
_HAS_DIGIT = re.compile(r"[0-9]")
_TRAILING = ".:,"


def token_occurrences(s: str) -> dict[str, tuple[int, int]]:
    """`(count, first start)` of every token of `toks(s)`, counted over the matches it is cut
    from: a token seen only inside a longer match is not counted there."""
    return token_scan(s).occurrences


@dataclass(frozen=True, slots=True)
class TokenScan:
    """Every kept candidate-token match of one text, from one scan of each token regex.

    `occurrences` is `token_occurrences(text)`; the matches of each regex are listed by start
    offset, so the tokens of any stretch no token straddles are two slices of them. Tuples: a
    session keeps its scans, and the garbage collector stops walking a tuple of strs and ints.
    """

    occurrences: dict[str, tuple[int, int]]
    digit_starts: tuple[int, ...]
    digit_found: tuple[str, ...]
    word_starts: tuple[int, ...]
    word_found: tuple[str, ...]

    def between(self, start: int, end: int) -> frozenset[str]:
        """The tokens of the matches that start in `[start, end)`, gathered in `toks` order."""
        ds, ws = self.digit_starts, self.word_starts
        out = set(self.digit_found[bisect_left(ds, start) : bisect_left(ds, end)])
        out.update(self.word_found[bisect_left(ws, start) : bisect_left(ws, end)])
        return frozenset(out)


def token_scan(text: str) -> TokenScan:
    """`TokenScan` of `text`."""
    if (kernel := _K.token_scan) is not None:
        return TokenScan(*kernel(text))
    out: dict[str, tuple[int, int]] = {}
    get = out.get
    digit = _HAS_DIGIT.search
    lists: list[tuple[list[int], list[str]]] = []
    for regex, least, word in ((_DIG, 6, False), (_WRD, 8, True)):
        starts: list[int] = []
        found: list[str] = []
        for m in regex.finditer(text):
            t = m.group().rstrip(_TRAILING)
            if len(t) < least:
                continue
            if word:
                if not ("/" in t or "_" in t or "." in t) or digit(t):
                    continue
            elif not digit(t):
                continue
            at = m.start()
            hit = get(t)
            out[t] = (1, at) if hit is None else (hit[0] + 1, hit[1])
            starts.append(at)
            found.append(t)
        lists.append((starts, found))
    (ds, df), (ws, wf) = lists
    return TokenScan(out, tuple(ds), tuple(df), tuple(ws), tuple(wf))


def token_substrings(text: str, cap: int) -> frozenset[str] | None:
    """Every substring of 6 chars or more of `text`'s runs of token chars, or None when there
    would be more than `cap` (a long run: a hash, a blob).

    A candidate token (`toks`: only those chars, at least 6 of them) lies inside one such run
    wherever it occurs, so it occurs in `text` exactly when it is in this set: one lookup, where
    `token in text` scans the text again for each of thousands of tokens.
    """
    runs = [m.group() for m in _TOKEN_RUN.finditer(text)]
    if sum((len(r) - 5) * (len(r) - 4) // 2 for r in runs) > cap:
        return None
    return frozenset(
        r[a:b] for r in runs for a in range(len(r) - 5) for b in range(a + 6, len(r) + 1)
    )


def toks(s: str) -> set[str]:
    """Candidate tokens: ids and numbers with a digit, and long path-like or dotted words."""
    digit = _HAS_DIGIT.search
    out = {t for m in _DIG.findall(s) if len(t := m.rstrip(_TRAILING)) >= 6 and digit(t)}
    for m in _WRD.findall(s):
        t = m.rstrip(_TRAILING)
        if len(t) >= 8 and ("/" in t or "_" in t or "." in t) and not digit(t):
            out.add(t)
    return out


def toks_each(units: Sequence[str]) -> list[frozenset[str]]:
    """`toks` of every unit, from two scans of the units joined by newlines (no token holds
    one, so each match lies in one unit)."""
    joined = "\n".join(units)
    if joined.count("\n") != len(units) - 1:
        return [frozenset(toks(u)) for u in units]
    found: list[set[str]] = [set() for _ in units]
    k = 0
    digit = _HAS_DIGIT.search
    for m in _DIG_OR_BREAK.findall(joined):
        if m == "\n":
            k += 1
        elif len(t := m.rstrip(_TRAILING)) >= 6 and digit(t):
            found[k].add(t)
    k = 0
    for m in _WRD_OR_BREAK.findall(joined):
        if m == "\n":
            k += 1
            continue
        t = m.rstrip(_TRAILING)
        if len(t) >= 8 and ("/" in t or "_" in t or "." in t) and not digit(t):
            found[k].add(t)
    return [frozenset(f) for f in found]


class TokenSets:
    """`toks` memoised across one compaction; `many` tokenises the misses in one scan."""

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        self._memo: dict[str, frozenset[str]] = {}

    def __call__(self, s: str) -> frozenset[str]:
        hit = self._memo.get(s)
        if hit is None:
            hit = self._memo[s] = frozenset(toks(s))
        return hit

    def __len__(self) -> int:
        return len(self._memo)

    def many(self, units: Sequence[str]) -> list[frozenset[str]]:
        """The tokens of every unit of `units`."""
        memo = self._memo
        missing = list({u: None for u in units if u not in memo})
        if missing:
            memo.update(zip(missing, toks_each(missing), strict=True))
        return [memo[u] for u in units]


Tokens = Callable[[str], AbstractSet[str]]
"""A tokenizer: `toks`, or a `TokenSets` shared across one compaction."""


def token_sets(units: Sequence[str], tokens: Tokens = toks) -> list[AbstractSet[str]]:
    """`[frozenset(tokens(u)) for u in units]`, in one scan when `tokens` is `toks` or
    `TokenSets`."""
    if tokens is toks:
        return list(toks_each(units))
    if isinstance(tokens, TokenSets):
        return list(tokens.many(units))
    return [frozenset(tokens(u)) for u in units]


def clean_cut(text: str, at: int) -> bool:
    """Whether no token can straddle `at` (a newline touches it; no token holds one)."""
    return at <= 0 or at >= len(text) or text[at - 1] == "\n" or text[at] == "\n"


def middle_tokens(text: str, start: int, end: int, scan: TokenScan | None = None) -> set[str]:
    """`toks(text[start:end])`; when both cuts are clean, the tokens of the whole text's
    matches there (`scan`, from `token_scan(text)`), in the whole text's first-seen order."""
    if not (clean_cut(text, start) and clean_cut(text, end)):
        return toks(text[start:end])
    if scan is None:
        scan = token_scan(text)
    inside = scan.between(start, end)
    return {t for t in scan.occurrences if t in inside}
