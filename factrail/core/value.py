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
import operator
import re
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import accumulate, count

from ahocorasick import Automaton

from factrail.core.facts import (
    Score,
    Tokens,
    TokenScan,
    fact_score,
    scores_of,
    token_occurrences,
    token_scan,
    token_sets,
    toks,
    unit_spans,
    units_holding,
)
from factrail.core.kernels import active
from factrail.core.model import Message, input_json

_K = active()

INTERCEPT = -2.884622
MU = (0.400888, 0.240747, 0.240281, 0.016752, 2.832681, 0.13081, 0.871874, 0.004401, 0.007997,
      3.024303, 0.478259, 9.281838, 0.050729)  # fmt: skip
SD = (0.490078, 0.427537, 0.427254, 0.128343, 0.642327, 0.239112, 0.385938, 0.066197, 0.089067,
      0.954716, 0.292466, 1.062772, 0.219443)  # fmt: skip
BETA = (-0.227483, 0.122111, -0.003107, 0.097325, -0.170036, -0.058623, 0.360508, 0.183316,
        0.152196, -0.008517, -0.118614, -0.332467, 0.520239)  # fmt: skip
_W = tuple(b / s for b, s in zip(BETA, SD, strict=True))
_Z0 = INTERCEPT - sum(w * m for w, m in zip(_W, MU, strict=True))

_HEX_CHARS = "0123456789abcdefABCDEF"
_ERROR_PIECE = re.compile(
    r"error|failed|fatal|panic|exception|traceback|denied|not found|timed out", re.I
)
_ERROR_NEEDLES = (b"error", b"failed", b"fatal", b"panic", b"exception", b"traceback", b"denied",
                  b"not found", b"timed out")  # fmt: skip
_DIGITS = frozenset("0123456789")
_EPS = 1e-12


@dataclass(frozen=True, slots=True)
class ValueContext:
    """What the agent saw around one result: its call's input, the user prompt, reuse."""

    input: str
    user: str
    dist: int
    reused: frozenset[str]
    quoted: frozenset[str] = frozenset()
    """The tokens this result was the first to show (outside its call's input) that the agent
    has since written: the facts it drew from this output."""


def message_contexts(
    messages: Sequence[Message],
    tokens: Tokens = toks,
    text_tokens: Callable[[str], Collection[str]] | None = None,
) -> dict[str, ValueContext]:
    """The value context of every result, by tool_use_id (a later duplicate wins).

    `text_tokens(text)` is `toks(text)` of a whole output, from a memo the caller keeps anyway
    (its token scans): with the C kernels, scanning each output once beats finding what the
    agent said in them with an Aho–Corasick pass (pyahocorasick walks non-ASCII text slowly).
    """
    outs: list[tuple[int, str, str, str]] = []  # (event index, id, text, last input)
    spoken: list[tuple[int, str]] = []  # assistant texts and inputs, by event index
    own_input: dict[str, str] = {}  # each call's own input, by tool_use_id
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
                last_input = own_input[u.tool_use_id] = input_json(u)
                spoken.append((n, last_input))
                n += 1
    said = sum(len(text) for _, text in spoken)
    if said <= sum(len(text) for _, _, text, _ in outs):
        # Tokenise what the agent said; find those tokens in the (larger) outputs.
        last_said: dict[str, int] = {}
        for i, text in spoken:
            for t in tokens(text):
                last_said[t] = i
        if text_tokens is not None and _K.token_scan is not None:  # scans are cheap
            intro = _first_holding(((i, text) for i, _, text, _ in outs), last_said, text_tokens)
        else:
            intro = _first_held(((i, text) for i, _, text, _ in outs), last_said.keys(), tokens)
    else:
        # Tokenise the outputs; find those tokens in what the agent said (a write's input may
        # be a whole file), newest first: the first found is the last said.
        intro = {}
        for i, _, text, _ in outs:
            for t in tokens(text):
                intro.setdefault(t, i)
        last_said = _first_held(reversed(spoken), intro.keys(), tokens)
    reused = frozenset(t for t, i in intro.items() if t in last_said and i < last_said[t])
    by_output: dict[int, list[str]] = {}
    for t in reused:
        by_output.setdefault(intro[t], []).append(t)
    total = len(outs)
    return {
        rid: ValueContext(
            input=inp,
            user=user,
            dist=total - k,
            reused=reused,
            quoted=frozenset(t for t in by_output.get(i, ()) if t not in own_input.get(rid, inp)),
        )
        for k, (i, rid, _, inp) in enumerate(outs)
    }


