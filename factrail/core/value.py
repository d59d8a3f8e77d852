"""Learned token value: which lines of an observation are worth keeping.

Each candidate token of a result gets a value from a standardised logistic regression (13
features; fitted upstream on 191,076 tokens of 85 agent transcripts, label: the agent used the
token after compaction). A stub keeps its regex fact lines and error lines unconditionally, then
fills the rest of its budget by lazy greedy weighted coverage of token value; pooling re-plans
every stub's greedy part under one shared budget, so a token kept anywhere counts once.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from factrail.core.facts import (
    Score,
    fact_score,
    pick_fact_lines,
    scored_units,
    token_matches,
    toks,
    units,
)
from factrail.core.model import Message, input_json

INTERCEPT = -2.884622
MU = (0.400888, 0.240747, 0.240281, 0.016752, 2.832681, 0.13081, 0.871874, 0.004401, 0.007997,
      3.024303, 0.478259, 9.281838, 0.050729)  # fmt: skip
SD = (0.490078, 0.427537, 0.427254, 0.128343, 0.642327, 0.239112, 0.385938, 0.066197, 0.089067,
      0.954716, 0.292466, 1.062772, 0.219443)  # fmt: skip
BETA = (-0.227483, 0.122111, -0.003107, 0.097325, -0.170036, -0.058623, 0.360508, 0.183316,
        0.152196, -0.008517, -0.118614, -0.332467, 0.520239)  # fmt: skip
_W = tuple(b / s for b, s in zip(BETA, SD, strict=True))
_Z0 = INTERCEPT - sum(w * m for w, m in zip(_W, MU, strict=True))

_EXTENSION = re.compile(r"\.[A-Za-z]{1,5}\Z")
_HEX = re.compile(r"[0-9a-fA-F]{8,}\Z")
_ERROR_PIECE = re.compile(r"error|failed|exception|traceback|denied|not found|timed out", re.I)
_DIGITS = frozenset("0123456789")
_DROP_DIGITS = str.maketrans("", "", "0123456789")
_EPS = 1e-12

Tokens = Callable[[str], AbstractSet[str]]
"""A tokenizer: `toks`, or a memoised copy of it shared across one compaction."""


@dataclass(frozen=True, slots=True)
class ValueContext:
    """What the agent saw around one result: its call's input, the user prompt, reuse."""

    input: str
    user: str
    dist: int
    reused: frozenset[str]


def message_contexts(messages: Sequence[Message], tokens: Tokens = toks) -> dict[str, ValueContext]:
    """The value context of every result, by tool_use_id (a later duplicate wins)."""
    outs: list[tuple[int, str, str, str]] = []  # (event index, id, text, last input)
    spoken: list[tuple[int, str]] = []  # assistant texts and inputs, by event index
    user = ""
    last_input = ""
    n = 0
    for m in messages:
        if m.role == "user":
            if not m.tool_results:
                user = m.text
                n += 1
            for r in m.tool_results:
                outs.append((n, r.tool_use_id, r.text, last_input))
                n += 1
        else:
            spoken.append((n, m.text))
            n += 1
            for u in m.tool_uses:
                last_input = input_json(u)
                spoken.append((n, last_input))
                n += 1
    last_said: dict[str, int] = {}
    for i, text in spoken:
        for t in tokens(text):
            last_said[t] = i
    intro: dict[str, int] = {}
    for i, _, text, _ in outs:
        for t in tokens(text) & last_said.keys():
            intro.setdefault(t, i)
    reused = frozenset(t for t, i in intro.items() if i < last_said[t])
    total = len(outs)
    return {
        rid: ValueContext(input=inp, user=user, dist=total - k, reused=reused)
        for k, (_, rid, _, inp) in enumerate(outs)
    }


