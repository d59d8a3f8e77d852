"""Pooling: every value-chosen stub's greedy lines re-planned under one shared budget, so a
token kept anywhere (another stub, a result kept whole) counts once."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from factrail.core.candidate_tokens import Tokens, token_sets, toks
from factrail.core.cover import Middle, ValueParts, cover, first_worths
from factrail.core.keyscan import SEP, KeyScanner, contained, merged


def contain_all(middle: Middle, values: Mapping[str, float]) -> None:
    """Fill `middle`'s contained tokens for every unit, under a value map holding the keys its
    parts' maps will hold, in their order (a background preparation, ahead of `pool`)."""
    if len(middle.contained) < len(middle.units):
        every = range(len(middle.units))
        index = KeyScanner(values)
        contained(index, values, middle.contained, every, middle.units, middle.tokens)


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
    covered = keys.held([SEP.join(side)], tokens, aligned=contain)
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
            part_tokens = merged(own, None, p.values)
        else:
            part_tokens = contained(index, p.values, p.contained, p.rest, rest, own)
        part_chars = list(map(len, rest))
        first += first_worths(part_tokens, part_chars, p.values)
        cand_tokens += part_tokens
        chars += part_chars
        values += [p.values] * len(rest)
    picks: list[list[int]] = [[] for _ in parts]
    for j in cover(cand_tokens, chars, values, first, range(len(chars)), covered, room):
        n = bisect_right(starts, j) - 1
        picks[n].append(parts[n].rest[j - starts[n]])
    return picks
