"""Survival of random secrets in secret-named slots, shape by shape.

Usage: `.venv/bin/python bench/redact_slots.py [--seed 35] [--values 200] [--seeds 1]`

For each labelled shape of `tests/core/test_redact_slots.py` (`.env`, INI, YAML with its block
scalars, anchors and tags, kubeconfig, TOML, JSON and JSON escaped in a string, key/value pair
objects, URL query and userinfo, cookies and cookie jars, Authorization headers of any scheme,
flags, grep output), embeds `--values` random values (8 to 40 chars of letters, digits and
`-_/+=.`, or the shape's own spelling; seeded) and prints how many survive redaction (the value
still in the output, or not replaced whole by one marker) and how many survive when the shape
is a tool call's arguments as a judge sees them (JSON in a string), then whether every
look-alike came back unchanged. `--seeds N` repeats over seeds `seed…seed+N-1` and sums, for a
rate over more values than the test draws. Exits 1 when anything survives.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from factrail.core.redact import redact  # noqa: E402
from tests.core.test_redact_slots import (  # noqa: E402
    LOOK_ALIKES,
    SEED,
    SHAPES,
    VALUES,
    shape_values,
    survival,
    survives_as_argument,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--values", type=int, default=VALUES)
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args(argv)
    total: Counter[str] = Counter()
    as_argument: Counter[str] = Counter()
    for seed in range(args.seed, args.seed + args.seeds):
        total.update(survival(seed, args.values))
        for name, shape in SHAPES.items():
            values = shape_values(name, seed, args.values)
            as_argument[name] += sum(survives_as_argument(shape, v) for v in values)
    drawn = args.values * args.seeds
    width = max(len(name) for name in total)
    print(f"{'shape':{width}}  survived / {drawn}   as arguments")
    for name, n in total.items():
        print(f"{name:{width}}  {n:8}  {n / drawn:.4%}  {as_argument[name]:8}")
    changed = [t for t in LOOK_ALIKES if redact(t).text != t]
    survived = sum(total.values()) + sum(as_argument.values())
    print(
        f"shapes: {len(total)}, survived in all: {sum(total.values())} of {drawn * len(total)}, "
        f"as arguments: {sum(as_argument.values())}"
    )
    print(f"look-alikes changed: {len(changed)} of {len(LOOK_ALIKES)}")
    for text in changed:
        print(f"  {text!r}")
    return 1 if survived or changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
