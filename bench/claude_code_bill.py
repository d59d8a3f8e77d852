"""The bill of a real client, direct and through factrail, side by side.

Claude Code (pinned in `plugin/`, `make node-deps`) runs the scripted tool loop of
`tests/integration/scripted_anthropic.py` (`--steps` tool calls over files of several KB, a fact
planted in the first) once straight to the scripted endpoint and once through a `factrail
serve` per `--triggers` value (`anthropic` price profile, rules judge). Each session is priced
from the endpoint's own usage records: input × 1 + cache write × 1.25 + cache read × 0.1.

Printed per session length and trigger: requests, rejected requests, factrail's compactions,
uncached / cache-write / cache-read tokens, the cache-read share, the billed token-units, the
ratio to direct, and whether the planted line reached the upstream in the last request.

    .venv/bin/python bench/claude_code_bill.py [--steps 22,40] [--triggers 44000,60000,90000]
        [--writes N] [--thinking]

`--writes N`: every Nth call from the second on `Write`s a generated module of about 6 KB
instead of reading (the scripted endpoint's `writes`). `--thinking`: every answer starts with a
signed thinking block, which Claude Code sends back and the endpoint checks byte for byte.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.claude_code import (  # noqa: E402
    CLAUDE,
    Session,
    counters,
    run_session,
    start_gateway,
)
from tests.integration.processes import start_fake, stop  # noqa: E402

HEADER = (
    f"{'calls':>5} {'route':<16} {'reqs':>4} {'bad':>3} {'compact':>7} {'uncached':>8} "
    f"{'written':>8} {'read':>9} {'read %':>6} {'billed':>9} {'ratio':>6} {'fact':>6}"
)


def row(steps: int, route: str, s: Session, compactions: str, direct: float) -> str:
    answered = bool(s.main) and s.main[-1].get("answered_fact") == s.token
    reread = any(r.get("recovering") for r in s.main)
    fact = ("reread" if reread else "yes") if answered else "NO"
    return (
        f"{steps:>5} {route:<16} {len(s.records):>4} {len(s.rejected):>3} {compactions:>7} "
        f"{s.total('input_tokens'):>8,} {s.total('cache_creation'):>8,} "
        f"{s.total('cache_read'):>9,} {s.cache_read_share:>6.1%} {s.billed:>9,.0f} "
        f"{s.billed / direct:>6.3f} {fact:>6}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="22,40", help="tool calls per session (comma list)")
    parser.add_argument("--triggers", default="44000,60000,90000", help="FACTRAIL_TRIGGER_TOKENS")
    parser.add_argument(
        "--writes", type=int, default=0, help="every Nth call writes a 6 KB module (0: none)"
    )
    parser.add_argument("--thinking", action="store_true", help="answers carry thinking blocks")
    args = parser.parse_args()
    if not CLAUDE.exists():
        print(f"{CLAUDE} is missing: run `make node-deps`", file=sys.stderr)
        return 2
    steps = [int(s) for s in args.steps.split(",")]
    triggers = [int(t) for t in args.triggers.split(",")]
    work = Path(tempfile.mkdtemp(prefix="factrail-cc-bench-"))
    endpoint, fake = start_fake("tests.integration.scripted_anthropic:app")
    gateways = []
    try:
        for trigger in triggers:
            gateways.append((trigger, *start_gateway(endpoint, work / f"g{trigger}", trigger)))
        print(HEADER)
        for n in steps:
            script = {"writes": args.writes, "thinking": args.thinking}
            direct = run_session(endpoint, endpoint, n, work / f"{n}-d{0:06d}", script=script)
            print(row(n, "direct", direct, "-", direct.billed), flush=True)
            for trigger, gateway, _ in gateways:
                before = counters(gateway)
                through = run_session(
                    endpoint, gateway, n, work / f"{n}-t{trigger:06d}", script=script
                )
                done = counters(gateway).get("compactions", 0) - before.get("compactions", 0)
                route = f"factrail T={trigger // 1000}k"
                print(row(n, route, through, f"{done:.0f}", direct.billed), flush=True)
                if through.returncode != 0 or direct.returncode != 0:
                    print(f"  claude exited {direct.returncode} / {through.returncode}")
    finally:
        for _, _, proc in gateways:
            stop(proc)
        stop(fake)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
