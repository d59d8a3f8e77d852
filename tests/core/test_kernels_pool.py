"""The C kernels of pooling and of preparing a middle equal their Python definitions bit for bit:
the aligned-key scan (`align_scan`) and the scan-and-merge (`merge_found`) under
`KeyScanner.merged` (aligned keys merged into each unit's tokens, in the same set order), a
scanner's keys (`add_keys`) and `pool` as a whole, `_ranked`, and `_error_units` (the
regex decides non-ASCII units)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factrail.core import cover, keyscan, pool
from factrail.core.candidate_tokens import toks
from factrail.core.cover import ValueParts
from factrail.core.kernels import Kernels, use
from factrail.core.keyscan import KeyScanner

FEW = settings(max_examples=300, deadline=None)

_KEYS = ("mod_a.py", "src/mod_a.py", "a.py", "ab", "abc", "x1", "x12", "12", "é1", "éé", "ΣΣ",
         "a-b", "--", "..", "k_9", "v1.2", "1.2", "req-0042af", "deadbeef00", "Kx", "ab cd",
         "_", "²", "٣-")  # fmt: skip
"""Value keys: some inside others (`a.py` in `mod_a.py`), bare ones, non-ASCII, a space."""
_PIECES = (*_KEYS, " ", "/", ".", "x", "é", "-", "_", "1", "\t", "Σ", "\u212a", "build/")
"""What units are made of: the keys and the chars that touch them (aligned or not)."""
_OTHERS = tuple(f"t{i}" for i in range(24))
"""Tokens no key equals, so unit token sets come in many sizes."""

_MANY = tuple(f"key{i}" for i in range(40))
"""Keys enough for a unit to add many at once (their set order then turns on the merge order)."""

_unit = st.one_of(
    st.lists(st.sampled_from(_PIECES), max_size=7).map("".join),
    st.lists(st.sampled_from(_MANY + _KEYS), max_size=24).map(" ".join),
)


def _exact(x: Any) -> Any:
    """A comparable image of `x` that tells iteration order and float bits apart."""
    if isinstance(x, float):
        return ("f", x.hex())
    if isinstance(x, dict):
        return ("d", [(_exact(k), _exact(v)) for k, v in x.items()])
    if isinstance(x, set | frozenset | list | tuple):
        return (type(x).__name__, [_exact(v) for v in x])
    return x


def _same(native: ModuleType, call: Callable[[], Any]) -> Any:
    with use(Kernels()):
        py = call()
    with use(Kernels(native)):
        c = call()
    assert _exact(c) == _exact(py)
    return c


def _held(unit: str) -> st.SearchStrategy[frozenset[str] | set[str]]:
    """A unit's own tokens: its `toks`, or keys (often the ones it holds) and other tokens, as a
    frozenset or a mutable set."""
    near = [k for k in _KEYS + _MANY if k in unit] or list(_KEYS)
    some = st.lists(st.sampled_from(near)) | st.lists(st.sampled_from(_KEYS), max_size=6)
    mixed = st.tuples(some, st.lists(st.sampled_from(_OTHERS), max_size=20)).map(
        lambda p: p[0] + p[1]
    )
    # frozenset(list) grows as it adds, so its slots differ from those of a copy of it
    return st.one_of(st.just(frozenset(toks(unit))), mixed.map(frozenset), mixed.map(set))


_values = st.tuples(
    st.permutations(_KEYS + _MANY + _OTHERS[:4]), st.integers(0, 70), st.floats(0.0, 1.0)
).map(lambda p: {k: p[2] / (1 + r) for r, k in enumerate(p[0][: p[1]])})
"""Value maps with keys in any order (the order kept keys are merged in), often most keys."""


@FEW
@given(st.lists(_unit, max_size=8), st.sets(st.sampled_from(_KEYS)), _values, st.data())
def test_merged(
    native: ModuleType,
    units: list[str],
    keys: set[str],
    values: dict[str, float],
    data: st.DataObject,
) -> None:
    own = [data.draw(_held(u)) for u in units]
    scanner = KeyScanner(keys | values.keys())
    got = _same(native, lambda: scanner.merged(units, own, values))
    with use(Kernels()):
        py = keyscan.merged(own, scanner.found_each(units), values)
    assert got == py
    # a unit its found keys add nothing to keeps its frozenset itself, as `frozenset(held)` does
    assert [g is h for g, h in zip(got, own, strict=True)] == [
        p is h for p, h in zip(py, own, strict=True)
    ]
    # align_scan alone (merge_found off) merges the same
    with use(Kernels(native).without("merge_found")):
        assert _exact(scanner.merged(units, own, values)) == _exact(got)


@FEW
@given(st.lists(st.sampled_from((*_KEYS, "", "a\x00b", "\x00", " ", "é")), max_size=12))
def test_scanner_keys(native: ModuleType, keys: list[str]) -> None:
    def built() -> tuple[list[str], bool, list[tuple[int, str]]]:
        scanner = KeyScanner(iter(keys))
        auto = scanner._auto
        found = list(auto.iter(" ".join(keys))) if auto is not None else []
        return sorted(scanner._bare), scanner._joinable, found

    _same(native, built)


@FEW
@given(
    st.lists(
        st.tuples(st.lists(_unit, min_size=1, max_size=6), _values, st.booleans(), st.data()),
        max_size=4,
    ),
    st.lists(_unit, max_size=3),
    st.booleans(),
)
def test_pool(
    native: ModuleType,
    spec: list[tuple[list[str], dict[str, float], bool, st.DataObject]],
    side: list[str],
    contain: bool,
) -> None:
    parts = []
    for units, values, known, data in spec:
        n = len(units)
        rest = sorted(data.draw(st.sets(st.integers(0, n - 1))))
        greedy = [k for k in rest if data.draw(st.booleans())]
        pre = [k for k in range(n) if k not in rest]
        tokens = [data.draw(_held(u)) for u in units] if known else []
        parts.append(ValueParts(units, pre, greedy, rest, values, tokens))
    _same(native, lambda: pool.pool(parts, side, contain=contain))


def test_a_key_holding_the_join_char_scans_each_text(native: ModuleType) -> None:
    units = ["x a\x00b ab", "ab/mod_a.py"]
    own = [frozenset(), frozenset({"ab"})]
    values = {"mod_a.py": 0.5, "ab": 0.25, "a\x00b": 0.75}
    scanner = KeyScanner(values)
    with use(Kernels(native)):
        got = scanner.merged(units, own, values)
    assert got == [{"a\x00b", "ab"}, {"ab", "mod_a.py"}]


_ERROR_BITS = ("error", "ERROR", "eRRor", "erro", "r", "failed", "FAILED", "fail", "ed",
               "exception", "EXCEPTION", "exceptio", "n", "traceback", "TraceBack", "tracebac",
               "k", "denied", "DENIED", "denie", "d", "not found", "NOT FOUND", "not  found",
               "notfound", "not ", "found", "timed out", "TIMED OUT", "timed  out", "timedout",
               "timed ", "out", "fatal", "FATAL", "fata", "l", "panic", "Panic", "pani", "c",
               "\u212a", "\u017f", "\u0130", "\u0131", "é", "e", "t", " ", "\t",
               "x", "_", "1", "\n")  # fmt: skip
"""Error pieces in any case, cut short or split, and non-ASCII case twins (the Kelvin sign)."""


@FEW
@given(st.lists(st.lists(st.sampled_from(_ERROR_BITS), max_size=6).map("".join), max_size=10))
def test_error_units(native: ModuleType, units: list[str]) -> None:
    got = _same(native, lambda: cover._error_units(units))
    assert got == [k for k, u in enumerate(units) if cover._ERROR_PIECE.search(u)]


def test_error_units_of_known_units(native: ModuleType) -> None:
    units = ["ok", "Permission DENIED", "tracebac\u212a", "é timed out", "TimedOut", "xErrorx",
             "fatal: not a git repository", "goroutine 1 [running]: PANIC", "fata l"]  # fmt: skip
    assert native.error_units(units, cover._ERROR_PIECE.search) == [1, 2, 3, 5, 6, 7]


_UNITS = ("ok", "a", "bb", "error: 404", "x" * 12, "é", "")


@FEW
@given(
    st.lists(
        st.tuples(st.sampled_from(_UNITS), st.integers(-2, 4) | st.sampled_from([2**62, -(2**70)])),
        max_size=24,
    )
)
def test_ranked(native: ModuleType, spec: list[tuple[str, int]]) -> None:
    units = [u for u, _ in spec]
    scores = [s for _, s in spec]
    _same(native, lambda: cover._ranked(units, scores))


def test_bad_types_raise_type_error(native: ModuleType) -> None:
    calls: list[Callable[[], object]] = [
        lambda: native.error_units(["ok", 1], cover._ERROR_PIECE.search),
        lambda: native.align_scan(iter([(0, 1)]), "x", [1], [set()], set()),
        lambda: native.align_scan(iter([]), "x", (1,), [set()], set()),
        lambda: native.align_scan(iter([]), b"x", [1], [set()], set()),
        lambda: native.rank_units(["a"], ["1"]),
        lambda: native.merge_found(iter([(0, 1)]), "x", [1], set(), [frozenset()], {}),
        lambda: native.merge_found(iter([]), "x", (1,), set(), [frozenset()], {}),
        lambda: native.merge_found(iter([]), b"x", [1], set(), [frozenset()], {}),
        lambda: native.add_keys(["a", 1], lambda k, v: None),
    ]
    for call in calls:
        with pytest.raises(TypeError):
            call()
