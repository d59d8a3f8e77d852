"""Fact lines: the short units of a tool output most likely to matter later.

Each unit (`factrail.core.units`) scores one point per fact pattern it matches (errors, HTTP
codes, paths, versions, hex ids, endpoints, counters, quantities, big numbers, file names,
receipts); the best-scoring distinct units under a budget are a result's fact lines. Fact
tokens (paths, hex ids, multi-digit numbers) are what the escalation counts as lost.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence

from factrail.core.kernels import active
from factrail.core.marks import has_mark_phrase, is_mark_line
from factrail.core.units import units

_K = active()

_HEX = r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"
"""Hex id: 7–40 hex chars with at least one digit and one letter (not `1234567`, not `defaced`)."""

PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(
        r"\b(?:error|errors|failed|failure|fail|exception|traceback|denied|refused|invalid"
        r"|not found|timed? ?out|fatal|panic|warning)\b|invalid_\w+",
        re.IGNORECASE,
    ),
    re.compile(r"✖|✗|\bFAIL\b|\bERR\b"),
    re.compile(r"\bHTTP\b[\s/\d.]*\d{3}\b|\bstatus[\s:=]+\d{3}\b", re.IGNORECASE),
    re.compile(r"[A-Za-z]:[\\/][^\s\"'<>]+|(?:^|[\s\"'(=])/(?:[\w.@-]+/)+[\w.@-]+"),
    re.compile(r"\b\d+\.\d+\.\d+\b"),
    re.compile(_HEX, re.IGNORECASE),
    re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b|\blocalhost:\d+\b"),
    re.compile(
        r"\b(?:pid|port|exit|rc|code|size|bytes|pass(?:ed)?|fail(?:ed)?|tests?|total|count)\b"
        r"[\s:=]*\d",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b\d[\d,.]*\s?(?:(?:ms|kb|mb|gb|bytes|tokens|lines?|files?)\b|%(?!\w))", re.IGNORECASE
    ),
    re.compile(r"\b\d{4,}\b"),
    re.compile(
        r"\b[\w.-]+\.(?:[cm]?[jt]sx?|py|json|ya?ml|md|toml|txt|log|rs|go|sh|ps1|cmd|lock|sql)\b",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(?:message_id|ticket|confirm(?:ed)?|sent|delivered|created|updated|deleted|order"
        r"|transaction|commit)\b[\s:=#]+[\w-]+",
        re.IGNORECASE,
    ),
)
"""The 12 fact patterns; a unit's fact score is how many of them match it."""

_WORD_PATTERNS = tuple(PATTERNS[i] for i in (0, 1, 3, 10, 11))
"""The patterns that can match a unit without an ASCII digit."""

_CASED = "A-Za-z\u0130\u0131\u017f\u212a"
"""`[A-Za-z]` under IGNORECASE: the ASCII letters and the four non-ASCII chars that fold to one."""
FACT_TOKEN_DEFINITION = (
    rf"[A-Za-z]:[\\/][^\s\"'<>]+|/(?:[\w.@-]+/)+[\w.@-]+|{_HEX}|\b\d[\d.,:]*\d\b"
)
"""The tokens whose loss the escalation counts (paths, hex ids, multi-digit numbers), matched
case-insensitively; `FACT_TOKEN` is the same set spelt case-sensitively, with a leading set of
the chars a match starts with, which scans ≈ 2× faster."""
FACT_TOKEN = re.compile(
    rf"(?=[{_CASED}/\da-fA-F])"  # the chars a match can start with: lets the scan skip ahead
    rf"(?:[{_CASED}]:[\\/][^\s\"'<>]+|/(?:[\w.@-]+/)+[\w.@-]+"
    r"|\b(?:(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{7,40}\b|\d[\d.,:]*\d\b))"
)

_ANY_DIGIT = re.compile(r"\d")


def fact_score(unit: str) -> int:
    """How many of the 12 fact patterns match `unit` (the definition; `unit_scores` is faster)."""
    if not unit:
        return 0
    patterns = PATTERNS if _ANY_DIGIT.search(unit) else _WORD_PATTERNS
    return sum(1 for p in patterns if p.search(unit) is not None)


_PATH_LEADS = (b"\n", b" ", b"\t", b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f",
               b'"', b"'", b"(", b"=")  # fmt: skip
