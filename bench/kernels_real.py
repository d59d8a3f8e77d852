"""What each C kernel saves on the cold compaction of a 1 MB real session, against the JSON
round trip of the same session.

Usage: `.venv/bin/python bench/kernels_real.py [--corpus DIR] [--bytes 1000000] [--runs 15]
[--pairs 15] [--kernels a,b,...] [--profile N]`

The session is the largest of the corpus folder (the next largest appended while the files hold
fewer than `--bytes`). The cold compaction is the rules path of `bench/engine.py` (every
unpinned call `drop_result`, `Reduction(0.3, 0.3)`) with nothing learnt before: a fresh
analysis, every token counted. First its median ms with every kernel on and with none, beside
`orjson.loads` + `orjson.dumps` of the session as an OpenAI chat body, alternating; then, per
kernel, alternating pairs with every kernel and with every kernel but that one (`bench/kernels.py`),
the median ms it saves and its share of the compaction. Times are the process's CPU time
(`time.process_time`; `--wall` for wall-clock time): on a machine shared with other work, what
this process spent is steadier than the time it waited. `--profile N` prints instead the N
costliest functions of one cold compaction (cProfile, cumulative).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.engine import openai_body, rules_path  # noqa: E402
from bench.kernels import CONTROL, Clock, paired, print_table  # noqa: E402
from factrail.core import kernels  # noqa: E402
from factrail.core.kernels import Kernels  # noqa: E402
from factrail.core.model import Message  # noqa: E402
from factrail.eval.corpora import parse_any  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus" / "dev"


def session(folder: Path, least: int) -> tuple[str, list[Message]]:
    """The largest session of `folder`, with the next largest appended while the files hold
    fewer than `least` bytes; its label and messages."""
    files = sorted(folder.glob("*.json"), key=lambda p: -p.stat().st_size)
    if not files:
        sys.exit(f"no sessions in {folder}")
    messages: list[Message] = []
    taken: list[Path] = []
    for path in files:
        if taken and sum(p.stat().st_size for p in taken) >= least:
            break
        messages.extend(parse_any(path.read_text(encoding="utf-8"), path.name))
        taken.append(path)
    size = sum(p.stat().st_size for p in taken)
    names = ", ".join(p.stem for p in taken)
    return f"{names} ({size / 1e6:.2f} MB, {len(messages)} messages)", messages


def _ms(run: Callable[[], object], clock: Clock) -> float:
    gc.collect()
    start = clock()
    run()
    return (clock() - start) * 1000


def baseline(messages: list[Message], runs: int, clock: Clock) -> None:
    """Median ms of the cold compaction (every kernel, none) and of the JSON round trip."""
    body = openai_body(messages)
    full, none = kernels.loaded(), Kernels()

    def trip() -> None:
        orjson.dumps(orjson.loads(body))

    def compaction(ks: Kernels) -> Callable[[], object]:
        def run() -> None:
            with kernels.use(ks):
                rules_path(messages)

        return run

    cases = {
        "JSON round trip": trip,
        "kernels on": compaction(full),
        "pure Python": compaction(none),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(runs + 1):  # the first round warms every path
        order = list(cases) if r % 2 == 0 else list(reversed(cases))
        for name in order:
            ms = _ms(cases[name], clock)
            if r:
                times[name].append(ms)
    trip_ms = statistics.median(times["JSON round trip"])
    print(f"JSON round trip ({len(body):,} bytes): {trip_ms:.2f} ms\n")
    print("| cold compaction | ms | × JSON round trip |")
    print("|---|---:|---:|")
    for name in ("kernels on", "pure Python"):
        ms = statistics.median(times[name])
        print(f"| {name} | {ms:.1f} | {ms / trip_ms:.0f}× |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--bytes", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--kernels", default="", help="comma-separated (default: every one)")
    parser.add_argument("--profile", type=int, default=0, help="print the top N functions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wall", action="store_true", help="wall-clock time, not CPU time")
    args = parser.parse_args()
    clock: Clock = time.perf_counter if args.wall else time.process_time
    label, messages = session(args.corpus, args.bytes)
    if args.profile:
        rules_path(messages)  # imports and first-call set-up out of the profile
        profiler = cProfile.Profile()
        profiler.runcall(rules_path, messages)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)
        return
    what = "wall-clock" if args.wall else "CPU"
    print(f"{label}, {sys.version.split()[0]}, {what} ms, {kernels.describe()}\n")
    baseline(messages, args.runs, clock)
    full = kernels.loaded()
    names = args.kernels.split(",") if args.kernels else list(full.on())
    if not names:
        return
    cases = {CONTROL: full, **{n: full.without(n) for n in names}}
    print(f"each kernel off in turn, {args.pairs} alternating pairs:\n")

    def run() -> None:
        rules_path(messages)

    print_table(paired(run, full, cases, args.pairs, args.seed, clock))


if __name__ == "__main__":
    main()