def _first_holding(
    texts: Iterable[tuple[int, str]],
    wanted: Iterable[str],
    text_tokens: Callable[[str], Collection[str]],
) -> dict[str, int]:
    """`_first_held` from each text's own tokens (no token spans a newline, so a text holds a
    token as a token on some line exactly when the token is one of the text's)."""
    out: dict[str, int] = {}
    left = set(wanted)
    for i, text in texts:
        if not left:
            break
        held = text_tokens(text)
        if len(held) < len(left):
            found = [t for t in held if t in left]
        else:
            found = [t for t in left if t in held]
        for t in found:
            out[t] = i
        left.difference_update(found)
    return out


def _first_held(
    texts: Iterable[tuple[int, str]], wanted: Iterable[str], tokens: Tokens
) -> dict[str, int]:
    """The index of the first of `texts` (`(index, text)` in order) holding each `wanted` token
    as a token.

    One Aho–Corasick pass finds where a wanted token occurs at all; only the lines it occurs on
    are tokenised (no token spans a newline, so a text's tokens are its lines' tokens).
    """
    auto = Automaton()
    for t in wanted:
        auto.add_word(t, t)
    out: dict[str, int] = {}
    if not len(auto):
        return out
    auto.make_automaton()
    for i, text in texts:
        lines: dict[int, AbstractSet[str]] = {}
        for last, t in auto.iter(text):
            if t in out:
                continue
            start = text.rfind("\n", 0, last) + 1
            held = lines.get(start)
            if held is None:
                end = text.find("\n", last)
                held = lines[start] = tokens(text[start : len(text) if end < 0 else end])
            if t in held:
                out[t] = i
    return out


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


_W0, _W1, _W2, _W3, _W4, _W5, _W6, _W7, _W8, _W9, _W10, _W11, _W12 = _W


def _own(t: str) -> float:
    """The first six terms of a token's linear score: the ones that depend on the token alone.

    String methods stand in for the feature regexes: a file extension is `\\.[A-Za-z]{1,5}\\Z`
    (only the last dot can start one), a hex id is `[0-9a-fA-F]{8,}` from start to end.
    """
    n = len(t)
    raw = t.encode("utf-8", "surrogatepass")  # no multi-byte char holds an ASCII digit
    digits = len(raw) - len(raw.translate(None, b"0123456789"))
    dot = t.rfind(".")
    ext = t[dot + 1 :] if dot >= 0 else ""
    return (
        0
        + _W0 * (1.0 if digits else 0.0)
        + _W1 * (1.0 if ("/" in t or "\\" in t) else 0.0)
        + _W2 * (1.0 if 0 < len(ext) <= 5 and ext.isascii() and ext.isalpha() else 0.0)
        + _W3 * (1.0 if n >= 8 and not t.strip(_HEX_CHARS) else 0.0)
        + _W4 * math.log(n)
        + _W5 * (digits / n)
    )


