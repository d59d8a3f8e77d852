"""The environment's judge key goes only to the judge URL the settings name, and only the settings
declare a judge local: a request's `config` naming another URL or backend gets no key, and a
fenced transcript never reaches it, whatever `backendLocal` says."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from factrail.hook import run_hook
from tests.hook.transcripts import session

TEV = "http://tev.test/v1"
OTHER = "http://elsewhere.test/v1"
EMAIL = "mcp__email-gateway__ask_email"
TAINTED = {"tainted": True, "count": 1, "sample": [EMAIL], "at": 1}
KEY = "tv-" + "q7" * 14


def compact(sid: str, config: dict[str, Any], taint: Any = None) -> dict[str, Any]:
    request = {
        "protocol": 1,
        "config": {"compactAtTokens": 40_000, "compactAtPercent": 60, **config},
        "session": {"id": sid, "cwd": "/w", "trigger": "manual", "agentId": None},
        "messages": session(),
        "usage": {"tokens": 70_000, "window": 200_000},
        "store": {"enabled": None, "taint": taint},
        "now": 1_800_000_000_000,
    }
    body = run_hook("compact", json.dumps(request).encode())
    assert body["ok"] is True, body
    return body


def carries_key(request: httpx.Request) -> bool:
    headers = " ".join(f"{k}: {v}" for k, v in request.headers.items())
    return KEY in headers or KEY.encode() in request.content or KEY in str(request.url)


@pytest.fixture
def router(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The settings declare a local Tev judge at `TEV` with a key; every HTTP call is caught."""
    monkeypatch.setenv("FACTRAIL_JUDGE", "tev")
    monkeypatch.setenv("FACTRAIL_JUDGE_URL", TEV)
    monkeypatch.setenv("FACTRAIL_JUDGE_LOCAL", "true")
    monkeypatch.setenv("FACTRAIL_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("FACTRAIL_JUDGE_DEADLINE_MS", "2000")
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as mock:
        mock.route().mock(return_value=httpx.Response(500, json={"error": "no"}))
        yield mock


@pytest.mark.parametrize("local", [True, "true", None])
def test_another_url_gets_no_key_and_no_fenced_transcript(router: Any, local: Any) -> None:
    config: dict[str, Any] = {"backend": "tev", "baseUrl": OTHER}
    if local is not None:
        config["backendLocal"] = local
    fenced = compact(f"fenced-{local}", config, TAINTED)
    assert fenced["reason"] == "rules:tainted"
    assert router.calls.call_count == 0  # the fenced transcript reached no judge at all
    clean = compact(f"clean-{local}", config)
    assert clean["action"] == "install"
    sent = [call.request for call in router.calls]
    assert sent and all(str(r.url).startswith(OTHER) for r in sent)  # a remote judge, keyless
    assert not any(carries_key(r) for r in sent)


def test_another_backend_at_the_same_host_gets_no_key(
    router: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FACTRAIL_JUDGE", "systemone")
    monkeypatch.setenv("FACTRAIL_JUDGE_URL", f"{TEV}/systemone")
    fenced = compact("s1-fenced", {"backend": "tev", "baseUrl": TEV, "backendLocal": True}, TAINTED)
    assert fenced["reason"] == "rules:tainted" and router.calls.call_count == 0
    compact("s1-clean", {"backend": "tev", "baseUrl": TEV})
    assert router.calls.call_count > 0
    assert not any(carries_key(call.request) for call in router.calls)


def test_the_settings_own_judge_gets_its_key_and_may_be_local(router: Any) -> None:
    body = compact("own", {"backend": "tev", "baseUrl": TEV + "/", "backendLocal": True}, TAINTED)
    assert body["reason"] == "ok-rules"  # reached (it answers 500 here), so the rules finished
    sent = [call.request for call in router.calls]
    assert sent and all(str(r.url).startswith(TEV) for r in sent)
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in sent)


def test_the_request_may_withdraw_locality_but_never_add_it(
    router: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    withdrawn = compact("withdrawn", {"backendLocal": False}, TAINTED)
    assert withdrawn["reason"] == "rules:tainted" and router.calls.call_count == 0
    monkeypatch.setenv("FACTRAIL_JUDGE_LOCAL", "false")
    claimed = compact("claimed", {"backend": "tev", "baseUrl": TEV, "backendLocal": True}, TAINTED)
    assert claimed["reason"] == "rules:tainted" and router.calls.call_count == 0
