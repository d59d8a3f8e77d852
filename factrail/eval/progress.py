"""A tiny progress bar for long eval runs: drawn on a terminal, silent everywhere else."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sized
from typing import TextIO, TypeVar

T = TypeVar("T")

BAR_WIDTH = 30


def render(done: int, total: int | None, label: str) -> str:
    """One bar line (no carriage return): `label [#####.....] done/total`, or a count."""
    if not total:
        return f"{label} {done}"
    share = min(max(done / total, 0.0), 1.0)
    filled = int(share * BAR_WIDTH)
    return f"{label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total}"


def progress(
    iterable: Iterable[T],
    total: int | None = None,
    label: str = "",
    stream: TextIO | None = None,
) -> Iterator[T]:
    """Yield the items of `iterable`, drawing a bar on `stream` (default stderr) if it is a TTY.

    `total` defaults to `len(iterable)` when it has one. The bar is redrawn in place each time
    its text changes and ends with a newline once the iterable is exhausted.
    """
    out = sys.stderr if stream is None else stream
    if not _is_tty(out):
        yield from iterable
        return
    if total is None and isinstance(iterable, Sized):
        total = len(iterable)
    done = 0
    shown = ""
    try:
        for item in iterable:
            line = render(done, total, label)
            if line != shown:
                shown = _draw(out, line, shown)
            yield item
            done += 1
    finally:
        _draw(out, render(done, total, label), shown)
        out.write("\n")
        out.flush()


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):
        return False


def _draw(out: TextIO, line: str, previous: str) -> str:
    """Overwrite the previous line with `line` (padding out leftovers) and return `line`."""
    out.write("\r" + line.ljust(len(previous)))
    out.flush()
    return line
