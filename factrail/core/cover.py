"""A stub's lines chosen by token value under a char budget.

A stub keeps its regex fact lines and its error lines unconditionally, then fills the rest of
its budget by lazy greedy weighted coverage of token value: the unit with the most value not yet
covered per char (len+1) comes next. `Middle` prepares a stub's middle once for any budget and
any value map with the same keys.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from factrail.core.candidate_tokens import Tokens, TokenScan, token_sets, toks
from factrail.core.facts import Score, fact_score, scores_of, units_holding
from factrail.core.kernels import active
from factrail.core.units import unit_spans

_K = active()

_ERROR_PIECE = re.compile(
    r"error|failed|fatal|panic|exception|traceback|denied|not found|timed out", re.I
)
_ERROR_NEEDLES = (b"error", b"failed", b"fatal", b"panic", b"exception", b"traceback", b"denied",
                  b"not found", b"timed out")  # fmt: skip
_EPS = 1e-12


@dataclass(frozen=True, slots=True)
class Candidate:
    """One unit a cover may pick: its tokens, its size and the value map that scores it."""

    tokens: frozenset[str]
    chars: int
    values: Mapping[str, float]


def cover(
    tokens: Sequence[AbstractSet[str]],
    chars: Sequence[int],
    values: Sequence[Mapping[str, float]],
    first: Sequence[float],
    among: Iterable[int],
    covered: AbstractSet[str],
    room: int,
) -> list[int]:
    """`lazy_cover` over the candidates `among` (parallel lists; `first`: worth with nothing
    covered), so callers that re-plan one middle under many budgets build them once."""
    if (kernel := _K.cover) is not None:
        return kernel(tokens, chars, values, first, among, covered, room)
    seen = set(covered)
    heap = [(-first[i], i) for i in among if tokens[i]]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    used = 0
    picks: list[int] = []
    while heap:
        _, i = pop(heap)
        cost = chars[i] + 1
        if used + cost > room:  # `used` only grows: it never fits
            continue
        get = values[i].get
        worth = sum(get(t, 0.0) for t in tokens[i] if t not in seen) / cost
        if worth <= 0:
            continue
        if heap and worth < -heap[0][0] - _EPS:
            push(heap, (-worth, i))
            continue
        picks.append(i)
        used += cost
        seen |= tokens[i]
    return picks


def _first_worth(tokens: AbstractSet[str], chars: int, values: Mapping[str, float]) -> float:
    get = values.get
    return sum(get(t, 0.0) for t in tokens) / (chars + 1)


def first_worths(
    tokens: Sequence[AbstractSet[str]], chars: Sequence[int], values: Mapping[str, float]
) -> list[float]:
    """`_first_worth` of every unit (0.0 for a unit without tokens)."""
    if (kernel := _K.first_worths) is not None:
        return kernel(tokens, chars, values)
    return [_first_worth(t, c, values) if t else 0.0 for t, c in zip(tokens, chars, strict=True)]


def lazy_cover(candidates: Sequence[Candidate], covered: set[str], room: int) -> list[int]:
    """Lazy greedy weighted coverage under `room` chars (len+1 each); picks in pick order."""
    tokens = [c.tokens for c in candidates]
    chars = [c.chars for c in candidates]
    values = [c.values for c in candidates]
    first = [_first_worth(c.tokens, c.chars, c.values) for c in candidates]
    return cover(tokens, chars, values, first, range(len(candidates)), covered, room)


@dataclass(frozen=True, slots=True)
class ValueParts:
    """A stub's lines chosen by value: `pre` kept unconditionally, `greedy` picked by cover.

    `units` are the distinct units of the middle, in text order (a duplicate sits at its last
    index); `pre`, `greedy` and `rest` index into it (`rest` = every unit not in `pre`).
    """

    units: Sequence[str]
    pre: list[int]
    greedy: list[int]
    rest: list[int]
    values: Mapping[str, float]
    tokens: Sequence[AbstractSet[str]] = field(default=(), compare=False)
    """The tokens of each unit when the planner knew them (else `pool` tokenises the units)."""
    contained: dict[int, AbstractSet[str]] | None = field(default=None, compare=False)
    """By unit index, the unit's tokens with the keys of `values` found aligned in it (what a
    pooled candidate covers when containment counts): shared by every parts of one middle,
    whose value maps all hold the same keys in the same order; `pool` fills what is missing."""

    def lines(self, picks: Iterable[int] | None = None) -> list[str]:
        """The kept lines in text order: pre plus `picks` (default: the greedy picks)."""
        chosen = sorted({*self.pre, *(self.greedy if picks is None else picks)})
        return [self.units[i] for i in chosen]

    def spend(self) -> int:
        """Chars the greedy picks take (len+1 each)."""
        return sum(len(self.units[i]) + 1 for i in self.greedy)


def _span_tokens(
    middle: str,
    spans: Sequence[tuple[int, int, bool]],
    chosen: Iterable[int],
    scan: TokenScan,
    offset: int,
    tokens: Tokens,
) -> list[AbstractSet[str]]:
    """The tokens of the units `chosen` (indexes into `spans`) of `middle`, which sits at
    `offset` of the text `scan` was made from with clean cuts: a slice of the scan per unit,
    except beside a hard cut, where the unit is tokenised on its own."""
    if (kernel := _K.span_tokens) is not None:
        return kernel(middle, spans, chosen, scan, offset, tokens)
    out: list[AbstractSet[str]] = []
    for i in chosen:
        a, b, clean = spans[i]
        out.append(scan.between(offset + a, offset + b) if clean else tokens(middle[a:b]))
    return out


def _ranked(units: Sequence[str], scores: Sequence[int]) -> tuple[list[tuple[str, int]], list[int]]:
    """The units with a positive score, best first (ties in text order), each with its first
    index in that order (a duplicate never changes a pick), and `least[k]`: the cheapest (len+1)
    of those from k on."""
    scored = [(s, i, u) for i, (s, u) in enumerate(zip(scores, units, strict=True)) if s > 0]
    first: dict[str, int] = {}
    for _, i, u in sorted(scored, key=lambda x: (-x[0], x[1])):
        first.setdefault(u, i)
    ranked = list(first.items())
    least: list[int] = []
    cheapest = 1 << 62
    for u, _ in reversed(ranked):
        cheapest = min(cheapest, len(u) + 1)
        least.append(cheapest)
    least.reverse()
    return ranked, least


def _error_units(units: Sequence[str]) -> list[int]:
    """The indexes of the units `_ERROR_PIECE` finds a match in, in order."""
    search = _ERROR_PIECE.search
    held = units_holding(units, _ERROR_NEEDLES)
    maybe = range(len(units)) if held is None else sorted(held)
    return [k for k in maybe if search(units[k])]


class Middle:
    """A stub middle prepared once for `parts` at any budget: its distinct units, their fact
    ranking, error flags, tokens and cover worths under one value map.

    Given `spans`, the units are those spans of `middle`, which may then be the whole text the
    middle was cut from (`scan` being that text's scan and `offset` 0): no unit is copied twice.
    `tokens` are each distinct unit's tokens; `contained`, filled by `pool.contain_all` and by
    pooling, each unit's tokens with the valued keys aligned in it (shared by every revaluation).
    """

    __slots__ = (
        "_at", "_chars", "_errors", "_first", "_least", "_ranked", "contained", "tokens",
        "units", "values",
    )  # fmt: skip

    def __init__(
        self,
        middle: str,
        values: Mapping[str, float],
        *,
        score: Score = fact_score,
        tokens: Tokens = toks,
        scan: TokenScan | None = None,
        offset: int = 0,
        spans: Sequence[tuple[int, int, bool]] | None = None,
    ) -> None:
        if spans is None:
            spans = unit_spans(middle)
        all_units = [middle[a:b] for a, b, _ in spans]
        last = {u: i for i, u in enumerate(all_units)}
        distinct = [all_units[i] for i in sorted(last.values())]
        # Tuples: a session keeps its middles, and the garbage collector stops walking a tuple
        # once it holds nothing it tracks.
        self.units: tuple[str, ...] = tuple(distinct)
        self.values = values
        self._at = {u: k for k, u in enumerate(distinct)}
        ranked, least = _ranked(all_units, scores_of(all_units, score))
        self._ranked, self._least = tuple(ranked), tuple(least)
        self._errors = tuple(_error_units(distinct))
        if scan is None:
            unit_tokens = token_sets(distinct, tokens)
        else:
            unit_tokens = _span_tokens(middle, spans, sorted(last.values()), scan, offset, tokens)
        self.tokens: tuple[AbstractSet[str], ...] = tuple(unit_tokens)
        self._chars = tuple(len(u) for u in distinct)
        self._first = tuple(first_worths(self.tokens, self._chars, values))
        self.contained: dict[int, AbstractSet[str]] = {}

    def revalued(self, values: Mapping[str, float]) -> Middle:
        """The same middle under another value map with the same keys in the same order (units,
        ranks, tokens and contained tokens shared): a later turn's values differ only by the
        result's distance and what the agent said since."""
        out = Middle.__new__(Middle)
        out.units, out._at, out._ranked, out._least = (
            self.units,
            self._at,
            self._ranked,
            self._least,
        )
        out._errors, out.tokens, out._chars = self._errors, self.tokens, self._chars
        out.contained = self.contained
        out.values = values
        out._first = tuple(first_worths(self.tokens, self._chars, values))
        return out

    def _picks(self, budget: int) -> tuple[list[str], int]:
        """`pick_fact_lines` under `budget`: the picked units in text order, and their chars."""
        picked: list[tuple[int, str]] = []
        used = 0
        least = self._least
        for k, (u, i) in enumerate(self._ranked):
            if used + least[k] > budget:  # nothing from here on fits
                break
            cost = len(u) + 1
            if used + cost <= budget:
                used += cost
                picked.append((i, u))
        picked.sort()
        return [u for _, u in picked], used

    def parts(self, budget: int) -> ValueParts:
        """`value_parts(middle, budget, values)`."""
        _, cap = self._picks(budget)
        at = self._at
        pre: list[int] = []
        used = 0
        for u in self._picks(cap // 3)[0]:
            if used + len(u) + 1 <= cap:
                pre.append(at[u])
                used += len(u) + 1
        chosen = set(pre)
        chars = self._chars
        for k in self._errors:
            if k not in chosen and used + chars[k] + 1 <= cap:
                pre.append(k)
                chosen.add(k)
                used += chars[k] + 1
        tokens = self.tokens
        covered: set[str] = set()
        for k in pre:
            covered |= tokens[k]
        rest = [k for k in range(len(self.units)) if k not in chosen]
        values = [self.values] * len(tokens)
        greedy = cover(tokens, chars, values, self._first, rest, covered, cap - used)
        return ValueParts(
            self.units, sorted(pre), greedy, rest, self.values, tokens, self.contained
        )


def value_parts(
    middle: str,
    budget: int,
    values: Mapping[str, float],
    *,
    score: Score = fact_score,
    tokens: Tokens = toks,
) -> ValueParts:
    """Choose a stub's lines by token value, never spending more than the regex selector."""
    return Middle(middle, values, score=score, tokens=tokens).parts(budget)
