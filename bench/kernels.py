"""What each C kernel saves on a full compaction: the rules path of `bench/engine.py` timed with
every kernel on against every kernel but one, in alternating pairs.

Usage: `.venv/bin/python bench/kernels.py [--size 200000] [--pairs 21] [--kernels a,b,...]
[--corpus DIR --sessions N] [--group a,b,...]`

Each round times, for every kernel in a shuffled order, one run with all kernels and one without
that kernel (which of the two goes first alternates), after a garbage collection. A control
pair ("(none)": both runs with all kernels) shows what noise alone gives. Prints a markdown
table of medians: ms with, ms without, the median paired difference and its share of the
compaction. `--group` instead times all kernels against all but the named ones together.
`--corpus` times the `--sessions` largest real sessions of a folder (their sum) instead of the
synthetic transcript.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.engine import rules_path, transcript  # noqa: E402
from factrail.core import kernels  # noqa: E402
from factrail.core.kernels import Kernels  # noqa: E402
from factrail.core.model import Message, transcript_tokens  # noqa: E402
from factrail.core.tokens import estimate_tokens  # noqa: E402
from factrail.eval.corpora import load_corpus_dir  # noqa: E402

CONTROL = "(none)"


Clock = Callable[[], float]


def _timed(run: Callable[[], object], ks: Kernels, clock: Clock = time.perf_counter) -> float:
    gc.collect()
    with kernels.use(ks):
        start = clock()
        run()
        return (clock() - start) * 1000


def _workload(args: argparse.Namespace) -> tuple[str, Callable[[], object]]:
    if args.corpus is None:
        messages = transcript(args.size)
        return f"synthetic {args.size:,} tokens", lambda: rules_path(messages)
    named = [(n, m, transcript_tokens(m, estimate_tokens)) for n, m in load_corpus_dir(args.corpus)]
    named.sort(key=lambda x: -x[2])
    chosen: list[list[Message]] = [m for _, m, _ in named[: args.sessions]]
    tokens = sum(t for _, _, t in named[: args.sessions])

    def run() -> None:
        for messages in chosen:
            rules_path(messages)

    return f"{len(chosen)} largest sessions of {args.corpus} ({tokens:,} tokens)", run


Rows = list[tuple[str, float, float, float]]
"""`(case, ms with, ms without, median paired difference)`, most saved first."""


def paired(
    run: Callable[[], object],
    full: Kernels,
    cases: dict[str, Kernels],
    pairs: int,
    seed: int,
    clock: Clock = time.perf_counter,
) -> Rows:
    """Time `run` with `full` against each case, `pairs` rounds of alternating pairs (cases in a
    shuffled order each round; which of a pair goes first alternates), after one warm-up each."""
    for ks in (full, *cases.values()):  # warm every path once
        _timed(run, ks, clock)
    rng = random.Random(seed)
    on: dict[str, list[float]] = {n: [] for n in cases}
    off: dict[str, list[float]] = {n: [] for n in cases}
    for r in range(pairs):
        order = list(cases)
        rng.shuffle(order)
        for name in order:
            first, second = (full, cases[name]) if r % 2 == 0 else (cases[name], full)
            a, b = _timed(run, first, clock), _timed(run, second, clock)
            on[name].append(a if r % 2 == 0 else b)
            off[name].append(b if r % 2 == 0 else a)
    rows = [
        (
            name,
            statistics.median(on[name]),
            statistics.median(off[name]),
            statistics.median(b - a for a, b in zip(on[name], off[name], strict=True)),
        )
        for name in cases
    ]
    return sorted(rows, key=lambda row: -row[3])


def print_table(rows: Rows) -> None:
    """The rows as a markdown table (share: the saving over the median ms with the kernel)."""
    print("| kernel | ms with | ms without | saves (median pair) | share |")
    print("|---|---:|---:|---:|---:|")
    for name, with_ms, without_ms, saved in rows:
        print(
            f"| {name} | {with_ms:.1f} | {without_ms:.1f} | {saved:+.2f} | {saved / with_ms:+.1%} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--pairs", type=int, default=21)
    parser.add_argument("--kernels", default="", help="comma-separated (default: every one)")
    parser.add_argument("--group", default="", help="time all against all but these together")
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    full = kernels.loaded()
    if not full.on():
        sys.exit(f"no C kernels to measure: {kernels.describe()}")
    label, run = _workload(args)
    if args.group:
        group = tuple(args.group.split(","))
        cases = {f"all of {', '.join(group)}": full.without(*group)}
    else:
        names = args.kernels.split(",") if args.kernels else list(full.on())
        cases = {CONTROL: full, **{n: full.without(n) for n in names}}
    print(f"{label}, {args.pairs} alternating pairs, {sys.version.split()[0]}\n")
    print_table(paired(run, full, cases, args.pairs, args.seed))


if __name__ == "__main__":
    main()
