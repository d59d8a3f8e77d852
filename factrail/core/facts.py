"""Fact lines: the short pieces of a tool output most likely to matter later.

A text is cut into units (lines, JSON-escaped lines, long lines split near 200 chars); each unit
scores one point per fact pattern it matches (errors, HTTP codes, paths, versions, hex ids,
endpoints, counters, quantities, big numbers, file names, receipts). Our own mark lines are never
units, so a note is never picked as a fact.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from factrail.core.kernels import active
from factrail.core.marks import is_mark_line

_K = active()

FACT_LINE_CHARS = 200
_SPLIT_MIN = 100
_SEPARATORS = (", ", "; ", " | ", " ")

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

_DIG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@#-]{5,}")
_DIG_OR_BREAK = re.compile(r"\n|[A-Za-z0-9][A-Za-z0-9_.:/@#-]{5,}")
_WRD = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{7,}")
_WRD_OR_BREAK = re.compile(r"\n|[A-Za-z_][A-Za-z0-9_./-]{7,}")
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_.:/@#-]{6,}")
"""A run of the chars every candidate token is made of, long enough to hold one."""
_HAS_DIGIT = re.compile(r"[0-9]")
_ANY_DIGIT = re.compile(r"\d")
_TRAILING = ".:,"


def _has_mark(text: str) -> bool:
    return "[factrail omitted " in text or "compaction truncated " in text


def _is_mark(line: str) -> bool:
    """`is_mark_line`, skipping its regexes on the lines that hold neither mark phrase."""
    return _has_mark(line) and is_mark_line(line)


def _part_spans(part: str, at: int, out: list[tuple[int, int, bool]]) -> None:
    """The units of one stripped-to-be piece of a line starting at offset `at` (see `units`)."""
    stripped = part.strip()
    if not stripped:
        return
    start = at + len(part) - len(part.lstrip())
    if len(stripped) <= FACT_LINE_CHARS:
        out.append((start, start + len(stripped), True))
        return
    rest, clean = stripped, True
    while len(rest) > FACT_LINE_CHARS:
        window = rest[:FACT_LINE_CHARS]
        c = max(window.rfind(sep) for sep in _SEPARATORS)
        hard = c <= _SPLIT_MIN
        cut = FACT_LINE_CHARS if hard else c + 1
        head = rest[:cut]
        piece = head.strip()
        if piece:
            lead = len(head) - len(head.lstrip())
            out.append((start + lead, start + lead + len(piece), clean and not hard))
        tail = rest[cut:]
        rest = tail.strip()
        start += cut + len(tail) - len(tail.lstrip())
        clean = not hard
    if rest:
        out.append((start, start + len(rest), clean))


def unit_spans(text: str) -> list[tuple[int, int, bool]]:
    """`(start, end, clean)` of every unit of `text` (`units(text)[i] == text[start:end]`);
    `clean`: no token char touches either edge, so a token of the text never straddles it
    (false only beside a long line cut at 200 chars with no separator to cut at)."""
    marked = _has_mark(text)
    if (kernel := _K.unit_spans) is not None and not marked:
        return kernel(text)
    out: list[tuple[int, int, bool]] = []
    pos = 0
    for line in text.split("\n"):
        if not (marked and _is_mark(line)):
            if "\\n" in line:
                at = pos
                for part in line.split("\\n"):
                    _part_spans(part, at, out)
                    at += len(part) + 2
            else:
                _part_spans(line, pos, out)
        pos += len(line) + 1
    return out


def units(text: str) -> list[str]:
    """The text cut into trimmed pieces of at most 200 chars (mark lines left out): its lines,
    then each line at its escaped newlines, then long pieces near 200 chars, at a separator past
    the first 100 chars when there is one."""
    return [text[a:b] for a, b, _ in unit_spans(text)]


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

    Only whether a unit matches matters here, not its score: the units a `FactScores` has not
    scored yet are tried pattern by pattern until the share is reached.
    """
    need = len(text) * share
    distinct = list(dict.fromkeys(units_of(text)))
    if not isinstance(score, FactScores):
        return sum(len(u) + 1 for u in distinct if score(u) > 0) >= need
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
    marked = _has_mark(text)
    if (kernel := _K.fact_tokens) is not None:  # it leaves out the mark lines itself
        return kernel(text, FACT_TOKEN.findall, is_mark_line if marked else None)
    if marked:
        text = "\n".join(line for line in text.split("\n") if not _is_mark(line))
    return set(FACT_TOKEN.findall(text))


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
    if (kernel := _K.toks) is not None:
        return kernel(s)
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
    if (kernel := _K.toks_each) is not None:
        return kernel(units)
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