def occurrences(text: str) -> dict[str, tuple[int, int]]:
    """`(count, first index)` of every candidate token of `text`, counted as token matches.

    One linear scan: a token seen only inside a longer token is not counted there.
    """
    out: dict[str, tuple[int, int]] = {}
    for m in token_matches(text):
        t = m.group().rstrip(".:,")
        hit = out.get(t)
        out[t] = (1, m.start()) if hit is None else (hit[0] + 1, hit[1])
    return out


_W0, _W1, _W2, _W3, _W4, _W5, _W6, _W7, _W8, _W9, _W10, _W11, _W12 = _W


def _value(t: str, seen: tuple[int, int], size: int, ctx: ValueContext) -> float:
    n = len(t)
    digits = len(t) - len(t.translate(_DROP_DIGITS))
    z = _Z0 + (
        0
        + _W0 * (1.0 if digits else 0.0)
        + _W1 * (1.0 if ("/" in t or "\\" in t) else 0.0)
        + _W2 * (1.0 if _EXTENSION.search(t) else 0.0)
        + _W3 * (1.0 if _HEX.match(t) else 0.0)
        + _W4 * math.log(n)
        + _W5 * (digits / n)
        + _W6 * math.log1p(seen[0])
        + _W7 * (1.0 if t in ctx.input else 0.0)
        + _W8 * (1.0 if t in ctx.user else 0.0)
        + _W9 * math.log1p(ctx.dist)
        + _W10 * (seen[1] / size)
        + _W11 * math.log(size)
        + _W12 * (1.0 if t in ctx.reused else 0.0)
    )
    return 1.0 / (1.0 + math.exp(-z))


def token_values(
    text: str, ctx: ValueContext, tokens: Iterable[str] | None = None
) -> dict[str, float]:
    """The value of each candidate token of the full result `text` (or of the given tokens)."""
    size = max(len(text), 1)
    seen = occurrences(text)
    wanted = toks(text) if tokens is None else tokens
    return {t: _value(t, seen.get(t, (1, 0)), size, ctx) for t in wanted}


@dataclass(frozen=True, slots=True)
class Candidate:
    """One unit a cover may pick: its tokens, its size and the value map that scores it."""

    tokens: frozenset[str]
    chars: int
    values: Mapping[str, float]


def _worth(c: Candidate, covered: AbstractSet[str]) -> float:
    return sum(c.values.get(t, 0.0) for t in c.tokens if t not in covered) / (c.chars + 1)


def lazy_cover(candidates: Sequence[Candidate], covered: set[str], room: int) -> list[int]:
    """Lazy greedy weighted coverage under `room` chars (len+1 each); picks in pick order."""
    covered = set(covered)
    heap = [(-_worth(c, frozenset()), i) for i, c in enumerate(candidates) if c.tokens]
    heapq.heapify(heap)
    used = 0
    picks: list[int] = []
    while heap:
        _, i = heapq.heappop(heap)
        c = candidates[i]
        worth = _worth(c, covered)
        if worth <= 0:
            continue
        if heap and worth < -heap[0][0] - _EPS:
            heapq.heappush(heap, (-worth, i))
            continue
        if used + c.chars + 1 > room:
            continue
        picks.append(i)
        used += c.chars + 1
        covered |= c.tokens
    return picks


@dataclass(frozen=True, slots=True)
class ValueParts:
    """A stub's lines chosen by value: `pre` kept unconditionally, `greedy` picked by cover.

    `units` are the distinct units of the middle, in text order (a duplicate sits at its last
    index); `pre`, `greedy` and `rest` index into it (`rest` = every unit not in `pre`).
    """

    units: list[str]
    pre: list[int]
    greedy: list[int]
    rest: list[int]
    values: Mapping[str, float]

    def lines(self, picks: Iterable[int] | None = None) -> list[str]:
        """The kept lines in text order: pre plus `picks` (default: the greedy picks)."""
        chosen = sorted({*self.pre, *(self.greedy if picks is None else picks)})
        return [self.units[i] for i in chosen]

    def spend(self) -> int:
        """Chars the greedy picks take (len+1 each)."""
        return sum(len(self.units[i]) + 1 for i in self.greedy)


