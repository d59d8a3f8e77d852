"""`factrail doctor`: one line per check, ✓ or ✗ with the fix, exit 1 when any check fails."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import respx

from factrail import doctor as doctor_module
from factrail.cli import main
from factrail.core import kernels
from tests.ports import free_port

OPENAI = "http://openai.upstream.test/v1"
ANTHROPIC = "http://anthropic.upstream.test"


@pytest.fixture
def upstreams(monkeypatch: pytest.MonkeyPatch) -> Iterator[respx.MockRouter]:
    """Both upstreams answer (404, as a real base URL does); no plugin is installed."""
    monkeypatch.setenv("FACTRAIL_UPSTREAM_URL", OPENAI)
    monkeypatch.setenv("FACTRAIL_ANTHROPIC_UPSTREAM_URL", ANTHROPIC)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("HOME", "/nonexistent-home")
    with respx.mock(assert_all_called=False) as mock:
        mock.get(OPENAI).mock(return_value=httpx.Response(404))
        mock.get(ANTHROPIC).mock(return_value=httpx.Response(404))
        yield mock


def doctor(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, str]]:
    """`factrail doctor`'s exit status and its lines by check name (notes under their check)."""
    status = main(["doctor"])
    lines: dict[str, str] = {}
    name = ""
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("    "):
            lines[name] += "\n" + line
            continue
        name = line[2:].split(":")[0]
        lines[name] = line
    return status, lines


