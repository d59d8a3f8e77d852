"""The cold compaction of a 1 MB real session in two checkouts, side by side in one run.

Usage: `.venv/bin/python bench/cold_pair.py BEFORE_DIR [AFTER_DIR] [--runs 31] [--corpus DIR]`
(e.g. `git worktree add --detach /tmp/before HEAD~1` for BEFORE_DIR; AFTER_DIR defaults to this
checkout; a checkout without the built extension gets this one's copied in first).

One worker process per checkout holds the session of `bench/kernels_real.py` (the largest of the
corpus folder) and times, on request, the rules path of `bench/engine.py` or the JSON round trip;
the two trees' compactions alternate (CPU time, `time.process_time`), so a machine's changing
load falls on both alike. Prints the medians and their ratios to the round trip.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "dev"
WORKER = """
import gc, sys, time
from pathlib import Path
sys.path.insert(0, ".")
import orjson
from bench.engine import openai_body, rules_path
from bench.kernels_real import session
_, messages = session(Path(sys.argv[1]), 1_000_000)
body = openai_body(messages)
rules_path(messages)
for line in sys.stdin:
    gc.collect()
    start = time.process_time()
    if line.strip() == "trip":
        orjson.dumps(orjson.loads(body))
    else:
        rules_path(messages)
    print((time.process_time() - start) * 1000, flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path, nargs="?", default=ROOT)
    parser.add_argument("--runs", type=int, default=31)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    for tree in trees.values():
        if not list((tree / "factrail" / "core").glob("_speedups*.so")):
            for built in (ROOT / "factrail" / "core").glob("_speedups*.so"):
                shutil.copy(built, tree / "factrail" / "core")
    workers = {
        name: subprocess.Popen(
            [sys.executable, "-c", WORKER, str(args.corpus.resolve())],
            cwd=tree,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name, tree in trees.items()
    }

    def ask(name: str, what: str) -> float:
        worker = workers[name]
        assert worker.stdin is not None and worker.stdout is not None
        worker.stdin.write(what + "\n")
        worker.stdin.flush()
        return float(worker.stdout.readline())

    times: dict[str, list[float]] = {"before": [], "after": [], "trip": []}
    for r in range(args.runs):
        for name in ("before", "after") if r % 2 == 0 else ("after", "before"):
            times[name].append(ask(name, "cold"))
        times["trip"].append(ask("after", "trip"))
    for worker in workers.values():
        assert worker.stdin is not None
        worker.stdin.close()
        worker.wait()
    trip = statistics.median(times["trip"])
    print(f"JSON round trip: {trip:.2f} ms ({args.runs} runs, CPU time)\n")
    print("| cold compaction | ms | × JSON round trip |")
    print("|---|---:|---:|")
    for name in ("before", "after"):
        ms = statistics.median(times[name])
        print(f"| {name} ({trees[name]}) | {ms:.1f} | {ms / trip:.0f}× |")


if __name__ == "__main__":
    main()