"""What may stand before a path's first `/`: a unit start (its newline), `\\s`, a quote."""
_SPACE = rb"[ \t\n\r\x0b\x0c\x1c-\x1f]"
"""`\\s` on ASCII text (a unit's own newline included)."""
_NEEDLES: tuple[tuple[bytes, ...] | re.Pattern[bytes], ...] = (
    (b"error", b"fail", b"exception", b"traceback", b"denied", b"refused", b"invalid",
             b"not found", b"time", b"fatal", b"panic", b"warning"),
    (b"FAIL", b"ERR"),
    (b"http", b"status"),
    (b":/", b":\\", *(c + b"/" for c in _PATH_LEADS)),
    re.compile(rb"0\.0+\.0"),
    (b"hhhhhhh",),
    (b"localhost:",),  # and every unit pattern 4 may match: an IP address holds a version
    re.compile(rb"(?:pid|port|exit|rc|code|size|bytes|pass|fail|test|total|count)(?:ed|s)?"
               rb"(?:" + _SPACE + rb"|[:=])*0"),
    (b"ms", b"kb", b"mb", b"gb", b"bytes", b"tokens", b"line", b"file", b"%"),
    (b"0000",),
    re.compile(rb"\.(?:[cm]?[jt]sx?|py|json|ya?ml|md|toml|txt|log|rs|go|sh|ps0|cmd|lock|sql)"),
    (b"message_id", b"ticket", b"confirm", b"sent", b"delivered", b"created", b"updated",
             b"deleted", b"order", b"transaction", b"commit"),
)  # fmt: skip
"""Per pattern: literals one of which every match contains (or ends on, for a path), or a
looser form of the pattern that every match matches.

Looked up in folded views of the units, each after a newline: lower case with every digit as
`0` (`FAIL`/`ERR` in the text as it is, hex ids with every hex digit as `h`).
"""
_FOLD = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", b"abcdefghijklmnopqrstuvwxyz0000000000"
)
_HEX_FOLD = bytes.maketrans(b"0123456789abcdefABCDEF", b"h" * 22)
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_CASE_TWINS = frozenset("\u0130\u0131\u017f\u212a")
"""The non-ASCII chars that IGNORECASE matches with ASCII letters."""


def _folds_exactly(text: str) -> bool:
    """Whether ASCII folding shows every match: no non-ASCII digit, space or case twin."""
    if text.isascii():
        return True
    return not any(
        c in _CASE_TWINS or c.isdecimal() or c.isspace()
        for c in {m.group() for m in _NON_ASCII.finditer(text)}
    )


def _units_with(view: bytes, needles: tuple[bytes, ...], starts: list[int]) -> set[int]:
    """The units (by start offset in `view`) where one of `needles` ends."""
    out: set[int] = set()
    last = len(starts) - 1
    find = view.find
    for needle in needles:
        back = len(needle) - 1
        pos = find(needle)
        while pos >= 0:
            i = bisect_right(starts, pos + back) - 1
            out.add(i)
            pos = find(needle, starts[i + 1] - back) if i < last else -1
    return out


def _units_matching(view: bytes, finder: re.Pattern[bytes], starts: list[int]) -> set[int]:
    """The units (by start offset in `view`) where a match of `finder` starts."""
    out: set[int] = set()
    last = len(starts) - 1
    search = finder.search
    m = search(view)
    while m is not None:
        i = bisect_right(starts, m.start()) - 1
        out.add(i)
        m = search(view, starts[i + 1]) if i < last else None
    return out


def units_holding(units: Sequence[str], needles: tuple[bytes, ...]) -> set[int] | None:
    """The indexes of the units whose folded text (ASCII lower case, digits as `0`) holds one of
    `needles` (no newline in them), or None when folding could hide one (see `unit_scores`)."""
    joined = "".join(f"\n{u}" for u in units)
    if not _folds_exactly(joined):
        return None
    starts: list[int] = []
    at = 1
    for u in units:
        starts.append(at)
        at += len(u) + 1
    return _units_with(joined.encode("ascii", "replace").translate(_FOLD), needles, starts)


