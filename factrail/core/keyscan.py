"""Which keys of a value map occur aligned in texts: one Aho–Corasick pass over all keys.

A key occurs *aligned* when no alphanumeric char touches the occurrence on either side. Pooling
counts a key aligned in a unit as covered by that unit (a unit holding `abc123` in `x=abc123;`
keeps it even where the tokenizer cuts it otherwise).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import accumulate, count

from ahocorasick import Automaton

from factrail.core.candidate_tokens import Tokens

_ALNUM = re.compile(r"[^\W_]+")
SEP = "\x00"


class KeyScanner:
    """Finds which keys occur *aligned* in a text (no alphanumeric char touching the occurrence
    on either side), for every key with an alphanumeric char: one Aho–Corasick pass per text
    over all keys at once, then an alignment check per occurrence."""

    __slots__ = ("_auto", "_bare", "_joinable")

    def __init__(self, keys: Iterable[str]) -> None:
        auto = Automaton()
        self._bare: set[str]
        """Keys with no alphanumeric char: never aligned, but `held` may find them as tokens."""
        self._bare = set()
        joinable = True
        for k in keys:
            if not k:
                continue
            auto.add_word(k, k)
            joinable = joinable and SEP not in k
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
        self._scan(SEP.join(texts), ends(texts), outs)
        return outs

    def merged(
        self, texts: Sequence[str], own: Sequence[AbstractSet[str]], values: Mapping[str, float]
    ) -> list[AbstractSet[str]]:
        """`own` with the valued keys aligned in each text merged in (`merged`)."""
        return merged(own, self.found_each(texts), values)

    def _scan(self, joined: str, ends: list[int], outs: list[set[str]]) -> None:
        """Add each aligned occurrence in `joined` to the set of the text it lies in (text `i`
        ends before offset `ends[i]`)."""
        assert self._auto is not None
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


def ends(texts: Sequence[str]) -> list[int]:
    """Where each of `texts` ends in `SEP.join(texts)`: its length and those before it, plus
    one separator per text before it."""
    return list(map(operator.add, accumulate(map(len, texts)), count()))


def merged(
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


def contained(
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
