"""`factrail hook`: the envelope. One JSON object in, one out; exit 0 whenever an answer was
written; every failure an `"ok": false` answer, never a traceback."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from typing import Any

import pytest

from factrail.cli import main as cli_main
from factrail.hook import main, run_hook


def ask(event: str, request: Any, *, limit: int | None = None) -> dict[str, Any]:
    data = request if isinstance(request, bytes) else json.dumps(request).encode()
    return run_hook(event, data, limit=limit)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", "request is not JSON"),
        (b"not json", "request is not JSON"),
        (b"[1, 2]", "request is not a JSON object"),
        (b'"text"', "request is not a JSON object"),
        (b"{}", "protocol mismatch: this binary speaks 1, the request null"),
        (b'{"protocol": 2}', "protocol mismatch: this binary speaks 1, the request 2"),
        (b'{"protocol": "1"}', 'protocol mismatch: this binary speaks 1, the request "1"'),
        (b'{"protocol": 1.0}', "protocol mismatch"),
        (b'{"protocol": true}', "protocol mismatch"),
    ],
)
@pytest.mark.parametrize("event", ["compact", "turn", "taint", "status"])
def test_malformed_requests_are_refusals(event: str, data: bytes, error: str) -> None:
    body = run_hook(event, data)
    assert body["ok"] is False and body["protocol"] == 1
    assert body["error"].startswith(error)


def test_unknown_event_is_a_refusal() -> None:
    body = ask("summarise", {"protocol": 1})
    assert body == {
        "protocol": 1,
        "ok": False,
        "error": "unknown hook event 'summarise'; expected one of compact, turn, taint, status",
    }


def test_oversize_request_is_a_refusal() -> None:
    body = ask("status", {"protocol": 1, "pad": "x" * 200}, limit=100)
    assert body["ok"] is False and body["error"] == "request too large: over 100 bytes"


def test_a_malformed_message_list_is_a_refusal() -> None:
    for messages, error in (
        ({"role": "user"}, "messages: expected a JSON array"),
        (["x"], "messages: message 0 is not an object"),
        ([{"role": "user", "toolUses": "no"}], "messages: message 0: toolUses must be a list"),
    ):
        body = ask("compact", {"protocol": 1, "messages": messages, "session": {"id": "s"}})
        assert body["ok"] is False and body["error"].startswith(error), body


def test_an_internal_error_is_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    import factrail.hook.turn as turn_module

    def boom(request: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(turn_module, "turn", boom)
    body = ask("turn", {"protocol": 1})
    assert body == {
        "protocol": 1,
        "ok": False,
        "error": "internal error: RuntimeError: disk on fire",
    }


def test_success_carries_the_envelope() -> None:
    body = ask("taint", {"protocol": 1, "tool": "Read", "now": 5})
    assert body == {"taint": None, "protocol": 1, "ok": True}


def test_main_writes_one_line_and_exits_zero_even_when_refusing() -> None:
    out = io.BytesIO()
    assert main("turn", io.BytesIO(b"{oops"), out) == 0
    line = out.getvalue()
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line)["ok"] is False


def test_cli_dispatches_hook(monkeypatch: pytest.MonkeyPatch, capsysbinary: Any) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"protocol": 1}')))
    assert cli_main(["hook", "taint"]) == 0
    assert json.loads(capsysbinary.readouterr().out) == {"taint": None, "protocol": 1, "ok": True}


def test_the_console_script_never_prints_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "factrail", "hook", "compact"],
        input=b'{"protocol": 1, "messages": 7}',
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert json.loads(done.stdout) == {
        "protocol": 1,
        "ok": False,
        "error": "messages: expected a JSON array",
    }
    assert b"Traceback" not in done.stderr
