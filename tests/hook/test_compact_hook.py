"""`factrail hook compact`: the gateway's step over Claude Code's transcript, answered as an
install (`{"keep": i}` for untouched messages), a hand-over to the built-in summary, or a skip."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from factrail.hook import run_hook
from factrail.hook.compact import state_key
from factrail.stores import open_state_store, state_url
from tests.hook.transcripts import session

NOW = 1_800_000_000_000
CONFIG = {"compactAtTokens": 40_000, "compactAtPercent": 60}
TEV = "http://tev.test/v1"
EMAIL = "mcp__email-gateway__ask_email"


def compact(messages: list[dict[str, Any]], trigger: str = "manual", **fields: Any) -> Any:
    request: dict[str, Any] = {
        "protocol": 1,
        "config": CONFIG,
        "session": {"id": "sess-1", "cwd": "/w", "trigger": trigger, "agentId": None},
        "instructions": None,
        "messages": messages,
        "usage": {"tokens": 70_000, "window": 200_000},
        "store": {"enabled": None, "taint": None},
        "now": NOW,
    }
    request.update(fields)
    body = run_hook("compact", json.dumps(request).encode())
    assert body["ok"] is True, body
    return body


def rebuilt(sent: list[dict[str, Any]], answer: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcript the plugin installs: `keep` entries are the sent messages themselves."""
    return [sent[m["keep"]] if "keep" in m else m for m in answer]


def test_install_keeps_what_was_written_and_reduces_old_results() -> None:
    sent = session()
    body = compact(copy.deepcopy(sent))
    assert body["action"] == "install" and body["reason"] == "rules"
    assert body["toast"] is True  # a manual /compact says what it did
    answer = body["messages"]
    assert len(answer) == len(sent)
    keeps = [m["keep"] for m in answer if "keep" in m]
    assert keeps == sorted(keeps) and all(answer[k] == {"keep": k} for k in keeps)
    after = rebuilt(sent, answer)
    for before, now in zip(sent, after, strict=True):
        assert now["role"] == before["role"] and now["text"] == before["text"]
        assert [u["input"] for u in now["toolUses"]] == [u["input"] for u in before["toolUses"]]
        if "keep" not in answer[sent.index(before)]:
            assert "handle" not in now  # a built message carries none
    reduced = [
        r for m in after for r in m.get("toolResults", []) if "[factrail omitted" in r["text"]
    ]
    assert len(reduced) >= 10
    assert any("re-run" in r["text"] or "reproducible" in r["text"] for r in reduced)
    assert any("FAILED tests/test_mod0.py::test_edge" in r["text"] for r in reduced)
    assert body["store"]["last"] == body["log"] and body["log"].startswith("factrail: kept ")
    # the pinned tail and message 0 stay untouched
    assert answer[0] == {"keep": 0} and answer[-1] == {"keep": len(sent) - 1}


def test_saved_outputs_are_named_in_the_notes(tmp_path: Path) -> None:
    body = compact(session())
    notes = [
        r["text"] for m in body["messages"] if "keep" not in m for r in m.get("toolResults", [])
    ]
    assert any("factrail outputs get " in t for t in notes)
    off = compact(
        session(),
        config={**CONFIG, "saveFullOutputs": False},
        session={"id": "sess-2", "trigger": "manual"},
    )
    notes = [
        r["text"] for m in off["messages"] if "keep" not in m for r in m.get("toolResults", [])
    ]
    assert not any("factrail outputs get " in t for t in notes)


def test_a_second_compaction_leaves_the_first_ones_decisions_alone() -> None:
    sent = session()
    first = rebuilt(sent, compact(copy.deepcopy(sent))["messages"])
    for n, m in enumerate(first):
        m["handle"] = f"g{n}"
    grown = first[:-1] + session(6)[1:]  # the session went on
    for n, m in enumerate(grown):
        m["handle"] = f"g{n}"
    second = compact(grown, trigger="auto")
    assert second["action"] == "install"
    # every result the first compaction reduced comes back untouched
    for i, m in enumerate(grown[: len(first) - 1]):
        if any("[factrail omitted" in r["text"] for r in m.get("toolResults", [])):
            assert second["messages"][i] == {"keep": i}