class _Views:
    """Units joined, each after a newline, in the folded byte views the needles are looked up in
    (`ok` is false when folding could hide a match: a non-ASCII digit, space or case twin)."""

    __slots__ = ("folded", "found", "hexed", "joined", "ok", "raw", "starts", "units")

    def __init__(self, units: Sequence[str]) -> None:
        self.units = units
        self.joined = joined = "".join(f"\n{u}" for u in units)
        self.ok = _folds_exactly(joined)
        self.starts: list[int] = []
        at = 1
        for u in units:
            self.starts.append(at)
            at += len(u) + 1
        self.raw = raw = joined.encode("ascii", "replace") if self.ok else b""
        self.folded = raw.translate(_FOLD)
        self.hexed = raw.translate(_HEX_FOLD)
        self.found: dict[int, set[int]] = {}

    def candidates(self, k: int) -> set[int]:
        """The units pattern `k` may match: those holding one of its needles."""
        if k == 6:
            return self._candidates(4) | self._candidates(6)
        return self._candidates(k)

    def _candidates(self, k: int) -> set[int]:
        hit = self.found.get(k)
        if hit is not None:
            return hit
        view = self.raw if k == 1 else self.hexed if k == 5 else self.folded
        needles = _NEEDLES[k]
        if isinstance(needles, re.Pattern):
            cands = _units_matching(view, needles, self.starts)
        else:
            cands = _units_with(view, needles, self.starts)
        if k == 1 and ("✖" in self.joined or "✗" in self.joined):
            cands.update(i for i, u in enumerate(self.units) if "✖" in u or "✗" in u)
        self.found[k] = cands
        return cands


def unit_scores(units: Sequence[str]) -> list[int]:
    """`fact_score` of every unit: ASCII ones by the C kernel, the others by `_needle_scores`."""
    if (kernel := _K.fact_scores) is None:
        return _needle_scores(units)
    scores = kernel(units)
    refused = [i for i, s in enumerate(scores) if s < 0]
    if refused:
        for i, s in zip(refused, _needle_scores([units[i] for i in refused]), strict=True):
            scores[i] = s
    return scores


def _needle_scores(units: Sequence[str]) -> list[int]:
    """`fact_score` of every unit: each pattern runs only on the units holding one of its needles.

    The needles are found in folded copies of all units, each after a newline (only a needle's
    first char may be that newline, so each hit lies in one unit); text whose folding could hide
    a match (a non-ASCII digit, space or case twin) is scored one unit at a time.
    """
    views = _Views(units)
    if not views.ok:
        return [fact_score(u) for u in units]
    scores = [0] * len(units)
    for k, pattern in enumerate(PATTERNS):
        search = pattern.search
        for i in views.candidates(k):
            if search(units[i]) is not None:
                scores[i] += 1
    return scores


_REACH_ORDER = (10, 3, 9, 8, 7, 0, 4, 5, 6, 2, 11, 1)
"""The patterns by how many lines of real tool output they match, most first."""


def _reach(units: Sequence[str], need: float) -> bool:
    """Whether the units (distinct) that match some fact pattern have `need` chars (len+1 each):
    the ASCII units by the C kernel, the others by `_needle_reach`."""
    if (kernel := _K.fact_scores) is None:
        return _needle_reach(units, need)
    got = 0
    refused: list[str] = []
    for u, s in zip(units, kernel(units), strict=True):
        if s > 0:
            got += len(u) + 1
        elif s < 0:
            refused.append(u)
    return got >= need or (bool(refused) and _needle_reach(refused, need - got))


def _needle_reach(units: Sequence[str], need: float) -> bool:
    """`_reach` pattern by pattern over the units not yet matched, stopping once `need` is met."""
    views = _Views(units)
    if not views.ok:
        return sum(len(u) + 1 for u in units if fact_score(u) > 0) >= need
    matched = [False] * len(units)
    got = 0
    for k in _REACH_ORDER:
        search = PATTERNS[k].search
        for i in views.candidates(k):
            if not matched[i] and search(units[i]) is not None:
                matched[i] = True
                got += len(units[i]) + 1
        if got >= need:
            return True
    return False


_DIGIT_FOLD = str.maketrans("23456789", "00000000")
"""Every ASCII digit but `1` as `0`. The fact patterns tell digits apart only by the literal
`ps1`, so a unit and its fold have the same score: log lines that differ only in their numbers
(times, counts, ids, line numbers) are scored once."""


def score_key(unit: str) -> str:
    """The memo key of a unit's fact score (`fact_score(score_key(u)) == fact_score(u)`)."""
    if (kernel := _K.fold_digits) is not None:
        return kernel(unit)
    return unit.translate(_DIGIT_FOLD)


