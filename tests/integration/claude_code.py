"""Run the pinned Claude Code CLI (`plugin/node_modules`) through one scripted session, and price
it from the scripted endpoint's usage records (`tests/integration/scripted_anthropic.py`).

Shared by `tests/integration/test_claude_code_bill.py` and `bench/claude_code_bill.py`.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from factrail.policy.cost import prices
from tests.integration.bills import (
    PROMPT,
    Session,
    endpoint_records,
    gateway_env,
    script_project,
)
from tests.integration.processes import ROOT, Process, free_port, start_factrail

CLAUDE = ROOT / "plugin" / "node_modules" / ".bin" / "claude"
MODEL = "claude-opus-5"
"""The model the sessions ask for: priced as the `anthropic` profile (reads 0.1, writes 1.25).
Claude Code's own default, Opus 5.5, reads the cache at 0.05 (`bench/claude_code_bill.py
--model claude-opus-5-5`)."""
RUN_TIMEOUT_S = 120


def offline_env(home: Path, **extra: str) -> dict[str, str]:
    """Claude Code's environment for a run under `home` that calls nothing but the endpoint it
    is given (no telemetry, updates or error reports), with `extra` laid over it."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        **extra,
    }


def run_session(
    endpoint: str,
    base_url: str,
    steps: int,
    work: Path,
    *,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    script: Mapping[str, Any] | None = None,
) -> Session:
    """Script `steps` tool calls on the endpoint (root URL), write the project they read under
    `work`, and run Claude Code there against `base_url` (the endpoint, or factrail). `args`
    and `env` are added to Claude Code's command line and environment, `script` to the
    endpoint's script (`fenced`, `fenced_step`); its `model` is the one Claude Code asks for
    (`MODEL` when not given), which prices the session."""
    project, token = script_project(endpoint, work, steps, script)
    home = work / "home"
    home.mkdir()
    environ = offline_env(
        home,
        IS_SANDBOX="1",
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY="scripted-" + secrets.token_hex(8),
        **(env or {}),
    )
    model = str((script or {}).get("model") or MODEL)
    argv = [str(CLAUDE), "-p", PROMPT, "--output-format", "json", "--dangerously-skip-permissions",
            "--model", model, *args]  # fmt: skip
    done = subprocess.run(
        argv, cwd=project, env=environ, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        result = {"unparsed": done.stdout[-2000:]}
    records = endpoint_records(endpoint)
    # Priced as Anthropic bills the model (Opus 5.5 and Sonnet 5.5 read the cache at 0.05).
    price = prices("anthropic", model)
    return Session(done.returncode, result, records, token, done.stderr[-2000:], price)


def start_gateway(endpoint: str, home: Path, trigger: int, **env: str) -> tuple[str, Process]:
    """`factrail serve` (a real process) in front of the endpoint under the Anthropic prices:
    its root URL and process."""
    unused_openai = f"http://127.0.0.1:{free_port()}/v1"
    url, proc = start_factrail(
        unused_openai,
        home,
        FACTRAIL_ANTHROPIC_UPSTREAM_URL=endpoint,
        **gateway_env("anthropic", trigger, **env),
    )
    return url.removesuffix("/v1"), proc


def workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="factrail-cc-"))