def token_values(
    text: str,
    ctx: ValueContext,
    tokens: Iterable[str] | None = None,
    own: dict[str, float] | None = None,
    seen: Mapping[str, tuple[int, int]] | None = None,
    find: Callable[[str], AbstractSet[str] | str] | None = None,
) -> dict[str, float]:
    """The value of each candidate token of the full result `text` (or of the given tokens).

    `own` memoises the token-only terms across calls (the sum keeps its left-to-right order,
    so every value is the same float); `seen` is `token_occurrences(text)` when known; `find`
    gives, for the input and the user text, what candidate tokens can be looked up in with
    the same answers as in the text itself (`token_substrings`).
    """
    size = max(len(text), 1)
    if seen is None:
        seen = token_occurrences(text)
    wanted = toks(text) if tokens is None else tokens
    memo: dict[str, float] = {} if own is None else own
    dist = _W9 * math.log1p(ctx.dist)
    whole = _W11 * math.log(size)
    inp: AbstractSet[str] | str = ctx.input
    user: AbstractSet[str] | str = ctx.user
    reused = ctx.reused
    if find is not None:
        inp, user = find(ctx.input), find(ctx.user)
    if (kernel := _K.token_values) is not None:
        return kernel(wanted, memo, seen, inp, user, reused, size, dist, whole, _W, _Z0)
    log1p, exp = math.log1p, math.exp
    out: dict[str, float] = {}
    for t in wanted:
        head = memo.get(t)
        if head is None:
            head = memo[t] = _own(t)
        count, first = seen.get(t, (1, 0))
        z = _Z0 + (
            head
            + _W6 * log1p(count)
            + _W7 * (1.0 if t in inp else 0.0)
            + _W8 * (1.0 if t in user else 0.0)
            + dist
            + _W10 * (first / size)
            + whole
            + _W12 * (1.0 if t in reused else 0.0)
        )
        out[t] = 1.0 / (1.0 + exp(-z))
    return out


@dataclass(frozen=True, slots=True)
class Candidate:
    """One unit a cover may pick: its tokens, its size and the value map that scores it."""

    tokens: frozenset[str]
    chars: int
    values: Mapping[str, float]