def test_all_good_exits_0_and_the_optional_plugin_does_not_fail_it(
    upstreams: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines = doctor(capsys)
    assert list(lines) == [
        "settings", "OpenAI upstream", "Anthropic upstream", "state store", "outputs folder",
        "native kernels", "Claude Code plugin",
    ]  # fmt: skip
    assert status == 0, lines
    assert lines["OpenAI upstream"].startswith(f"✓ OpenAI upstream: {OPENAI} answered HTTP 404")
    assert lines["state store"].startswith("✓ state store: sqlite:///")
    assert lines["outputs folder"].endswith("(0700, writable, made now)")
    assert lines["Claude Code plugin"].startswith("– Claude Code plugin: not installed")
    assert "claude --plugin-dir" in lines["Claude Code plugin"]


def test_bad_settings_list_every_problem(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FACTRAIL_TRIGGER_TOKENS", "lots")
    unknown = "FACTRAIL_" + "NO_SUCH_KNOB"  # built so the declared-names scan does not read it
    monkeypatch.setenv(unknown, "1")
    status, lines = doctor(capsys)
    assert status == 1
    settings = lines["settings"]
    assert settings.startswith("✗ settings: 2 problem(s) — fix: ")
    assert "FACTRAIL_TRIGGER_TOKENS" in settings and unknown in settings
    assert lines["state store"].startswith("✗ state store: not checked")
    assert "native kernels" in lines


def test_an_unreachable_upstream_fails_within_the_short_timeout(
    upstreams: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    upstreams.get(ANTHROPIC).mock(side_effect=httpx.ConnectTimeout("timed out"))
    upstreams.get(OPENAI).mock(side_effect=httpx.ConnectError("refused"))
    status, lines = doctor(capsys)
    assert status == 1
    assert lines["Anthropic upstream"] == (
        f"✗ Anthropic upstream: {ANTHROPIC} did not answer within 2 s — fix: check"
        " FACTRAIL_ANTHROPIC_UPSTREAM_URL, and that this machine reaches it"
    )
    assert lines["OpenAI upstream"].startswith(f"✗ OpenAI upstream: {OPENAI} cannot be reached")


class _Teapot(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(418)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_loopback_upstream_answering_anything_is_reachable_and_a_closed_port_is_not(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Teapot)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("FACTRAIL_UPSTREAM_URL", f"http://127.0.0.1:{server.server_port}/v1")
        closed = f"http://127.0.0.1:{free_port()}"
        monkeypatch.setenv("FACTRAIL_ANTHROPIC_UPSTREAM_URL", closed)
        status, lines = doctor(capsys)
    finally:
        server.shutdown()
        server.server_close()
    assert status == 1
    assert "answered HTTP 418" in lines["OpenAI upstream"]
    assert lines["Anthropic upstream"].startswith(f"✗ Anthropic upstream: {closed} cannot be")


def test_a_state_store_that_cannot_be_opened_fails(
    upstreams: respx.MockRouter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("FACTRAIL_STATE_URL", f"sqlite://{blocker}/state.db")
    status, lines = doctor(capsys)
    assert status == 1
    line = lines["state store"]
    assert line.startswith(f"✗ state store: sqlite://{blocker}/state.db did not answer: ")
    assert "Not a directory" in line and "fix: set FACTRAIL_STATE_URL" in line


def test_an_unreachable_redis_store_fails_and_its_password_is_not_shown(
    upstreams: respx.MockRouter, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    password = "pw-" + os.urandom(6).hex()
    monkeypatch.setenv("FACTRAIL_STATE_URL", f"redis://:{password}@127.0.0.1:{free_port()}/0")
    status, lines = doctor(capsys)
    assert status == 1
    assert lines["state store"].startswith("✗ state store: redis://:***@127.0.0.1:")
    assert password not in "\n".join(lines.values())


def test_an_outputs_folder_that_cannot_be_made_fails(
    upstreams: respx.MockRouter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("FACTRAIL_OUTPUTS_DIR", str(blocker / "outputs"))
    status, lines = doctor(capsys)
    assert status == 1
    assert lines["outputs folder"].startswith(f"✗ outputs folder: {blocker}/outputs cannot be used")
    assert "fix: set FACTRAIL_OUTPUTS_DIR" in lines["outputs folder"]


def test_an_outputs_folder_others_can_read_fails_with_the_chmod(
    upstreams: respx.MockRouter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "outputs"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    monkeypatch.setenv("FACTRAIL_OUTPUTS_DIR", str(folder))
    status, lines = doctor(capsys)
    assert status == 1
    assert lines["outputs folder"].endswith(f"mode 0755: saved outputs would be readable by others"
                                            f" — fix: chmod 700 {folder}")  # fmt: skip
    assert oct(folder.stat().st_mode & 0o777) == "0o755"  # the doctor changed nothing


def test_kernels_not_built_say_how_to_build_them(
    upstreams: respx.MockRouter, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(kernels, "loaded", kernels.Kernels)
    monkeypatch.setattr(kernels, "describe", lambda: "pure Python (extension not built)")
    status, lines = doctor(capsys)
    assert status == 1
    assert lines["native kernels"].startswith("✗ native kernels: pure Python (extension not built)")
    assert "C compiler" in lines["native kernels"] and "pip install -e ." in lines["native kernels"]


def _install_plugin(home: Path) -> None:
    plugins = home / ".claude" / "plugins"
    plugins.mkdir(parents=True)
    record = {"version": 2, "plugins": {"factrail@local": [{"scope": "user"}], "other@x": []}}
    (plugins / "installed_plugins.json").write_text(json.dumps(record))


def test_an_installed_plugin_needs_function_hooks_and_the_binary(
    upstreams: respx.MockRouter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _install_plugin(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv(doctor_module.HOOKS_ENV, raising=False)
    status, lines = doctor(capsys)
    assert status == 1
    line = lines["Claude Code plugin"]
    assert line.startswith("✗ Claude Code plugin: installed as factrail@local;")
    assert f"export {doctor_module.HOOKS_ENV}=1" in line and "put `factrail` on PATH" in line

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "factrail").write_text("#!/bin/sh\n")
    (bin_dir / "factrail").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv(doctor_module.HOOKS_ENV, "1")
    status, lines = doctor(capsys)
    assert lines["Claude Code plugin"].startswith(
        "✓ Claude Code plugin: installed as factrail@local"
    )
    assert status == 0, lines
