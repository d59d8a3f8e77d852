"""The bill of an OpenAI Agents SDK agent with the hosted shell tool, direct and through factrail.

The agent (`tests/integration/agents_sdk_client.py`: `ShellTool` run locally, tracing off) runs
the scripted tool loop of `tests/integration/scripted_responses.py` (`--steps` `shell_call`s
over files of several KB, a fact planted in the first; the SDK sends each result back as a
`shell_call_output`) once straight to the scripted Responses endpoint and once through a
`factrail serve` per `--triggers` value (`openai` price profile, rules judge). Each session is
priced from the endpoint's own usage records under OpenAI's prices for the model (`gpt-5.1`:
uncached input × 1, cached input × 0.1).

Printed per session length and trigger: requests, rejected requests, factrail's compactions,
uncached and cached tokens, the cached share, the billed token-units, the ratio to direct,
whether the answer quoted the fact (`reread`: the agent re-ran the read a note pointed at), and
the ratio factrail's own bill of the session gives (`ledger`, from its sessions route).

    .venv/bin/python bench/agents_sdk_bill.py [--steps 16,30,40] [--triggers 20000,40000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bills import compare_responses  # noqa: E402
from tests.integration.agents_sdk import AVAILABLE, MODEL, run_session  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="16,30,40", help="shell calls per session (comma list)")
    parser.add_argument("--triggers", default="20000,40000", help="FACTRAIL_TRIGGER_TOKENS")
    parser.add_argument("--model", default=MODEL, help="the model the agent asks for")
    args = parser.parse_args()
    if not AVAILABLE:
        print("the Agents SDK is missing: run `make .venv/.installed-dev`", file=sys.stderr)
        return 2
    compare_responses(
        run_session, args.steps, args.triggers, {"model": args.model}, "factrail-agents-bench-"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