def _cover(
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


def _first_worths(
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
    return _cover(tokens, chars, values, first, range(len(candidates)), covered, room)


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
    if (kernel := _K.rank_units) is not None:
        got = kernel(units, scores)
        if got is not None:
            return got
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
    if (kernel := _K.error_units) is not None:
        return kernel(units, search)
    held = units_holding(units, _ERROR_NEEDLES)
    maybe = range(len(units)) if held is None else sorted(held)
    return [k for k in maybe if search(units[k])]


class Middle:
    """A stub middle prepared once for `parts` at any budget: its distinct units, their fact
    ranking, error flags, tokens and cover worths under one value map.

    Given `spans`, the units are those spans of `middle`, which may then be the whole text the
    middle was cut from (`scan` being that text's scan and `offset` 0): no unit is copied twice.
    """

    __slots__ = (
        "_at", "_chars", "_contained", "_errors", "_first", "_least", "_ranked", "_tokens",
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
        self._tokens: tuple[AbstractSet[str], ...] = tuple(unit_tokens)
        self._chars = tuple(len(u) for u in distinct)
        self._first = tuple(_first_worths(self._tokens, self._chars, values))
        self._contained: dict[int, AbstractSet[str]] = {}

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
        out._errors, out._tokens, out._chars = self._errors, self._tokens, self._chars
        out._contained = self._contained
        out.values = values
        out._first = tuple(_first_worths(self._tokens, self._chars, values))
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
        tokens = self._tokens
        covered: set[str] = set()
        for k in pre:
            covered |= tokens[k]
        rest = [k for k in range(len(self.units)) if k not in chosen]
        values = [self.values] * len(tokens)
        greedy = _cover(tokens, chars, values, self._first, rest, covered, cap - used)
        return ValueParts(
            self.units, sorted(pre), greedy, rest, self.values, tokens, self._contained
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


_ALNUM = re.compile(r"[^\W_]+")
_SEP = "\x00"


class KeyScanner:
    """Finds which keys occur *aligned* in a text (no alphanumeric char touching the occurrence
    on either side), for every key with an alphanumeric char: one Aho–Corasick pass per text
    over all keys at once, then an alignment check per occurrence."""

    __slots__ = ("_auto", "_bare", "_joinable")

    def __init__(self, keys: Iterable[str]) -> None:
        auto = Automaton()
        self._bare: set[str]
        """Keys with no alphanumeric char: never aligned, but `held` may find them as tokens."""
        if (kernel := _K.add_keys) is not None:
            self._bare, joinable = kernel(keys, auto.add_word)
        else:
            self._bare = set()
            joinable = True
            for k in keys:
                if not k:
                    continue
                auto.add_word(k, k)
                joinable = joinable and _SEP not in k
                if _ALNUM.search(k) is None:
                    self._bare.add(k)
        self._auto: Automaton | None = None
        if len(auto):
            auto.make_automaton()
            self._auto = auto
        self._joinable = joinable

    def found(self, text: str) -> set[str]:
        """The keys aligned in `text`."""
        return self.found_each([text])[0]

    def found_each(self, texts: Sequence[str]) -> list[set[str]]:
        """`found` of every text; one scan of the texts joined by NUL when no key holds one (NUL
        is not alphanumeric, so alignment at a join is alignment at a text's edge)."""
        outs: list[set[str]] = [set() for _ in texts]
        auto = self._auto
        if auto is None or not texts:
            return outs
        if not self._joinable:
            for out, text in zip(outs, texts, strict=True):
                self._scan(text, [len(text)], [out])
            return outs
        self._scan(_SEP.join(texts), _ends(texts), outs)
        return outs

    def merged(
        self, texts: Sequence[str], own: Sequence[AbstractSet[str]], values: Mapping[str, float]
    ) -> list[AbstractSet[str]]:
        """`own` with the valued keys aligned in each text merged in (`_merged`); the C kernel
        scans and merges in one pass, so a text's found keys never become a set of their own."""
        auto = self._auto
        kernel = _K.merge_found
        if kernel is None or auto is None or not self._joinable or not texts:
            return _merged(own, self.found_each(texts), values)
        joined = _SEP.join(texts)
        return kernel(auto.iter(joined), joined, _ends(texts), self._bare, own, values)

    def _scan(self, joined: str, ends: list[int], outs: list[set[str]]) -> None:
        """Add each aligned occurrence in `joined` to the set of the text it lies in (text `i`
        ends before offset `ends[i]`)."""
        assert self._auto is not None
        if (kernel := _K.align_scan) is not None:
            kernel(self._auto.iter(joined), joined, ends, outs, self._bare)
            return
        n = len(joined)
        bare = self._bare
        i = 0
        limit = ends[0]
        out = outs[0]
        for last, key in self._auto.iter(joined):
            while last >= limit:
                i += 1
                limit, out = ends[i], outs[i]
            if key in out or (bare and key in bare):
                continue
            start = last - len(key) + 1
            if (start == 0 or not joined[start - 1].isalnum()) and (
                last + 1 == n or not joined[last + 1].isalnum()
            ):
                out.add(key)

    def held(self, texts: Sequence[str], tokens: Tokens, *, aligned: bool) -> set[str]:
        """The keys some text holds as a token (`tokens`), or, with `aligned`, as `found` does.

        Only the lines where a key occurs unaligned are tokenised: no token holds a newline, so
        a text's tokens are those of its lines.
        """
        out: set[str] = set()
        auto = self._auto
        if auto is None:
            return out
        bare = self._bare
        for text in texts:
            n = len(text)
            lines: dict[int, AbstractSet[str]] = {}
            for last, key in auto.iter(text):
                if key in out:
                    continue
                start = last - len(key) + 1
                if (
                    aligned
                    and (start == 0 or not text[start - 1].isalnum())
                    and (last + 1 == n or not text[last + 1].isalnum())
                    and not (bare and key in bare)
                ):
                    out.add(key)
                    continue
                if "\n" in key:
                    continue
                begin = text.rfind("\n", 0, start) + 1
                got = lines.get(begin)
                if got is None:
                    end = text.find("\n", last + 1)
                    got = lines[begin] = tokens(text[begin : n if end < 0 else end])
                if key in got:
                    out.add(key)
        return out


def _ends(texts: Sequence[str]) -> list[int]:
    """Where each of `texts` ends in `_SEP.join(texts)`: its length and those before it, plus
    one separator per text before it."""
    return list(map(operator.add, accumulate(map(len, texts)), count()))


def _merged(
    own: Sequence[AbstractSet[str]],
    extra: Sequence[AbstractSet[str]] | None,
    values: Mapping[str, float],
) -> list[AbstractSet[str]]:
    """Each unit's tokens (`own`) with the valued keys found aligned in it (`extra`) added, in
    the value map's order (as `set.intersection` adds them): the tokens a pooled candidate
    covers when containment counts."""
    valued = values.keys()
    rank: dict[str, int] | None = None
    out: list[AbstractSet[str]] = []
    for j, held in enumerate(own):
        unit_tokens = frozenset(held)
        found = extra[j] if extra is not None else None
        if found and not found <= unit_tokens:  # else the union changes nothing
            kept = [t for t in found if t in valued]
            if not unit_tokens.issuperset(kept):
                if len(kept) > 1:
                    rank = rank or {t: r for r, t in enumerate(valued)}
                    kept.sort(key=rank.__getitem__)
                unit_tokens |= set(kept)
        out.append(unit_tokens)
    return out


def _contained(
    index: KeyScanner,
    values: Mapping[str, float],
    cache: dict[int, AbstractSet[str]] | None,
    at: Sequence[int],
    rest: Sequence[str],
    own: Sequence[AbstractSet[str]],
) -> list[AbstractSet[str]]:
    """`index.merged(rest, own, values)` for the units `rest` (indexes `at` of their middle),
    taking what `cache` holds already and keeping there what it did not: a unit's merge is its
    own (the aligned keys of `values` in it, whatever other keys `index` holds)."""
    if cache is None:
        return index.merged(rest, own, values)
    missing = [j for j, k in enumerate(at) if k not in cache] if cache else range(len(at))
    if len(missing) == len(at):  # a cold middle: no sub-lists to build
        cache.update(zip(at, index.merged(rest, own, values), strict=True))
    elif missing:
        found = index.merged([rest[j] for j in missing], [own[j] for j in missing], values)
        cache.update(zip((at[j] for j in missing), found, strict=True))
    return [cache[k] for k in at]


def contain_all(middle: Middle, values: Mapping[str, float]) -> None:
    """Fill `middle`'s contained tokens for every unit, under a value map holding the keys its
    parts' maps will hold, in their order (a background preparation, ahead of `pool`)."""
    if len(middle._contained) < len(middle.units):
        every = range(len(middle.units))
        index = KeyScanner(values)
        _contained(index, values, middle._contained, every, middle.units, middle._tokens)


def pool(
    parts: Sequence[ValueParts],
    side: Sequence[str],
    *,
    contain: bool = True,
    tokens: Tokens = toks,
) -> list[list[int]]:
    """Re-plan every stub's greedy picks under one budget; the pooled picks per stub."""
    # Only keys of the value maps can change a worth: the side covers those it holds as a token
    # or, counting containment, aligned anywhere (the side joined as the reference joins it).
    keys = KeyScanner({k for p in parts for k in p.values})
    covered = keys.held([_SEP.join(side)], tokens, aligned=contain)
    index = keys if contain else None
    room = sum(p.spend() for p in parts)
    cand_tokens: list[AbstractSet[str]] = []
    chars: list[int] = []
    values: list[Mapping[str, float]] = []
    first: list[float] = []
    starts: list[int] = []  # where each part's candidates start
    for p in parts:
        starts.append(len(chars))
        rest = list(map(p.units.__getitem__, p.rest))
        own = list(map(p.tokens.__getitem__, p.rest)) if p.tokens else token_sets(rest, tokens)
        if index is None:
            part_tokens = _merged(own, None, p.values)
        else:
            part_tokens = _contained(index, p.values, p.contained, p.rest, rest, own)
        part_chars = list(map(len, rest))
        first += _first_worths(part_tokens, part_chars, p.values)
        cand_tokens += part_tokens
        chars += part_chars
        values += [p.values] * len(rest)
    picks: list[list[int]] = [[] for _ in parts]
    for j in _cover(cand_tokens, chars, values, first, range(len(chars)), covered, room):
        n = bisect_right(starts, j) - 1
        picks[n].append(parts[n].rest[j - starts[n]])
    return picks
