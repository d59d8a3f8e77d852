"""Running the engine with or without its C kernels, for the tests that compare the two."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from factrail.core import facts, kernels, redact, tokens, value


@contextmanager
def kernels_set(mod: ModuleType | None) -> Iterator[None]:
    """Run `facts`, `value`, `tokens` and `redact` with the C kernels `mod` (None: the Python
    definitions); the summing kernels only where `kernels` would use them."""
    summing = mod if kernels.summing is not None else None
    switches = (
        (vars(facts), "_C", mod),
        (vars(value), "_C", mod),
        (vars(value), "_CSUM", summing),
        (vars(tokens), "_C", mod),
        (vars(redact), "_C", mod),
    )
    saved = [names[name] for names, name, _ in switches]
    for names, name, new in switches:
        names[name] = new
    try:
        yield
    finally:
        for (names, name, _), was in zip(switches, saved, strict=True):
            names[name] = was
