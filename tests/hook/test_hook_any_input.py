"""`factrail hook` answers exactly one JSON object, exit 0, for any input whatever: numbers of any
size (past 64 bits, `1e400`, `NaN`), any nesting, any JSON type, invalid UTF-8, nothing at all,
and settings that may not be used."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import respx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factrail.hook import EVENTS, main

EVENT_NAMES = (*EVENTS, "bogus")
HUGE = st.sampled_from([2**64, 10**30, -(2**70), 2**53 + 1, 10**400, 1e308, -0.0])
NUMBERS = st.integers() | HUGE | st.floats(allow_nan=True, allow_infinity=True)
SCALARS = st.none() | st.booleans() | NUMBERS | st.text(max_size=20)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
OPTIONS = (
    "backend",
    "baseUrl",
    "backendLocal",
    "egress",
    "keepThreshold",
    "preserveRecentMessages",
    "compactAtTokens",
    "compactAtPercent",
    "compactionTimeoutMs",
    "taintTools",
    "taintSkills",
    "cacheWarm",
    "cacheTtlSeconds",
    "cacheWarmFloorTokens",
    "enabledByDefault",
    "fallback",
)
FIELDS = (
    "now",
    "usage",
    "tools",
    "tool",
    "skill",
    "store",
    "session",
    "messages",
    "baseline",
    "rateLimits",
    "event",
    "args",
    "instructions",
    "hasApiKey",
)
TOOL_NAMES = st.sampled_from(["mcp__claude_ai_Gmail__search", "Read", "Skill"]) | VALUES
REQUESTS = st.fixed_dictionaries(
    {
        "protocol": st.just(1),
        "now": HUGE | NUMBERS | VALUES,
        "tool": TOOL_NAMES,
        "tools": st.lists(st.fixed_dictionaries({"tool": TOOL_NAMES}), max_size=3) | VALUES,
    },
    optional={
        "config": st.dictionaries(st.sampled_from(OPTIONS), VALUES, max_size=6),
        **{name: VALUES for name in FIELDS if name not in ("now", "tool", "tools")},
        "usage": st.fixed_dictionaries(
            {}, optional={"tokens": NUMBERS, "window": NUMBERS, "percent": NUMBERS}
        ),
        "baseline": st.fixed_dictionaries({}, optional={"tokens": NUMBERS, "at": NUMBERS}),
        "store": st.fixed_dictionaries(
            {}, optional={"taint": VALUES, "enabled": VALUES, "last": VALUES}
        ),
        "messages": st.just([]) | VALUES,
    },
)
NESTED = [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    b'{"protocol": 1, "config": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"protocol": 1, "config": {"x": ' + b"[" * 900 + b"]" * 900 + b"}}",
]
ODD = [
    b"",
    b"\n",
    b"\xff\xfe\x00",
    b'{"protocol": 1, "now": "\xc3\x28"}',
    b"[]",
    b"null",
    b"1e400",
    b"NaN",
    b'{"protocol": 1, "now": 1e400}',
    b'{"protocol": 1, "now": NaN}',
    b'{"protocol": 1, "now": 100000000000000000000000000000}',
    b'{"protocol": 1, "tool": "\\ud800"}',
    b'{"protocol": 1, "tool": "mcp__claude_ai_Gmail__x", "now": 1e30}',
    b'{"protocol": 1, "tool": "mcp__claude_ai_Gmail__x", "now": 18446744073709551616}',
    b'{"protocol": 1, "usage": {"tokens": 1e300, "window": 1e300}, "baseline": {"tokens": 1e30}}',
    b'{"protocol": 1, "config": {"compactAtTokens": 1e30, "cacheTtlSeconds": 1e300}}',
]
seen: list[bytes] = []


def encoded(request: Any) -> bytes:
    """JSON as a client might write it: big integers whole, NaN and Infinity as Python spells
    them (not JSON, and read as such)."""
    return json.dumps(request).encode()


def answered(event: str, data: bytes) -> dict[str, Any]:
    """The one answer `factrail hook EVENT` writes for `data`, checked to be one JSON object."""
    sink = io.BytesIO()
    assert main(event, io.BytesIO(data), sink) == 0
    out = sink.getvalue()
    assert out.endswith(b"\n") and out.count(b"\n") == 1, out[:200]
    body = orjson.loads(out)
    assert isinstance(body, dict) and body["protocol"] == 1 and isinstance(body["ok"], bool)
    assert body["ok"] or isinstance(body["error"], str)
    seen.append(data)
    return body


@pytest.fixture(autouse=True)
def no_judge_reached(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Nothing leaves the process: every HTTP call answers 500 at once."""
    monkeypatch.setenv("FACTRAIL_JUDGE_DEADLINE_MS", "200")
    with respx.mock(assert_all_called=False) as router:
        router.route().mock(return_value=httpx.Response(500))
        yield


