"""The optional C kernels (`factrail.core._speedups`) equal the Python they stand in for, bit for
bit: same sets in the same iteration order, same dict order, same floats, same picks."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factrail.core import cover, kernels, value
from factrail.core.candidate_tokens import TokenScan, token_scan, toks
from factrail.core.kernels import Kernels, use
from factrail.core.units import unit_spans

FEW = settings(max_examples=60, deadline=None)

_ALPHABET = "abcdefXYZ_0189.:,/@#-\\ \n\té\u0416\u0130\u212a\U0001f600\U0001d7d8"
"""ASCII token chars and breaks, plus 1-, 2- and 4-byte kinds (a case twin, a non-ASCII digit)."""
_PIECES = ("build/app_v2.bin", "req-0042af", "src/mod_a.py:", "v1.2.3,", "deadbeef00",
           "a" * 30, "9" * 12, "x.y.z.", "path/to/x_y", "ab/cd", "__init__.py", "7f3a9c1...",
           "user@host:22", "word_with_under", "ÉTÉ/été_x", "\\n", "x" * 230)  # fmt: skip

texts = st.lists(
    st.one_of(st.text(_ALPHABET, max_size=14), st.sampled_from(_PIECES)), max_size=24
).map("".join)


def _both(native: ModuleType, call: Callable[[], Any]) -> tuple[Any, Any]:
    """`call()` under the Python definitions, then under the C kernels."""
    with use(Kernels()):
        py = call()
    with use(Kernels(native)):
        c = call()
    return py, c


def _exact(x: Any) -> Any:
    """A comparable image of `x` that tells iteration order and float bits apart."""
    if isinstance(x, float):
        return ("f", x.hex())
    if isinstance(x, dict):
        return ("d", [(_exact(k), _exact(v)) for k, v in x.items()])
    if isinstance(x, set | frozenset):
        return (type(x).__name__, [_exact(v) for v in x])
    if isinstance(x, list | tuple):
        return (type(x).__name__, [_exact(v) for v in x])
    if isinstance(x, TokenScan):
        fields = (x.digit_starts, x.digit_found, x.word_starts, x.word_found)
        return ("scan", _exact(x.occurrences), *fields)
    return x


def _same(native: ModuleType, call: Callable[[], Any]) -> Any:
    py, c = _both(native, call)
    assert _exact(c) == _exact(py)
    return c


@FEW
@given(texts)
def test_token_scan(native: ModuleType, text: str) -> None:
    _same(native, lambda: token_scan(text))


def test_token_scan_keeps_what_the_regexes_keep(native: ModuleType) -> None:
    text = "id req-0042af, at src/mod_a.py: and v1.2.3, then req-0042af again ab12:: x"
    scan = _same(native, lambda: token_scan(text))
    assert list(scan.occurrences.items()) == [
        ("req-0042af", (2, 3)),
        ("v1.2.3", (1, 36)),
        ("src/mod_a.py", (1, 18)),
    ]
    assert (scan.digit_starts, scan.word_starts) == ((3, 36, 49), (18,))
    assert set(scan.occurrences) == toks(text) == {"req-0042af", "v1.2.3", "src/mod_a.py"}


@FEW
@given(texts, texts, st.data())
def test_span_tokens(native: ModuleType, before: str, middle: str, data: st.DataObject) -> None:
    whole = f"{before}\n{middle}"
    offset = len(before) + 1
    spans = unit_spans(middle)
    chosen = sorted(data.draw(st.sets(st.integers(0, len(spans) - 1)))) if spans else []
    scan = token_scan(whole)
    _same(native, lambda: cover._span_tokens(middle, spans, chosen, scan, offset, toks))


_TOKENS = [f"t{i}" for i in range(10)]
worths = st.floats(0.0, 1.0, allow_nan=False) | st.sampled_from([0.0, 0.25, 0.5, 1.0])


@FEW
@given(
    st.lists(
        st.tuples(st.frozensets(st.sampled_from(_TOKENS), max_size=5), st.integers(0, 40)),
        max_size=12,
    ),
    st.dictionaries(st.sampled_from(_TOKENS), worths),
    st.sets(st.sampled_from(_TOKENS), max_size=3),
    st.integers(-5, 200),
)
def test_cover_and_worths(
    native: ModuleType,
    spec: list[tuple[frozenset[str], int]],
    values: dict[str, float],
    covered: set[str],
    room: int,
) -> None:
    tokens = [t for t, _ in spec]
    chars = [c for _, c in spec]
    first = _same(native, lambda: cover.first_worths(tokens, chars, values))
    among = range(0, len(spec), 1)
    maps = [values] * len(spec)
    _same(native, lambda: cover.cover(tokens, chars, maps, first, among, covered, room))


_ANY_SIZE = st.floats(allow_nan=False) | st.sampled_from([1.0, 1e-16, -1e-16, 1e16, -0.0])


@FEW
@given(st.lists(_ANY_SIZE, min_size=1, max_size=40))
def test_worths_add_as_sum_does(native: ModuleType, xs: list[float]) -> None:
    """The kernels add floats as `sum()` does on the interpreter they were built for: left to
    right on 3.11, with Neumaier's compensation from 3.12 on (1.0 + 1e-16 + 1e-16 is 1.0 on the
    first, 1.0000000000000002 on the second)."""
    names = [f"t{i}" for i in range(len(xs))]
    values = dict(zip(names, xs, strict=True))
    for tokens in ([frozenset(names)], [frozenset(names[:3])]):
        got = _same(native, lambda: cover.first_worths(tokens, [0], values))  # noqa: B023
        assert got[0].hex() == sum(values[t] for t in tokens[0]).hex()
    tiny = {"a": 1.0, "b": 1e-16, "c": 1e-16}
    got = _same(native, lambda: cover.first_worths([frozenset(tiny)], [0], tiny))
    assert got == [sum(tiny[t] for t in frozenset(tiny))]


def test_bad_types_raise_type_error(native: ModuleType) -> None:
    calls: list[Callable[[], object]] = [
        lambda: native.token_scan(None),
        lambda: native.cover([1], [1], [{}], [0.5], [0], set(), 9),
        lambda: native.span_tokens("x", [(0, 1, True)], [0], object(), 0, toks),
        lambda: native.first_worths([{"a"}], [1], {"a": "x"}),
    ]
    for call in calls:
        with pytest.raises((TypeError, AttributeError)):
            call()


def test_pure_python_is_forced_by_the_environment() -> None:
    probe = (
        "from factrail.core import candidate_tokens, kernels;"
        "candidate_tokens.token_scan('req-0042af');"
        "print(repr(kernels.active().on()), kernels.describe(), sep='|')"
    )
    env = {**os.environ, "FACTRAIL_PURE_PYTHON": "1"}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "()|pure Python (FACTRAIL_PURE_PYTHON=1)"


def test_one_kernels_object_switched_by_use(native: ModuleType) -> None:
    """Every engine module reads the one active object; `use` swaps its fields for a block,
    kernel by kernel, and puts them back."""
    from factrail.core import candidate_tokens, facts, redact, tokens, units

    k = kernels.active()
    modules = (candidate_tokens, cover, facts, redact, tokens, units, value)
    assert all(m._K is k for m in modules)
    before = k.on()
    with use(Kernels(native).without("fact_tokens", "cover")) as inside:
        assert inside is k
        assert k.fact_tokens is None and k.cover is None and k.token_scan is native.token_scan
        assert kernels.describe() == f"native (C kernels: {', '.join(k.on())})"
        assert "fact_tokens" not in k.on()
        with use(Kernels()):
            assert k.on() == ()
            assert kernels.describe().startswith("pure Python (")
        assert k.token_scan is native.token_scan
    assert k.on() == before
    assert Kernels(native, only=["cover"]).on() == ("cover",)
    with pytest.raises(ValueError, match="no such kernels: nope"):
        Kernels(native).without("nope")
    with pytest.raises(ValueError, match="no such kernels: nope"):
        Kernels(native, only=["nope"])


def test_every_kernel_is_in_the_extension(native: ModuleType) -> None:
    """`NAMES` and the extension's functions are the same set, so none is dropped unnoticed."""
    assert Kernels(native).on() == kernels.NAMES
    exported = {n for n in dir(native) if not n.startswith("_")}
    assert exported == set(kernels.NAMES)


def test_the_pinned_outcomes_hold_on_the_pure_python_path() -> None:
    """The fallback stays the definition: the 318 pinned `apply` outcomes without the kernels."""
    if not kernels.active().on():
        pytest.skip("this run is on the pure Python path already")
    pinned = Path(__file__).with_name("test_apply_pinned.py")
    env = {**os.environ, "FACTRAIL_PURE_PYTHON": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(pinned)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout[-2000:]
