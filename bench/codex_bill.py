"""The bill of the Codex CLI, direct and through factrail, side by side.

Codex (pinned in `plugin/`, `make node-deps`) runs the scripted tool loop of
`tests/integration/scripted_responses.py` (`--steps` `exec_command` calls over files of several
KB, a fact planted in the first) once straight to the scripted Responses endpoint and once
through a `factrail serve` per `--triggers` value (`openai` price profile, rules judge). Each
session is priced from the endpoint's own usage records under OpenAI's prices for the model
(`gpt-5-codex`: uncached input × 1, cached input × 0.1).

Printed per session length and trigger: requests, rejected requests, factrail's compactions,
uncached and cached tokens, the cached share, the billed token-units, the ratio to direct, and
whether the answer quoted the fact (`reread`: the agent re-ran the read a note pointed at).

    .venv/bin/python bench/codex_bill.py [--steps 22,40] [--triggers 44000,60000,90000]
        [--reasoning]

`--reasoning`: every answer starts with an opaque reasoning item (`encrypted_content`), as a
reasoning model's do; Codex sends them back and the endpoint rejects a request where one is
not right before the call or answer it produced.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.claude_code import Session, counters  # noqa: E402
from tests.integration.codex import CODEX, run_session, start_gateway  # noqa: E402
from tests.integration.processes import start_fake, stop  # noqa: E402

HEADER = (
    f"{'calls':>5} {'route':<16} {'reqs':>4} {'bad':>3} {'compact':>7} {'uncached':>9} "
    f"{'cached':>9} {'cached %':>8} {'billed':>9} {'ratio':>6} {'fact':>6}"
)


def row(steps: int, route: str, s: Session, compactions: str, direct: float) -> str:
    answered = bool(s.main) and s.main[-1].get("answered_fact") == s.token
    reread = any(r.get("recovering") for r in s.main)
    fact = ("reread" if reread else "yes") if answered else "NO"
    return (
        f"{steps:>5} {route:<16} {len(s.records):>4} {len(s.rejected):>3} {compactions:>7} "
        f"{s.total('input_tokens'):>9,} {s.total('cache_read'):>9,} "
        f"{s.cache_read_share:>8.1%} {s.billed:>9,.0f} {s.billed / direct:>6.3f} {fact:>6}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="22,40", help="tool calls per session (comma list)")
    parser.add_argument("--triggers", default="44000,60000,90000", help="FACTRAIL_TRIGGER_TOKENS")
    parser.add_argument("--reasoning", action="store_true", help="answers carry reasoning items")
    args = parser.parse_args()
    script = {"reasoning": args.reasoning}
    if not CODEX.exists():
        print(f"{CODEX} is missing: run `make node-deps`", file=sys.stderr)
        return 2
    steps = [int(s) for s in args.steps.split(",")]
    triggers = [int(t) for t in args.triggers.split(",")]
    work = Path(tempfile.mkdtemp(prefix="factrail-codex-bench-"))
    endpoint, fake = start_fake("tests.integration.scripted_responses:app")
    gateways = []
    try:
        for trigger in triggers:
            gateways.append((trigger, *start_gateway(endpoint, work / f"g{trigger}", trigger)))
        print(HEADER)
        for n in steps:
            direct = run_session(endpoint, f"{endpoint}/v1", n, work / f"{n}-d{0:06d}", script)
            print(row(n, "direct", direct, "-", direct.billed), flush=True)
            for trigger, gateway, _ in gateways:
                root = gateway.removesuffix("/v1")
                before = counters(root, "responses")
                through = run_session(endpoint, gateway, n, work / f"{n}-t{trigger:06d}", script)
                done = counters(root, "responses").get("compactions", 0)
                done -= before.get("compactions", 0)
                route = f"factrail T={trigger // 1000}k"
                print(row(n, route, through, f"{done:.0f}", direct.billed), flush=True)
                if through.returncode != 0 or direct.returncode != 0:
                    print(f"  codex exited {direct.returncode} / {through.returncode}")
                    print(f"  {through.stderr[-600:] or direct.stderr[-600:]}")
    finally:
        for _, _, proc in gateways:
            stop(proc)
        stop(fake)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
