"""The optional C kernels of the engine's per-item loops, as one object the engine reads.

`active()` is the one `Kernels` the engine runs with, chosen once at import: the functions of
the extension `factrail.core._speedups` (`_speedups.c`), or none of them when it is not built or
`FACTRAIL_PURE_PYTHON=1`. A field that is None runs the Python it stands in for, which stays the
definition and the fallback; every kernel is output-identical to it. The modules that run a
kernel bind that object (never its fields) at import, so `use()` switches what they all run,
kernel by kernel (the parity tests, `bench/kernels.py`, `bench/kernels_real.py`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from typing import Protocol


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


ScanFields = tuple[
    dict[str, tuple[int, int]], tuple[int, ...], tuple[str, ...], tuple[int, ...], tuple[str, ...]
]

NAMES = (
    "estimate_tokens", "token_scan", "span_tokens", "first_worths", "cover", "fact_scores",
    "fact_tokens", "unit_spans", "fold_digits", "anchors_in",
)  # fmt: skip
"""Every kernel, in `_speedups.c` order: the ones that save at least 5% of the cold compaction of
a 1 MB real session (`bench/kernels_real.py`, docs/native-layer.md), and redaction's
`anchors_in`."""


class Kernels:
    """One choice of C kernels: each field is the extension's function or None (the Python
    definition runs). Arguments are positional only."""

    __slots__ = NAMES

    estimate_tokens: Callable[[str], int] | None
    token_scan: Callable[[str], ScanFields] | None
    span_tokens: (
        Callable[
            [
                str,
                Sequence[tuple[int, int, bool]],
                Iterable[int],
                Scan,
                int,
                Callable[[str], AbstractSet[str]],
            ],
            list[AbstractSet[str]],
        ]
        | None
    )
    first_worths: (
        Callable[[Sequence[AbstractSet[str]], Sequence[int], Mapping[str, float]], list[float]]
        | None
    )
    cover: (
        Callable[
            [
                Sequence[AbstractSet[str]],
                Sequence[int],
                Sequence[Mapping[str, float]],
                Sequence[float],
                Iterable[int],
                AbstractSet[str],
                int,
            ],
            list[int],
        ]
        | None
    )
    fact_scores: Callable[[Sequence[str]], list[int]] | None
    fact_tokens: (
        Callable[[str, Callable[[str], list[str]], Callable[[str], bool] | None], set[str]] | None
    )
    unit_spans: Callable[[str], list[tuple[int, int, bool]]] | None
    fold_digits: Callable[[str], str] | None
    anchors_in: Callable[[str, tuple[str, ...]], set[str]] | None

    def __init__(self, native: object = None, only: Iterable[str] | None = None) -> None:
        """The kernels of the module `native` (None: none), or only those named in `only`."""
        wanted = set(NAMES if only is None else only)
        if unknown := wanted.difference(NAMES):
            raise ValueError(f"no such kernels: {', '.join(sorted(unknown))}")
        for name in NAMES:
            fn = getattr(native, name, None) if name in wanted else None
            setattr(self, name, fn)

    def on(self) -> tuple[str, ...]:
        """The names of the kernels that run in C."""
        return tuple(name for name in NAMES if getattr(self, name) is not None)

    def without(self, *names: str) -> Kernels:
        """These kernels but `names`, which run in Python."""
        if unknown := set(names).difference(NAMES):
            raise ValueError(f"no such kernels: {', '.join(sorted(unknown))}")
        kept = Kernels()
        kept._assign(self)
        for name in names:
            setattr(kept, name, None)
        return kept

    def _assign(self, other: Kernels) -> None:
        for name in NAMES:
            setattr(self, name, getattr(other, name))


def _load() -> tuple[object, str]:
    """The extension module (None when it is not used) and why the Python runs."""
    if os.environ.get("FACTRAIL_PURE_PYTHON") == "1":
        return None, "FACTRAIL_PURE_PYTHON=1"
    try:
        return importlib.import_module("factrail.core._speedups"), ""
    except ModuleNotFoundError:
        return None, "extension not built"
    except ImportError as e:  # built for another interpreter, or a symbol it lacks
        return None, f"extension failed to load: {e}"


_NATIVE, _WHY = _load()
_ACTIVE = Kernels(_NATIVE)


def active() -> Kernels:
    """The kernels the engine runs with (the same object for the life of the process)."""
    return _ACTIVE


def loaded() -> Kernels:
    """Every kernel of the extension as loaded at import (none on the pure Python path)."""
    return Kernels(_NATIVE)


@contextmanager
def use(kernels: Kernels) -> Iterator[Kernels]:
    """Run the engine with `kernels` for the block (the active object takes their fields, and
    its own back after). Not thread-safe: for tests and benches."""
    saved = Kernels()
    saved._assign(_ACTIVE)
    _ACTIVE._assign(kernels)
    try:
        yield _ACTIVE
    finally:
        _ACTIVE._assign(saved)


def describe() -> str:
    """Which path the engine runs, for the start-up log."""
    on = _ACTIVE.on()
    if on:
        return f"native (C kernels: {', '.join(on)})"
    return f"pure Python ({_WHY or 'every kernel switched off'})"
