"""Run an OpenAI Agents SDK agent with the hosted `shell` tool (`agents_sdk_client.py`) through one
scripted session, and price it from the scripted endpoint's usage records
(`tests/integration/scripted_responses.py`, which answers with `shell_call` items when the
request declares the `shell` tool).

Shared by `tests/integration/test_agents_sdk_bill.py` and `bench/agents_sdk_bill.py`. The agent
runs as its own process, pointed at the endpoint's `/v1` or at factrail's (started as for Codex:
`tests.integration.codex.start_gateway`).
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from factrail.policy.cost import prices
from tests.integration.bills import PROMPT, Session, finished, run_client, script_project
from tests.integration.processes import ROOT

MODEL = "gpt-5.1"
"""A model the hosted shell tool is offered for (cached input at 0.1 of input, no write price)."""
RUN_TIMEOUT_S = 180
AVAILABLE = importlib.util.find_spec("agents") is not None
"""Whether the Agents SDK (`openai-agents`, a dev dependency) is installed."""


def run_session(
    endpoint: str,
    base_url: str,
    steps: int,
    work: Path,
    script: Mapping[str, Any] | None = None,
) -> Session:
    """Script `steps` shell calls on the endpoint (root URL), write the project they read under
    `work`, and run the agent there against `base_url` (the endpoint's or factrail's `/v1`)."""
    model = str((script or {}).get("model") or MODEL)
    project, token = script_project(endpoint, work, steps, script)
    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work),
        "PYTHONPATH": str(ROOT),
        "OPENAI_API_KEY": "scripted-" + secrets.token_hex(8),
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }
    argv = [sys.executable, "-m", "tests.integration.agents_sdk_client", base_url, model,
            str(steps + 5), PROMPT]  # fmt: skip
    done = run_client(argv, project, environ, RUN_TIMEOUT_S)
    return finished(done, done.stdout.strip(), endpoint, token, prices("openai", model))
