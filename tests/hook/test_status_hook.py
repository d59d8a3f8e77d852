"""`factrail hook status`: `/factrail on|off|status`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from factrail.hook import run_hook
from factrail.hook.status import switch_command


def status(args: str = "", **fields: Any) -> dict[str, Any]:
    request = {"protocol": 1, "config": {}, "args": args, "store": {}, **fields}
    body = run_hook("status", json.dumps(request).encode())
    assert body["ok"] is True, body
    return body


@pytest.mark.parametrize(
    ("args", "command"),
    [
        ("on", "on"),
        (" OFF ", "off"),
        ("enable", "on"),
        ("0", "off"),
        ("", "status"),
        ("status", "status"),
        ("maybe", "help"),
    ],
)
def test_switch_words(args: str, command: str) -> None:
    assert switch_command(args) == command


def test_on_and_off_write_the_switch() -> None:
    off = status("off")
    assert off["store"] == {"enabled": False}
    assert off["text"].startswith("factrail 0.1.0: OFF (saved)")
    assert "built-in summary (switched off)" in off["text"]
    on = status("on", store={"enabled": False})
    assert on["store"] == {"enabled": True} and ": ON (saved)" in on["text"]


def test_status_reports_without_writing() -> None:
    body = status(
        "status",
        store={
            "enabled": None,
            "taint": {"tainted": True, "count": 2, "sample": ["m"]},
            "last": "factrail: kept 3/4",
        },
        usage={"tokens": 123_000, "window": 200_000},
    )
    assert body["store"] == {"enabled": None}
    text = body["text"]
    assert "trigger at 120k tokens" in text and "context now 123k" in text
    assert "compacted by the rules (no model; nothing leaves)" in text
    assert "session tainted: 2 call(s): m" in text
    assert "last outcome: factrail: kept 3/4" in text
    assert "usage:" not in text


def test_help_adds_the_usage_line() -> None:
    assert status("maybe")["text"].endswith("usage: /factrail on | off | status")


def test_a_fenced_session_and_a_remote_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FACTRAIL_JUDGE_API_KEY", "k" * 20)
    config = {"backend": "tev", "baseUrl": "http://127.0.0.1:9/v1"}
    tools = [{"tool": "mcp__email-gateway__ask", "skill": None}]
    text = status(config=config, tools=tools)["text"]
    assert "compacted by the rules, no model (tainted: 1 call(s): mcp__email-gateway__ask)" in text
    assert "NON-LOCAL" in text
    # the request alone never declares the judge local
    assert "NON-LOCAL" in status(config={**config, "backendLocal": True}, tools=tools)["text"]
    monkeypatch.setenv("FACTRAIL_JUDGE", "tev")
    monkeypatch.setenv("FACTRAIL_JUDGE_URL", config["baseUrl"])
    monkeypatch.setenv("FACTRAIL_JUDGE_LOCAL", "true")
    local = status(config={**config, "backendLocal": True}, tools=tools)["text"]
    assert "judged by tev (ok-local)" in local and "declared LOCAL" in local
    # the request may withdraw the declaration, and cannot move it to another URL
    assert "NON-LOCAL" in status(config={**config, "backendLocal": False}, tools=tools)["text"]
    moved = {**config, "baseUrl": "http://127.0.0.2:9/v1", "backendLocal": True}
    assert "NON-LOCAL" in status(config=moved, tools=tools)["text"]
