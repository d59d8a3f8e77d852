"""`factrail serve` refuses settings that may not be used: exit status 2 and one line on stderr
naming the variable (never a secret's value), for every case below, run as the real command."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sv-" + "w4" * 3
"""A secret-shaped value, built at run time: it must never appear in what serve prints."""


@dataclass(frozen=True)
class Case:
    """One refused setting: the environment, what its line must show, the serve flags."""

    env: dict[str, str]
    shows: str
    args: tuple[str, ...] = ()


def cases(tmp: Path) -> dict[str, Case]:
    broken = tmp / "broken.toml"
    broken.write_text("[factrail\negress = 'full'\n", encoding="utf-8")
    unknown = tmp / "unknown.toml"
    unknown.write_text("[factrail]\ntaint_tool = ['mcp__crm__']\n", encoding="utf-8")
    malformed = tmp / "malformed.toml"
    malformed.write_text("[factrail]\negress = 'Full'\n", encoding="utf-8")
    fifo = tmp / "fifo.toml"
    os.mkfifo(fifo)
    holding = tmp / "holding.toml"
    holding.write_text(f"[factrail.judge]\napi_key = '{SECRET}'\n", encoding="utf-8")
    return {
        "egress upper case": Case({"FACTRAIL_EGRESS": "Full"}, "FACTRAIL_EGRESS='Full'"),
        "egress leading space": Case({"FACTRAIL_EGRESS": " full"}, "FACTRAIL_EGRESS=' full'"),
        "egress typo": Case({"FACTRAIL_EGRESS": "metdata"}, "FACTRAIL_EGRESS"),
        "egress none": Case({"FACTRAIL_EGRESS": "none"}, "FACTRAIL_EGRESS"),
        "list with ;": Case(
            {"FACTRAIL_TAINT_TOOLS": "mcp__crm__;mcp__hr__"}, "FACTRAIL_TAINT_TOOLS"
        ),
        "list with |": Case({"FACTRAIL_TAINT_SKILLS": "email-search|crm"}, "FACTRAIL_TAINT_SKILLS"),
        "list with spaces": Case(
            {"FACTRAIL_TAINT_TOOLS": "mcp__crm__ mcp__hr__"}, "FACTRAIL_TAINT_TOOLS"
        ),
        "broken JSON list": Case({"FACTRAIL_TAINT_TOOLS": '["mcp__crm__"'}, "FACTRAIL_TAINT_TOOLS"),
        "JSON list of numbers": Case({"FACTRAIL_KEEP_TOOLS": "[1]"}, "FACTRAIL_KEEP_TOOLS"),
        "misspelled name": Case({"FACTRAIL_TAINT_TOOL": "mcp__crm__"}, "FACTRAIL_TAINT_TOOLS?"),
        "lower-case name": Case({"factrail_egress": "metadata"}, "FACTRAIL_EGRESS?"),
        "misspelled secret": Case({"FACTRAIL_ADMIN_KEYS": SECRET}, "FACTRAIL_ADMIN_KEYS=<hidden>"),
        "missing config": Case({"FACTRAIL_CONFIG": str(tmp / "none.toml")}, "FACTRAIL_CONFIG"),
        "config not TOML": Case({"FACTRAIL_CONFIG": str(broken)}, "FACTRAIL_CONFIG"),
        "config unknown key": Case({"FACTRAIL_CONFIG": str(unknown)}, "taint_tool"),
        "config bad value": Case({"FACTRAIL_CONFIG": str(malformed)}, "egress='Full'"),
        "judge typo": Case({"FACTRAIL_JUDGE": "tevv"}, "FACTRAIL_JUDGE='tevv'"),
        "tev without URL": Case({"FACTRAIL_JUDGE": "tev"}, "FACTRAIL_JUDGE_URL"),
        "judge_local word": Case({"FACTRAIL_JUDGE_LOCAL": "maybe"}, "FACTRAIL_JUDGE_LOCAL"),
        "judge key spaces": Case(
            {"FACTRAIL_JUDGE_API_KEY": f" {SECRET}"}, "FACTRAIL_JUDGE_API_KEY"
        ),
        "short outputs secret": Case(
            {"FACTRAIL_OUTPUTS_SECRET": SECRET}, "FACTRAIL_OUTPUTS_SECRET"
        ),
        "public bind no key": Case({}, "FACTRAIL_ADMIN_KEY=''", ("--host", "0.0.0.0")),
        "public bind short key": Case(
            {"FACTRAIL_ADMIN_KEY": SECRET}, "FACTRAIL_ADMIN_KEY=<hidden>", ("--host", "0.0.0.0")
        ),
        "keep threshold 7": Case({"FACTRAIL_KEEP_THRESHOLD": "7"}, "FACTRAIL_KEEP_THRESHOLD"),
        "negative trigger": Case({"FACTRAIL_TRIGGER_TOKENS": "-5"}, "FACTRAIL_TRIGGER_TOKENS"),
        "NaN percent": Case({"FACTRAIL_TRIGGER_PERCENT": "nan"}, "FACTRAIL_TRIGGER_PERCENT"),
        "bool as number": Case({"FACTRAIL_MAX_BODY_BYTES": "true"}, "FACTRAIL_MAX_BODY_BYTES"),
        "relative SQLite": Case({"FACTRAIL_STATE_URL": "sqlite://state.db"}, "FACTRAIL_STATE_URL"),
        "URL without scheme": Case(
            {"FACTRAIL_UPSTREAM_URL": "api.openai.com"}, "FACTRAIL_UPSTREAM_URL"
        ),
        "price read > write": Case(
            {"FACTRAIL_MODEL_PRICES": '{"x": {"cached": 2, "write": 1}}'}, "FACTRAIL_MODEL_PRICES"
        ),
        "window 0": Case({"FACTRAIL_CONTEXT_WINDOWS": '{"gpt-9": 0}'}, "FACTRAIL_CONTEXT_WINDOWS"),
        "pure python yes": Case({"FACTRAIL_PURE_PYTHON": "yes"}, "FACTRAIL_PURE_PYTHON"),
        "log level word": Case({"FACTRAIL_LOG_LEVEL": "loud"}, "FACTRAIL_LOG_LEVEL"),
        "boolean upper case": Case(
            {"FACTRAIL_RECORD_DECISIONS": "FALSE"}, "FACTRAIL_RECORD_DECISIONS='FALSE'"
        ),
        "boolean word": Case({"FACTRAIL_CACHE_MARK": "off"}, "FACTRAIL_CACHE_MARK='off'"),
        "digits grouped": Case({"FACTRAIL_MAX_BODY_BYTES": "1_000"}, "FACTRAIL_MAX_BODY_BYTES"),
        "list with a full-width semicolon": Case(
            {"FACTRAIL_TAINT_TOOLS": "mcp__crm__\uff1bmcp__hr__"}, "FACTRAIL_TAINT_TOOLS"
        ),
        "config is a FIFO": Case({"FACTRAIL_CONFIG": str(fifo)}, "not a regular file"),
        "config table holding a key": Case({"FACTRAIL_CONFIG": str(holding)}, "judge=<a table>"),
        "prefix misspelled": Case({"FACTRAIL" + "-JUDGE": "tev"}, "FACTRAIL_JUDGE?"),
        "secret in a URL query": Case(
            {"FACTRAIL_JUDGE_URL": f"https://j.example/v1?key={SECRET} "}, "?<hidden> '"
        ),
        "admin key not ASCII": Case({"FACTRAIL_ADMIN_KEY": "\uff4b" * 16}, "FACTRAIL_ADMIN_KEY"),
    }


def serve(case: Case) -> subprocess.CompletedProcess[str] | None:
    """`factrail serve` with the case's settings; None when it was still running (served)."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("FACTRAIL_")}
    argv = [sys.executable, "-m", "factrail", "serve", "--port", str(free_port()), *case.args]
    try:
        return subprocess.run(
            argv,
            env={**env, **case.env},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None


def refused(case: Case, done: subprocess.CompletedProcess[str] | None) -> bool:
    if done is None or done.returncode != 2 or SECRET in done.stderr + done.stdout:
        return False
    lines = done.stderr.splitlines()
    return len(lines) == 1 and lines[0].startswith("factrail: ") and case.shows in lines[0]


def test_serve_refuses_every_case_with_one_line(tmp_path: Path) -> None:
    table = cases(tmp_path)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(table, pool.map(serve, table.values()), strict=True))
    missed = {
        name: (done.returncode, done.stderr[-500:]) if done else "served"
        for name, done in results.items()
        if not refused(table[name], done)
    }
    count = len(table) - len(missed)
    print(f"\nsettings cases refused: {count} of {len(table)}")
    assert not missed, missed


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_settings_check_says_the_same_without_serving(tmp_path: Path, host: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("FACTRAIL_")}
    env |= {"FACTRAIL_EGRESS": "Full", "FACTRAIL_TAINT_TOOL": "x", "FACTRAIL_ADMIN_KEY": SECRET}
    done = subprocess.run(
        [sys.executable, "-m", "factrail", "settings", "--check", "--host", host],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == "" and SECRET not in done.stderr
    assert done.stderr.splitlines() == [
        "factrail: FACTRAIL_TAINT_TOOL=<hidden> is not a setting: did you mean"
        " FACTRAIL_TAINT_TOOLS?",
        "factrail: FACTRAIL_EGRESS='Full' is not allowed: one of full, metadata",
    ]
