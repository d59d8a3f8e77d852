"""`factrail run` with the real clients pinned in `plugin/`: Claude Code (`factrail run --
claude -p …`) against the scripted Anthropic endpoint and Codex (`factrail run -- codex exec
…`, which gets the provider overrides) against the scripted Responses endpoint. Each runs one
short scripted tool loop; the endpoint is named only in factrail's settings, so every request
it records came through the gateway `factrail run` started."""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.bills import PROMPT, endpoint_records, script_project
from tests.integration.claude_code import CLAUDE, offline_env
from tests.integration.claude_code import MODEL as CLAUDE_MODEL
from tests.integration.codex import CODEX
from tests.integration.codex import MODEL as CODEX_MODEL
from tests.integration.processes import start_fake, stop
from tests.ports import free_port

pytestmark = pytest.mark.integration

STEPS = 1
"""One tool call, then the answer."""
RUN_TIMEOUT_S = 150
SUMMARY = re.compile(
    r"^factrail: (\d+) requests?, (\d+) compactions?, billed (n/a|\d\.\d\d) of sent whole,"
    r" ([\d,]+) tokens saved$",
    re.MULTILINE,
)


@pytest.fixture
def endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    """The scripted endpoint named by the test's parameter (`anthropic` or `responses`)."""
    url, proc = start_fake(f"tests.integration.scripted_{request.param}:app")
    try:
        yield url
    finally:
        stop(proc)


def factrail_run(
    argv: list[str], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """`factrail run -- argv` in `cwd`, to its end, without a terminal."""
    return subprocess.run(
        [sys.executable, "-m", "factrail", "run", "--", *argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


def gateway_settings(work: Path, openai: str, anthropic: str) -> dict[str, str]:
    """The settings of the gateway `factrail run` starts: its own XDG folders, the upstreams."""
    return {
        "XDG_DATA_HOME": str(work / "data"),
        "XDG_CACHE_HOME": str(work / "cache"),
        "FACTRAIL_UPSTREAM_URL": openai,
        "FACTRAIL_ANTHROPIC_UPSTREAM_URL": anthropic,
    }


def went_through(done: subprocess.CompletedProcess[str], endpoint: str, token: str) -> None:
    """The client finished its scripted loop through factrail: the endpoint got every main
    request valid, the last one quoting the planted fact, and the summary counts them."""
    records = endpoint_records(endpoint)
    main = [r for r in records if r.get("kind") == "main"]
    assert len(main) == STEPS + 1, records
    assert [r for r in main if r.get("status") != 200] == []
    assert main[-1]["answered_fact"] == token
    summary = SUMMARY.search(done.stderr)
    assert summary is not None, done.stderr[-2000:]
    assert int(summary[1]) >= len(main)
    assert done.stderr.strip().splitlines()[-1] == summary[0]


def reported(sessions: Path, tmp_path: Path, token: str) -> None:
    """`factrail report` reads the session the client itself wrote down (Claude Code's project
    folder, Codex's rollouts): one session replayed, the page written, no transcript text in
    it (the fact the session read is not on the page)."""
    out = tmp_path / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "factrail", "report", str(sessions), "-o", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.strip().endswith(f"1 session(s) → {out}")
    page = out.read_text(encoding="utf-8")
    assert "1 session(s) replayed" in page and token not in page


@pytest.mark.skipif(
    not CLAUDE.exists(), reason="Claude Code not installed: run `make node-deps` (needs npm)"
)
@pytest.mark.parametrize("endpoint", ["anthropic"], indirect=True)
def test_claude_code_runs_through_factrail_run(endpoint: str, tmp_path: Path) -> None:
    project, token = script_project(endpoint, tmp_path, STEPS)
    home = tmp_path / "home"
    home.mkdir()
    unused = f"http://127.0.0.1:{free_port()}/v1"
    env = offline_env(
        home,
        IS_SANDBOX="1",
        ANTHROPIC_API_KEY="scripted-" + secrets.token_hex(8),
        **gateway_settings(tmp_path, unused, endpoint),
    )
    argv = [str(CLAUDE), "-p", PROMPT, "--output-format", "json", "--dangerously-skip-permissions",
            "--model", CLAUDE_MODEL]  # fmt: skip
    done = factrail_run(argv, project, env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert token in done.stdout
    went_through(done, endpoint, token)
    reported(home / ".claude" / "projects", tmp_path, token)


@pytest.mark.skipif(
    not CODEX.exists(), reason="Codex CLI not installed: run `make node-deps` (needs npm)"
)
@pytest.mark.parametrize("endpoint", ["responses"], indirect=True)
def test_codex_runs_through_factrail_run_with_the_provider_overrides(
    endpoint: str, tmp_path: Path
) -> None:
    project, token = script_project(endpoint, tmp_path, STEPS)
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(f'model = "{CODEX_MODEL}"\n')  # no provider here
    unused = f"http://127.0.0.1:{free_port()}"
    env = {
        "PATH": offline_env(tmp_path)["PATH"],
        "HOME": str(tmp_path),
        "CODEX_HOME": str(codex_home),
        "OPENAI_API_KEY": "scripted-" + secrets.token_hex(8),
        **gateway_settings(tmp_path, f"{endpoint}/v1", unused),
    }
    last = tmp_path / "last-message.txt"
    argv = [str(CODEX), "exec", "--skip-git-repo-check", "--sandbox", "danger-full-access",
            "--output-last-message", str(last), PROMPT]  # fmt: skip
    done = factrail_run(argv, project, env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert token in last.read_text()
    went_through(done, endpoint, token)
    reported(codex_home / "sessions", tmp_path, token)
