"""`factrail run -- CLIENT`: a gateway for the run, the client's environment and exit status,
signals passed on, the gateway stopped, one summary line."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from factrail.cli import main
from factrail.launch import (
    Counters,
    client_argv,
    client_env,
    gateway_root,
    parse_counters,
    summary_line,
)
from tests.integration.processes import serve_cli, start_fake, stop
from tests.ports import free_port

SUMMARY = re.compile(
    r"^factrail: (\d+) requests?, (\d+) compactions?, billed (n/a|\d\.\d\d) of sent whole,"
    r" ([\d,]+) tokens saved$",
    re.MULTILINE,
)
CLIENT = """\
import os, sys, httpx
openai, anthropic = os.environ["OPENAI_BASE_URL"], os.environ["ANTHROPIC_BASE_URL"]
chat = httpx.post(openai + "/chat/completions", timeout=30, json={
    "model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
messages = httpx.post(anthropic + "/v1/messages", timeout=30, json={
    "model": "claude-sonnet-4-5", "max_tokens": 8,
    "messages": [{"role": "user", "content": "hi"}]})
print(openai, anthropic, chat.status_code, messages.status_code,
      chat.headers.get("x-factrail"), messages.headers.get("x-factrail"))
sys.exit(3)
"""
SLEEPER = """\
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_DFL)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(60)
"""

METRICS = """\
# TYPE factrail_requests_total counter
factrail_requests_total{route="chat",outcome="passthrough",status_class="2xx"} 10.0
factrail_requests_total{route="messages",outcome="compacted",status_class="2xx"} 4.0
factrail_requests_created{route="chat",outcome="passthrough",status_class="2xx"} 1.7e+09
# TYPE factrail_compactions_total counter
factrail_compactions_total{judge="rules",reason="rules"} 2.0
# TYPE factrail_tokens_saved_total counter
factrail_tokens_saved_total 41230.0
# TYPE factrail_billed_input_tokens_total counter
factrail_billed_input_tokens_total 78000.0
# TYPE factrail_spared_input_tokens_total counter
factrail_spared_input_tokens_total{part="kept_out"} 30000.0
factrail_spared_input_tokens_total{part="rewritten"} 8000.0
"""


def test_the_summary_reads_the_counters_and_prices_the_bill_against_sent_whole() -> None:
    counters = parse_counters(METRICS)
    assert counters == Counters(14, 2, 41230, 78000, 30000, 8000)
    assert summary_line(counters) == (
        "factrail: 14 requests, 2 compactions, billed 0.78 of sent whole, 41,230 tokens saved"
    )
    assert summary_line(counters - counters) == (
        "factrail: 0 requests, 0 compactions, billed n/a of sent whole, 0 tokens saved"
    )
    assert summary_line(Counters(requests=1, compactions=1)).startswith(
        "factrail: 1 request, 1 compaction, billed n/a"
    )


SHADOW_METRICS = (
    METRICS
    + """\
# TYPE factrail_projected_compactions_total counter
factrail_projected_compactions_total 3.0
# TYPE factrail_projected_spared_input_tokens_total counter
factrail_projected_spared_input_tokens_total{part="kept_out"} 26000.0
factrail_projected_spared_input_tokens_total{part="rewritten"} 3600.0
"""
)


def test_in_shadow_mode_the_summary_says_what_it_would_have_billed() -> None:
    counters = parse_counters(SHADOW_METRICS)
    assert (counters.projected_compactions, counters.projected_kept_out) == (3, 26000)
    assert counters.projected_rewritten == 3600
    assert summary_line(counters).endswith(
        "; shadow mode: 3 compactions not sent, would have billed 0.71 of what was sent"
    )  # (78,000 - 26,000 + 3,600) / 78,000


def test_codex_gets_the_provider_overrides_right_after_the_program() -> None:
    root = "http://127.0.0.1:4321"
    argv = client_argv(["/opt/bin/codex", "exec", "hello"], root)
    assert argv[0] == "/opt/bin/codex" and argv[-2:] == ["exec", "hello"]
    pairs = dict(a.split("=", 1) for a in argv[2:-2:2])
    assert argv[1:-2:2] == ["-c"] * 5
    assert pairs == {
        "model_provider": '"factrail"',
        "model_providers.factrail.name": '"factrail"',
        "model_providers.factrail.base_url": f'"{root}/v1"',
        "model_providers.factrail.wire_api": '"responses"',
        "model_providers.factrail.env_key": '"OPENAI_API_KEY"',
    }
    assert client_argv(["claude", "-p", "x"], root) == ["claude", "-p", "x"]
    env = client_env({"PATH": "/bin"}, root)
    assert env["OPENAI_BASE_URL"] == f"{root}/v1" and env["ANTHROPIC_BASE_URL"] == root
    assert gateway_root("http://h:1/v1/") == gateway_root("http://h:1") == "http://h:1"


def test_a_client_not_found_exits_127_before_any_gateway_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--", "no-such-client-anywhere", "--flag"]) == 127
    assert capsys.readouterr().err == "factrail: no-such-client-anywhere: command not found\n"


def test_run_without_a_client_or_with_two_gateways_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run"]) == 2
    assert "name the client to run" in capsys.readouterr().err
    monkeypatch.setenv("FACTRAIL_URL", "http://127.0.0.1:9")
    assert main(["run", "--port", "9", "--", "true"]) == 2
    assert "give only one" in capsys.readouterr().err


@pytest.fixture(scope="module")
def fakes() -> Iterator[tuple[str, str]]:
    """The fake OpenAI and Anthropic upstreams (real processes): their root URLs."""
    openai, openai_proc = start_fake("tests.integration.fake_upstream:app")
    try:
        anthropic, anthropic_proc = start_fake("tests.integration.fake_anthropic:app")
        try:
            yield openai, anthropic
        finally:
            stop(anthropic_proc)
    finally:
        stop(openai_proc)


def run_env(fakes: tuple[str, str], home: Path, **extra: str) -> dict[str, str]:
    openai, anthropic = fakes
    return {
        **os.environ,
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "FACTRAIL_UPSTREAM_URL": f"{openai}/v1",
        "FACTRAIL_ANTHROPIC_UPSTREAM_URL": anthropic,
        **extra,
    }


def factrail_run(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "factrail", "run", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def records(root: str) -> list[dict[str, str]]:
    httpx.get(f"{root}/_records", timeout=10).raise_for_status()
    found: list[dict[str, str]] = httpx.get(f"{root}/_records", timeout=10).json()
    return found


def reset(*roots: str) -> None:
    for root in roots:
        httpx.post(f"{root}/_reset", timeout=10).raise_for_status()


@pytest.mark.integration
def test_a_script_reaches_both_upstreams_through_factrail_and_its_status_comes_back(
    fakes: tuple[str, str], tmp_path: Path
) -> None:
    reset(*fakes)
    client = tmp_path / "client.py"
    client.write_text(CLIENT)
    proc = factrail_run(run_env(fakes, tmp_path), "--", sys.executable, str(client))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    openai_url, anthropic_url, chat, messages, chat_outcome, messages_outcome = out.split()
    port = anthropic_url.rsplit(":", 1)[1]
    assert openai_url == f"http://127.0.0.1:{port}/v1"
    assert (chat, messages) == ("200", "200")
    assert chat_outcome != "None" and messages_outcome != "None"  # factrail answered both
    openai, anthropic = fakes
    assert [r["path"] for r in records(openai)] == ["/v1/chat/completions"]
    assert [r["path"] for r in records(anthropic)] == ["/v1/messages"]
    summary = SUMMARY.search(err)
    assert summary is not None, err
    assert summary[1] == "2" and summary[2] == "0"
    assert err.strip().splitlines()[-1] == summary[0]  # one line, last
    assert list((tmp_path / "cache" / "factrail" / "run").iterdir()) == []  # clean: no log kept
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)


@pytest.mark.integration
def test_with_factrail_url_no_gateway_starts_and_the_summary_counts_the_run_only(
    fakes: tuple[str, str], tmp_path: Path
) -> None:
    reset(*fakes)
    env = run_env(fakes, tmp_path)
    root, gateway = serve_cli(env)
    try:
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "earlier"}]}
        httpx.post(f"{root}/v1/chat/completions", json=body, timeout=30).raise_for_status()
        client = tmp_path / "client.py"
        client.write_text(CLIENT)
        proc = factrail_run({**env, "FACTRAIL_URL": root}, "--", sys.executable, str(client))
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 3, err
        assert out.split()[:2] == [f"{root}/v1", root]
        summary = SUMMARY.search(err)
        assert summary is not None and summary[1] == "2", err
        assert httpx.get(f"{root}/healthz", timeout=5).status_code == 200  # still serving
    finally:
        stop(gateway)
    assert len(records(fakes[0])) == 2


def start_sleeper(
    fakes: tuple[str, str], tmp_path: Path, port: int
) -> tuple[subprocess.Popen[str], int]:
    """`factrail run --port port -- <a client that sleeps>`, once the client runs: the process
    and the client's pid."""
    started = tmp_path / "started"
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(SLEEPER)
    command = ["--port", str(port), "--", sys.executable, str(sleeper), str(started)]
    proc = factrail_run(run_env(fakes, tmp_path), *command)
    deadline = time.monotonic() + 40
    while not started.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(proc.communicate())
        time.sleep(0.05)
    return proc, int(started.read_text())


def answers(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
    except httpx.TransportError:
        return False
    return True


@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_reaches_the_client_and_the_gateway_is_stopped(
    fakes: tuple[str, str], tmp_path: Path, sig: signal.Signals
) -> None:
    port = free_port()
    proc, _ = start_sleeper(fakes, tmp_path, port)
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err
    assert SUMMARY.search(err) is not None, err
    assert not answers(port)


@pytest.mark.integration
@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_the_gateway_does_not_outlive_a_killed_run(fakes: tuple[str, str], tmp_path: Path) -> None:
    port = free_port()
    proc, client = start_sleeper(fakes, tmp_path, port)
    try:
        assert answers(port)
        proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 20
        while answers(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not answers(port)
    finally:
        os.kill(client, signal.SIGKILL)  # the orphaned client: nothing signals it now
        proc.communicate(timeout=10)


@pytest.mark.integration
def test_a_gateway_that_cannot_start_is_reported_with_its_log(
    fakes: tuple[str, str], tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = factrail_run(run_env(fakes, tmp_path), "--port", str(port), "--", "true")
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    first = err.splitlines()[0]
    assert re.match(r"factrail: the gateway exited with status [1-9]\d*; its log: ", first), err
    log = Path(first.rsplit(": ", 1)[1])
    assert log.is_file() and "address already in use" in log.read_text()
    assert "address already in use" in err  # its last lines are shown


def test_the_codex_overrides_are_valid_toml() -> None:
    import tomllib

    argv = client_argv(["codex"], "http://127.0.0.1:1")
    document = "\n".join(a.replace("=", " = ", 1) for a in argv[2::2])
    parsed = tomllib.loads(document)
    assert parsed["model_providers"]["factrail"]["wire_api"] == "responses"
    assert json.dumps(parsed["model_provider"]) == '"factrail"'
