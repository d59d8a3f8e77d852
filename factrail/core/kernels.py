"""The optional C kernels of the engine's per-item loops: the one place that decides.

`native` is the extension `factrail.core._speedups` (`_speedups.c`), or None when it was not
built or `FACTRAIL_PURE_PYTHON=1` (read once, at import); every kernel is output-identical to
the Python it stands in for, which stays the definition and the fallback. `summing` is `native`
for the kernels that sum floats (cover worths) only where the C adds as `sum()` does: CPython
3.11 adds floats left to right, 3.12 made `sum()` compensated, so there those stay in Python.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Protocol, cast


class Scan(Protocol):
    """The fields of a `facts.TokenScan` the kernels read."""

    @property
    def digit_starts(self) -> tuple[int, ...]: ...
    @property
    def digit_found(self) -> tuple[str, ...]: ...
    @property
    def word_starts(self) -> tuple[int, ...]: ...
    @property
    def word_found(self) -> tuple[str, ...]: ...


class Native(Protocol):
    """The functions of `factrail.core._speedups` (arguments positional only)."""

    def token_scan(
        self, text: str, /
    ) -> tuple[
        dict[str, tuple[int, int]],
        tuple[int, ...],
        tuple[str, ...],
        tuple[int, ...],
        tuple[str, ...],
    ]: ...
    def toks(self, s: str, /) -> set[str]: ...
    def toks_each(self, units: Sequence[str], /) -> list[frozenset[str]]: ...
    def between(self, scan: Scan, start: int, end: int, /) -> frozenset[str]: ...
    def span_tokens(
        self,
        middle: str,
        spans: Sequence[tuple[int, int, bool]],
        chosen: Iterable[int],
        scan: Scan,
        offset: int,
        tokens: Callable[[str], AbstractSet[str]],
        /,
    ) -> list[AbstractSet[str]]: ...
    def first_worth(
        self, tokens: AbstractSet[str], chars: int, values: Mapping[str, float], /
    ) -> float: ...
    def first_worths(
        self,
        tokens: Sequence[AbstractSet[str]],
        chars: Sequence[int],
        values: Mapping[str, float],
        /,
    ) -> list[float]: ...
    def cover(
        self,
        tokens: Sequence[AbstractSet[str]],
        chars: Sequence[int],
        values: Sequence[Mapping[str, float]],
        first: Sequence[float],
        among: Iterable[int],
        covered: AbstractSet[str],
        room: int,
        /,
    ) -> list[int]: ...
    def own(self, token: str, weights: tuple[float, ...], /) -> float: ...
    def token_values(
        self,
        wanted: Iterable[str],
        memo: dict[str, float],
        seen: Mapping[str, tuple[int, int]],
        inp: str | AbstractSet[str],
        user: str | AbstractSet[str],
        reused: AbstractSet[str],
        size: int,
        dist: float,
        whole: float,
        weights: tuple[float, ...],
        z0: float,
        /,
    ) -> dict[str, float]: ...
    def merge_found(
        self,
        found: Iterator[tuple[int, str]],
        joined: str,
        ends: list[int],
        bare: AbstractSet[str],
        own: Sequence[AbstractSet[str]],
        values: Mapping[str, float],
        /,
    ) -> list[AbstractSet[str]]: ...
    def error_units(
        self, units: Sequence[str], search: Callable[[str], object], /
    ) -> list[int]: ...
    def rank_units(
        self, units: Sequence[str], scores: Sequence[int], /
    ) -> tuple[list[tuple[str, int]], list[int]] | None: ...
    def add_keys(
        self, keys: Iterable[str], add_word: Callable[[str, str], object], /
    ) -> tuple[set[str], bool]: ...
    def fact_score(self, unit: str, /) -> int: ...
    def fact_scores(self, units: Sequence[str], /) -> list[int]: ...
    def fact_tokens(
        self,
        text: str,
        findall: Callable[[str], list[str]],
        is_mark: Callable[[str], bool] | None = None,
        /,
    ) -> set[str]: ...
    def estimate_tokens(self, text: str, /) -> int: ...
    def unit_spans(self, text: str, /) -> list[tuple[int, int, bool]]: ...
    def anchors_in(self, text: str, anchors: tuple[str, ...], /) -> set[str]: ...
    def fold_digits(self, text: str, /) -> str: ...
    def align_scan(
        self,
        found: Iterator[tuple[int, str]],
        joined: str,
        ends: list[int],
        outs: list[set[str]],
        bare: AbstractSet[str],
        /,
    ) -> None: ...


def _load() -> Native | None:
    if os.environ.get("FACTRAIL_PURE_PYTHON") == "1":
        return None
    try:
        return cast(Native, importlib.import_module("factrail.core._speedups"))
    except ImportError:
        return None


native = _load()
summing = native if sys.version_info < (3, 12) else None
