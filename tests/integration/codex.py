"""Run the pinned Codex CLI (`plugin/node_modules`) through one scripted session, and price it
from the scripted endpoint's usage records (`tests/integration/scripted_responses.py`).

Shared by `tests/integration/test_codex_bill.py` and `bench/codex_bill.py`. Codex reaches the
endpoint (or factrail) as a custom model provider with `wire_api = "responses"`, configured in
a `config.toml` of its own `CODEX_HOME`; it runs the scripted `exec_command` calls itself, in
the project folder, without a sandbox.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from factrail.policy.cost import prices
from tests.integration.bills import (
    PROMPT,
    Pairs,
    Session,
    finished,
    gateway_env,
    run_client,
    script_project,
)
from tests.integration.processes import ROOT, Process, free_port, start_factrail, start_fake, stop

CODEX = ROOT / "plugin" / "node_modules" / ".bin" / "codex"
MODEL = "gpt-5-codex"
RUN_TIMEOUT_S = 180
KEY_ENV = "SCRIPTED_OPENAI_KEY"


def config(base_url: str, model: str = MODEL) -> str:
    """Codex's `config.toml`: the model, and the provider at `base_url` (ends in `/v1`)."""
    return (
        f'model = "{model}"\n'
        'model_provider = "scripted"\n'
        "[model_providers.scripted]\n"
        'name = "scripted"\n'
        f'base_url = "{base_url}"\n'
        'wire_api = "responses"\n'
        f'env_key = "{KEY_ENV}"\n'
    )


def run_session(
    endpoint: str,
    base_url: str,
    steps: int,
    work: Path,
    script: Mapping[str, Any] | None = None,
) -> Session:
    """Script `steps` tool calls on the endpoint (root URL), write the project they read under
    `work`, and run `codex exec` there against `base_url` (the endpoint's or factrail's `/v1`);
    `script` is added to the endpoint's script (`reasoning`); its `model` is the one Codex asks
    for (on GPT-6, Codex works in code mode) and prices the session."""
    model = str((script or {}).get("model") or MODEL)
    project, token = script_project(endpoint, work, steps, script)
    home = work / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(config(base_url, model))
    environ: Mapping[str, str] = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work),
        "CODEX_HOME": str(home),
        KEY_ENV: "scripted-" + secrets.token_hex(8),
    }
    last = work / "last-message.txt"
    argv = [str(CODEX), "exec", "--skip-git-repo-check", "--sandbox", "danger-full-access",
            "--output-last-message", str(last), PROMPT]  # fmt: skip
    done = run_client(argv, project, environ, RUN_TIMEOUT_S)
    answer = last.read_text() if last.exists() else ""
    return finished(done, answer, endpoint, token, prices("openai", model))


def start_gateway(endpoint: str, home: Path, trigger: int, **env: str) -> tuple[str, Process]:
    """`factrail serve` (a real process) in front of the endpoint under OpenAI's prices: its
    `/v1` URL and process."""
    unused_anthropic = f"http://127.0.0.1:{free_port()}"
    return start_factrail(
        f"{endpoint}/v1",
        home,
        FACTRAIL_ANTHROPIC_UPSTREAM_URL=unused_anthropic,
        **gateway_env("openai", trigger, **env),
    )


@contextmanager
def responses_pairs(work: Path, run: Callable[..., Session], trigger: int) -> Iterator[Pairs]:
    """The scripted Responses endpoint and a `factrail serve` at `trigger` in front of it, for
    pairs of a client's sessions (`run`: its `run_session`) under `work`."""
    endpoint, fake = start_fake("tests.integration.scripted_responses:app")
    try:
        gateway, proxy = start_gateway(endpoint, work / "factrail", trigger)
        try:
            yield Pairs(f"{endpoint}/v1", gateway, "responses", partial(run, endpoint), work)
        finally:
            stop(proxy)
    finally:
        stop(fake)