def value_parts(
    middle: str,
    budget: int,
    values: Mapping[str, float],
    *,
    score: Score = fact_score,
    tokens: Tokens = toks,
) -> ValueParts:
    """Choose a stub's lines by token value, never spending more than the regex selector."""
    all_units = units(middle)
    last = {u: i for i, u in enumerate(all_units)}
    order = sorted(last.values())
    distinct = [all_units[i] for i in order]
    at = {u: k for k, u in enumerate(distinct)}
    scored = scored_units(middle, score)
    cap = sum(len(u) + 1 for _, u in pick_fact_lines(scored, budget))
    pre: list[int] = []
    used = 0
    for _, u in pick_fact_lines(scored, cap // 3):
        if used + len(u) + 1 <= cap:
            pre.append(at[u])
            used += len(u) + 1
    chosen = set(pre)
    for k, u in enumerate(distinct):
        if k not in chosen and _ERROR_PIECE.search(u) and used + len(u) + 1 <= cap:
            pre.append(k)
            chosen.add(k)
            used += len(u) + 1
    covered: set[str] = set()
    for k in pre:
        covered |= tokens(distinct[k])
    rest = [k for k in range(len(distinct)) if k not in chosen]
    cands = [Candidate(frozenset(tokens(distinct[k])), len(distinct[k]), values) for k in rest]
    greedy = [rest[j] for j in lazy_cover(cands, covered, cap - used)]
    return ValueParts(distinct, sorted(pre), greedy, rest, values)


_ALNUM = re.compile(r"[^\W_]+")


def _aligned_in(key: str, text: str) -> bool:
    """Whether `key` occurs in `text` with no alphanumeric char touching it on either side."""
    start = text.find(key)
    while start >= 0:
        end = start + len(key)
        if (start == 0 or not text[start - 1].isalnum()) and (
            end == len(text) or not text[end].isalnum()
        ):
            return True
        start = text.find(key, start + 1)
    return False


def _selectivity(run: str) -> tuple[bool, int]:
    return (any(c in _DIGITS for c in run), len(run))


def _by_segment(keys: Iterable[str]) -> dict[str, list[str]]:
    """Keys by their most telling alphanumeric run (one with a digit, then the longest).

    An aligned occurrence shows every run of the key whole, so any run can index it.
    """
    out: dict[str, list[str]] = {}
    for k in keys:
        runs = _ALNUM.findall(k)
        if runs:
            out.setdefault(max(runs, key=_selectivity), []).append(k)
    return out


def _contained(index: Mapping[str, list[str]], text: str) -> set[str]:
    """The indexed keys that occur aligned in `text`."""
    return {
        k
        for seg in set(_ALNUM.findall(text)) & index.keys()
        for k in index[seg]
        if _aligned_in(k, text)
    }


def pool(
    parts: Sequence[ValueParts],
    side: Sequence[str],
    *,
    contain: bool = True,
    tokens: Tokens = toks,
) -> list[list[int]]:
    """Re-plan every stub's greedy picks under one budget; the pooled picks per stub."""
    covered: set[str] = set()
    for s in side:
        covered |= tokens(s)
    if contain:
        keys = {k for p in parts for k in p.values} - covered
        covered |= _contained(_by_segment(keys), "\x00".join(side))
    room = sum(p.spend() for p in parts)
    cands: list[Candidate] = []
    owner: list[tuple[int, int]] = []
    for n, p in enumerate(parts):
        index = _by_segment(p.values) if contain else {}
        for k in p.rest:
            unit = p.units[k]
            unit_tokens = frozenset(tokens(unit))
            if index:
                unit_tokens |= _contained(index, unit)
            cands.append(Candidate(unit_tokens, len(unit), p.values))
            owner.append((n, k))
    picks: list[list[int]] = [[] for _ in parts]
    for j in lazy_cover(cands, covered, room):
        n, k = owner[j]
        picks[n].append(k)
    return picks