FUZZ = settings(
    max_examples=150,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(event=st.sampled_from(EVENT_NAMES), request=REQUESTS)
def test_any_request_gets_one_json_answer(event: str, request: dict[str, Any]) -> None:
    answered(event, encoded(request))


@FUZZ
@given(event=st.sampled_from(EVENT_NAMES), value=VALUES)
def test_any_json_value_gets_one_json_answer(event: str, value: Any) -> None:
    body = answered(event, encoded(value))
    assert body["ok"] is False  # no protocol field: a refusal


@FUZZ
@given(event=st.sampled_from(EVENT_NAMES), data=st.binary(max_size=64))
def test_any_bytes_get_one_json_answer(event: str, data: bytes) -> None:
    answered(event, data)


@pytest.mark.parametrize("data", NESTED + ODD)
@pytest.mark.parametrize("event", EVENT_NAMES)
def test_odd_inputs_get_one_json_answer(event: str, data: bytes) -> None:
    answered(event, data)


def test_a_huge_now_is_the_clock_and_a_huge_count_is_absent() -> None:
    tool = "mcp__claude_ai_Gmail__search"
    for now in ("1e30", str(10**30), str(2**64)):
        data = f'{{"protocol": 1, "tool": "{tool}", "now": {now}}}'.encode()
        body = answered("taint", data)
        assert body["ok"] is True and 0 < body["taint"]["at"] < 2**53


def test_bad_settings_are_a_refusal_that_names_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FACTRAIL_EGRESS", "Full")
    for event in EVENT_NAMES:
        body = answered(event, b'{"protocol": 1, "messages": []}')
        assert body == {
            "protocol": 1,
            "ok": False,
            "error": "settings: FACTRAIL_EGRESS='Full' is not allowed: one of full, metadata",
        }


def test_a_fence_list_option_that_cannot_be_read_is_a_refusal() -> None:
    request = {"protocol": 1, "tool": "mcp__crm__x", "config": {"taintTools": "mcp__crm__;x"}}
    body = answered("taint", encoded(request))
    assert body["ok"] is False and body["error"].startswith("config.taintTools: ';' does not")


@pytest.mark.parametrize(
    ("event", "data", "env"),
    [
        ("taint", ODD[-3], {}),
        ("compact", NESTED[0], {}),
        ("turn", b"\xff\xfe", {}),
        ("status", b"", {}),
        ("compact", b'{"protocol": 1, "now": 1e400}', {}),
        ("compact", b'{"protocol": 1, "messages": []}', {"FACTRAIL_TAINT_TOOL": "mcp__crm__"}),
    ],
)
def test_the_console_script_answers_once_without_a_traceback(
    event: str, data: bytes, env: dict[str, str]
) -> None:
    import os

    done = subprocess.run(
        [sys.executable, "-m", "factrail", "hook", event],
        input=data,
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stdout.count(b"\n") == 1 and isinstance(orjson.loads(done.stdout), dict)
    seen.append(data)


def test_report_how_many_inputs_were_answered(capsys: pytest.CaptureFixture[str]) -> None:
    """How many inputs this file fed the hook (printed with `-s`)."""
    with capsys.disabled():
        print(f"\nhook inputs answered with one JSON object: {len(seen)} of {len(seen)}")