def score_keys(units: Sequence[str]) -> list[str]:
    """`[score_key(u) for u in units]`, folding the units joined by newlines in one call when
    none holds a newline (`str.translate` costs ≈ 1 µs a call, and far more per char on a
    non-ASCII text, which the C kernel folds at memory speed)."""
    joined = "\n".join(units)
    if joined.count("\n") != len(units) - 1 or not units:
        return [score_key(u) for u in units]
    if (kernel := _K.fold_digits) is not None:
        return kernel(joined).split("\n")
    return joined.translate(_DIGIT_FOLD).split("\n")


class FactScores:
    """`fact_score` memoised across one compaction by `score_key`; `many` scores the misses in
    one scan."""

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        self._memo: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._memo)

    def known(self, units: Sequence[str]) -> list[int | None]:
        """The score of each unit that (or a unit with the same key) was scored already."""
        get = self._memo.get
        return [get(k) for k in score_keys(units)]

    def __call__(self, unit: str) -> int:
        key = score_key(unit)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = fact_score(key)
        return hit

    def many(self, units: Sequence[str]) -> list[int]:
        """The score of every unit of `units`."""
        memo = self._memo
        keys = score_keys(units)
        missing = list({k: None for k in keys if k not in memo})
        if missing:
            memo.update(zip(missing, unit_scores(missing), strict=True))
        return [memo[k] for k in keys]


Score = Callable[[str], int]
"""A unit scorer: `fact_score`, or a `FactScores` shared across one compaction."""


def scores_of(units: Sequence[str], score: Score = fact_score) -> list[int]:
    """`[score(u) for u in units]`, in one scan when `score` is `fact_score` or `FactScores`."""
    if score is fact_score:
        return unit_scores(units)
    if isinstance(score, FactScores):
        return score.many(units)
    return [score(u) for u in units]


def scored_units(text: str, score: Score = fact_score) -> list[tuple[int, int, str]]:
    """`(score, index, unit)` for every unit of `text` with a positive score, in text order."""
    all_units = units(text)
    scores = scores_of(all_units, score)
    return [(s, i, u) for i, (s, u) in enumerate(zip(scores, all_units, strict=True)) if s > 0]


def pick_fact_lines(scored: list[tuple[int, int, str]], budget: int) -> list[tuple[int, str]]:
    """Greedy by score then position under `budget` (len+1 per line); `(index, unit)` in order."""
    picked: list[tuple[int, str]] = []
    seen: set[str] = set()
    used = 0
    for _, i, u in sorted(scored, key=lambda x: (-x[0], x[1])):
        cost = len(u) + 1
        if u in seen or used + cost > budget:
            continue
        seen.add(u)
        used += cost
        picked.append((i, u))
    picked.sort()
    return picked


def fact_lines(text: str, budget: int, score: Score = fact_score) -> list[str]:
    """The best-scoring distinct units of `text` that fit in `budget` chars, in text order."""
    return [u for _, u in pick_fact_lines(scored_units(text, score), budget)]


def facts_reach(
    text: str,
    share: float,
    score: Score = fact_score,
    units_of: Callable[[str], Sequence[str]] = units,
) -> bool:
    """Whether the distinct fact lines of `text` (len+1 each, no budget) make up `share` of it.

    Only whether a unit matches matters here, not its score: in Python, the units a
    `FactScores` has not scored yet are tried pattern by pattern until the share is reached;
    the C kernel scores them whole, and the `FactScores` keeps those scores for the stub that
    cuts the text when the share is not reached.
    """
    need = len(text) * share
    distinct = list(dict.fromkeys(units_of(text)))
    if not isinstance(score, FactScores):
        return sum(len(u) + 1 for u in distinct if score(u) > 0) >= need
    if _K.fact_scores is not None:
        scores = score.many(distinct)
        return sum(len(u) + 1 for u, s in zip(distinct, scores, strict=True) if s > 0) >= need
    got = 0
    unknown: list[str] = []
    for u, hit in zip(distinct, score.known(distinct), strict=True):
        if hit is None:
            unknown.append(u)
        elif hit > 0:
            got += len(u) + 1
    if got >= need:
        return True
    return bool(unknown) and _reach(unknown, need - got)


def fact_tokens(text: str) -> set[str]:
    """The FACT_TOKENs of `text` outside its mark lines."""
    marked = has_mark_phrase(text)
    if (kernel := _K.fact_tokens) is not None:  # it leaves out the mark lines itself
        return kernel(text, FACT_TOKEN.findall, is_mark_line if marked else None)
    if marked:
        text = "\n".join(line for line in text.split("\n") if not is_mark_line(line))
    return set(FACT_TOKEN.findall(text))
