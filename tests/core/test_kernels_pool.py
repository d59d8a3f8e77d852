"""`pool` as a whole equals its Python definition bit for bit under the C kernels it runs
(`first_worths` and `cover`): the same picks, from the same worths."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from factrail.core import pool
from factrail.core.candidate_tokens import toks
from factrail.core.cover import ValueParts
from factrail.core.kernels import Kernels, use

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
