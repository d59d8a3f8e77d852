"""The bill of a real client, direct and through factrail, side by side.

Claude Code (pinned in `plugin/`, `make node-deps`) runs the scripted tool loop of
`tests/integration/scripted_anthropic.py` (`--steps` tool calls over files of several KB, a fact
planted in the first) once straight to the scripted endpoint and once through a `factrail
serve` per `--triggers` value (`anthropic` price profile, rules judge). Each session is priced
from the endpoint's own usage records: input × 1 + cache write × 1.25 + cache read × 0.1.

Printed per session length and trigger: requests, rejected requests, factrail's compactions,
uncached / cache-write / cache-read tokens, the cache-read share, the billed token-units, the
ratio to direct, whether the planted line reached the upstream in the last request, and the
ratio factrail's own bill of the session gives (`ledger`, from its sessions route).

    .venv/bin/python bench/claude_code_bill.py [--steps 22,40] [--triggers 44000,60000,90000]
        [--writes N] [--thinking] [--parallel N]

`--writes N`: every Nth call from the second on `Write`s a generated module of about 6 KB
instead of reading (the scripted endpoint's `writes`). `--thinking`: every answer starts with a
signed thinking block, which Claude Code sends back and the endpoint checks byte for byte.
`--parallel N`: every Nth call from the first comes with a second one in the same answer.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bills import compare  # noqa: E402
from tests.integration.bills import Session  # noqa: E402
from tests.integration.claude_code import CLAUDE, MODEL, run_session, start_gateway  # noqa: E402

COLUMNS = (
    ("uncached", 8, lambda s: f"{s.total('input_tokens'):,}"),
    ("written", 8, lambda s: f"{s.total('cache_creation'):,}"),
    ("read", 9, lambda s: f"{s.total('cache_read'):,}"),
    ("read %", 6, lambda s: f"{s.cache_read_share:.1%}"),
)


def run(endpoint: str, url: str, steps: int, work: Path, script: dict[str, object]) -> Session:
    return run_session(endpoint, url, steps, work, script=script)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="22,40", help="tool calls per session (comma list)")
    parser.add_argument("--triggers", default="44000,60000,90000", help="FACTRAIL_TRIGGER_TOKENS")
    parser.add_argument(
        "--writes", type=int, default=0, help="every Nth call writes a 6 KB module (0: none)"
    )
    parser.add_argument("--thinking", action="store_true", help="answers carry thinking blocks")
    parser.add_argument("--parallel", type=int, default=0, help="every Nth step calls twice")
    parser.add_argument("--model", default=MODEL, help="the model Claude Code asks for")
    args = parser.parse_args()
    if not CLAUDE.exists():
        print(f"{CLAUDE} is missing: run `make node-deps`", file=sys.stderr)
        return 2
    compare(
        "tests.integration.scripted_anthropic:app",
        run,
        start_gateway,
        "messages",
        COLUMNS,
        [int(s) for s in args.steps.split(",")],
        [int(t) for t in args.triggers.split(",")],
        script={
            "writes": args.writes,
            "thinking": args.thinking,
            "parallel": args.parallel,
            "model": args.model,
        },
        prefix="factrail-cc-bench-",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