def test_scope_and_switch() -> None:
    sub = compact(session(), agentId=None, session={"id": "s", "trigger": "auto", "agentId": "a1"})
    assert (sub["action"], sub["reason"], sub["toast"]) == ("builtin", "subagent", False)
    pre = compact(session(), trigger="precompute")
    assert (pre["action"], pre["reason"]) == ("skip", "precompute")
    assert pre["store"]["last"] is None and "messages" not in pre
    off = compact(session(), store={"enabled": False})
    assert (off["action"], off["reason"]) == ("builtin", "switched-off")
    off = compact(session(), config={**CONFIG, "enabledByDefault": False})
    assert off["reason"] == "switched-off"


def test_nothing_to_reduce_hands_over_to_the_builtin_summary() -> None:
    tiny = session(1)  # its one call is among the pinned newest messages
    body = compact(tiny, usage={"tokens": 900, "window": 200_000})
    assert (body["action"], body["reason"]) == ("builtin", "below-gate")


def test_a_plugin_compaction_short_of_the_danger_line_must_pay_back() -> None:
    # the plugin's own compaction (its turn check said due) follows the gateway's cost rule:
    # on a warm cache, a young session's compaction does not pay back what it breaks
    young = session(8)
    body = compact(young, trigger="plugin", usage={"tokens": 36_000, "window": 1_000_000})
    assert (body["action"], body["reason"]) == ("skip", "declined")
    assert body["store"]["baseline"] == {"tokens": 36_000, "at": NOW}
    # the cache-warm nudge's compaction lands as the cache goes cold: free
    warm = compact(
        young,
        trigger="plugin",
        usage={"tokens": 36_000, "window": 1_000_000},
        session={"id": "sess-1", "trigger": "plugin", "cause": "cache-warm"},
    )
    assert warm["action"] == "install"


def test_the_one_hour_cache_the_options_name_prices_a_plugin_compaction_s_writes_at_2x() -> None:
    """`cacheTtlSeconds: 3600` (a subscription's cache): Anthropic writes its one-hour entries at
    twice the input price, so a compaction that pays back at 1.25 does not; the nudge, which
    fires as that hour runs out, still finds the cache cold."""
    sixteen = session(16)
    usage = {"tokens": 36_000, "window": 1_000_000}
    five = compact(sixteen, trigger="plugin", usage=usage)
    assert five["action"] == "install"
    hour = {**CONFIG, "cacheTtlSeconds": 3600}
    plugin = {"id": "sess-2", "trigger": "plugin"}
    held = compact(sixteen, trigger="plugin", usage=usage, config=hour, session=plugin)
    assert (held["action"], held["reason"]) == ("skip", "declined")
    nudged = {**plugin, "id": "sess-3", "cause": "cache-warm"}
    warm = compact(sixteen, trigger="plugin", usage=usage, config=hour, session=nudged)
    assert warm["action"] == "install"


def test_the_session_s_model_prices_a_plugin_compaction() -> None:
    """Claude Code names the session's model (`$.session.model()`): on Fable 5.1, whose cache
    reads cost 0.025 of input, the compaction that pays back at Opus 5's 0.1 does not; a
    plugin that names no model is priced as Anthropic's default."""
    sixteen = session(16)
    usage = {"tokens": 36_000, "window": 1_000_000}

    def on(model: str | None, sid: str) -> Any:
        named = {"id": sid, "trigger": "plugin", "model": model}
        return compact(sixteen, trigger="plugin", usage=usage, session=named)

    assert on("claude-opus-5", "opus")["action"] == "install"
    assert on(None, "unnamed")["action"] == "install"
    fable = on("claude-fable-5-1", "fable")
    assert (fable["action"], fable["reason"]) == ("skip", "declined")


