"""The bill of the Codex CLI, direct and through factrail, side by side.

Codex (pinned in `plugin/`, `make node-deps`) runs the scripted tool loop of
`tests/integration/scripted_responses.py` (`--steps` `exec_command` calls over files of several
KB, a fact planted in the first) once straight to the scripted Responses endpoint and once
through a `factrail serve` per `--triggers` value (`openai` price profile, rules judge). Each
session is priced from the endpoint's own usage records under OpenAI's prices for the model
(`gpt-5-codex`: uncached input × 1, cached input × 0.1).

Printed per session length and trigger: requests, rejected requests, factrail's compactions,
uncached and cached tokens, the cached share, the billed token-units, the ratio to direct,
whether the answer quoted the fact (`reread`: the agent re-ran the read a note pointed at), and
the ratio factrail's own bill of the session gives (`ledger`, from its sessions route).

    .venv/bin/python bench/codex_bill.py [--steps 22,40] [--triggers 44000,60000,90000]
        [--reasoning] [--parallel N]

`--reasoning`: every answer starts with an opaque reasoning item (`encrypted_content`), as a
reasoning model's do; Codex sends them back and the endpoint rejects a request where one is
not right before the call or answer it produced. `--parallel N`: every Nth step from the first
asks for two calls at once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bills import compare_responses  # noqa: E402
from tests.integration.codex import CODEX, MODEL, run_session  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="22,40", help="tool calls per session (comma list)")
    parser.add_argument("--triggers", default="44000,60000,90000", help="FACTRAIL_TRIGGER_TOKENS")
    parser.add_argument("--reasoning", action="store_true", help="answers carry reasoning items")
    parser.add_argument("--parallel", type=int, default=0, help="every Nth step calls twice")
    parser.add_argument("--model", default=MODEL, help="the model Codex asks for")
    args = parser.parse_args()
    if not CODEX.exists():
        print(f"{CODEX} is missing: run `make node-deps`", file=sys.stderr)
        return 2
    script = {"reasoning": args.reasoning, "parallel": args.parallel, "model": args.model}
    compare_responses(run_session, args.steps, args.triggers, script, "factrail-codex-bench-")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