def test_taint_is_written_once_and_merged_from_the_store() -> None:
    tainted = session(extra=[{"tool_use_id": "e1", "tool": EMAIL, "input": {"q": "x"}}])
    body = compact(tainted)
    assert body["store"]["taint"] == {
        "v": 2,
        "tainted": True,
        "count": 1,
        "sample": [EMAIL],
        "at": NOW,
    }
    record = {"tainted": True, "count": 1, "sample": [EMAIL], "at": 1}
    assert compact(tainted, store={"taint": record})["store"]["taint"] is None


@respx.mock(assert_all_mocked=True, assert_all_called=False)
def test_a_fenced_session_never_reaches_a_remote_judge(
    respx_mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    route = respx_mock.post(f"{TEV}/chat/completions").mock(
        return_value=httpx.Response(500, json={"error": "no"})
    )
    monkeypatch.setenv("FACTRAIL_JUDGE_API_KEY", "k" * 24)
    config = {**CONFIG, "backend": "tev", "baseUrl": TEV}
    record = {"tainted": True, "count": 1, "sample": [EMAIL], "at": 1}
    # the taint only the plugin's store remembers (a call the built-in summary absorbed)
    body = compact(session(), config=config, store={"taint": record})
    assert body["action"] == "install" and body["reason"] == "rules:tainted"
    assert route.call_count == 0
    # fallback summary: the built-in summary instead of the rules
    summary = compact(session(), config={**config, "fallback": "summary"}, store={"taint": record})
    assert (summary["action"], summary["reason"]) == ("builtin", "tainted")
    assert route.call_count == 0
    # the request alone cannot declare the judge local
    claimed = compact(
        session(),
        config={**config, "backendLocal": True},
        store={"taint": record},
        session={"id": "sess-claimed", "trigger": "manual"},
    )
    assert claimed["reason"] == "rules:tainted" and route.call_count == 0
    # declared local by the settings: the judge is asked (it fails here, so the rules finish)
    monkeypatch.setenv("FACTRAIL_JUDGE", "tev")
    monkeypatch.setenv("FACTRAIL_JUDGE_URL", TEV)
    monkeypatch.setenv("FACTRAIL_JUDGE_LOCAL", "true")
    local = compact(
        session(),
        config={**config, "backendLocal": True},
        store={"taint": record},
        session={"id": "sess-local", "trigger": "manual"},
    )
    assert route.call_count > 0
    assert route.calls.last.request.headers["authorization"] == "Bearer " + "k" * 24
    assert local["action"] == "install" and local["reason"] == "ok-rules"


@respx.mock(assert_all_mocked=True, assert_all_called=False)
def test_a_transcript_continuing_claude_codes_own_summary_is_unproven(
    respx_mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    route = respx_mock.post(f"{TEV}/chat/completions").mock(return_value=httpx.Response(500))
    monkeypatch.setenv("FACTRAIL_JUDGE_API_KEY", "k" * 24)
    msgs = session()
    msgs[0]["text"] = "This session is being continued from a previous conversation that ran out"
    body = compact(
        msgs,
        config={**CONFIG, "backend": "tev", "baseUrl": TEV},
        session={"id": "fresh", "trigger": "manual"},
    )
    assert body["reason"] == "rules:unproven" and route.call_count == 0


def test_a_judge_that_may_not_be_built_is_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FACTRAIL_JUDGE_API_KEY", raising=False)
    config = {**CONFIG, "backend": "systemone", "baseUrl": "http://127.0.0.1:9/s1"}
    body = compact(session(), config=config)
    assert body["action"] == "install" and body["reason"] == "rules:no-key"
    summary = compact(session(), config={**config, "fallback": "summary"})
    assert (summary["action"], summary["reason"]) == ("builtin", "no-key")


def test_credentials_never_come_from_the_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FACTRAIL_JUDGE_API_KEY", raising=False)
    key = "sk-" + "a" * 30
    config = {**CONFIG, "backend": "systemone", "apiKey": key}
    assert compact(session(), config=config)["reason"] == "rules:no-key"


def test_state_is_kept_under_a_hash_of_the_session_id() -> None:
    compact(session())
    store = open_state_store(state_url())
    try:
        state = store.load(state_key("sess-1"))
        assert state is not None and state.compactions == 1 and state.settled
        assert "sess-1" not in state_key("sess-1")
    finally:
        store.close()
