"""`factrail inspect` and the admin route: what a session's last compactions did."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr

from factrail.cli import main
from factrail.core.formats import openai_chat
from factrail.gateway.factory import create_app, default_engine
from factrail.judges.rules import RulesJudge
from factrail.session import SessionCompactor
from factrail.session.inspect import (
    Recent,
    bill,
    listing,
    recent_report,
    render,
    report,
    summary,
)
from factrail.session.keys import header_key
from factrail.settings import Settings
from factrail.stores import admin_key, open_state_store
from factrail.stores.outputs import OutputStore
from factrail.stores.state import SessionState
from tests.integration.processes import metric_total
from tests.options import engine_options
from tests.test_session import chat


def compacted_session(state_url: str, outputs: Path) -> None:
    store = open_state_store(state_url)
    compactor = SessionCompactor(
        engine_options(trigger_tokens=6000, trigger_percent=0.0, price_profile="none"),
        state=store,
        outputs=OutputStore(outputs),
        judge=RulesJudge(),
    )
    result = asyncio.run(compactor.compact(header_key("run-1"), openai_chat.parse(chat(30))))
    assert result.outcome == "compacted"
    compactor.close()
    store.close()


def gateway(settings: Settings, upstream: Callable[[httpx.Request], httpx.Response]) -> FastAPI:
    """The gateway with the real engine on `settings.state_url`, in front of `upstream`."""
    return create_app(
        settings,
        client=httpx.AsyncClient(transport=httpx.MockTransport(upstream)),
        state=open_state_store(settings.state_url),
        engine_factory=default_engine,
    )


def test_the_report_says_what_was_kept_where_the_whole_is_and_what_it_cost(
    tmp_path: Path,
) -> None:
    url = f"sqlite://{tmp_path / 'state.db'}"
    compacted_session(url, tmp_path / "outputs")
    store = open_state_store(url)
    state = store.load(header_key("run-1"))
    assert state is not None and len(state.history) == 1
    data = report(header_key("run-1"), state)
    (h,) = data["history"]
    assert h["tokens_after"] < h["tokens_before"] and h["invalidated_tokens"] > 0
    assert h["first_changed_message"] is not None
    first = h["results"][0]
    assert first["kept_chars"] < first["original_chars"]
    cap = OutputStore(tmp_path / "outputs").capability(header_key("run-1"))
    assert first["saved"] is True and "whole" not in first
    assert "[factrail omitted" in first["note"] and "<capability>" in first["note"]
    assert cap not in json.dumps(data)  # the report names no capability
    assert h["decision"] == "forced" and h["turns"] == 30  # five times the trigger
    text = render(data)
    assert "tokens re-billed once" in text and cap not in text
    assert "hard-line at turn 30 (past the danger line)" in text


def test_the_report_says_where_a_briefed_call_s_whole_arguments_are(tmp_path: Path) -> None:
    wire = chat(30)
    script = "python3 - <<'PY'\n" + "print('step')\n" * 60 + "PY"
    wire[2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"command": script})
    store = open_state_store("memory://")
    outputs = OutputStore(tmp_path / "outputs")
    compactor = SessionCompactor(
        engine_options(trigger_tokens=6000, trigger_percent=0.0, price_profile="none"),
        state=store,
        outputs=outputs,
        judge=RulesJudge(),
    )
    result = asyncio.run(compactor.compact("s", openai_chat.parse(wire)))
    compactor.close()
    assert result.outcome == "compacted"
    state = store.load("s")
    assert state is not None
    data = report("s", state)
    (row,) = [r for r in data["history"][0]["results"] if r["arguments_briefed"]]
    assert row["arguments_saved"] is True and "arguments_whole" not in row
    saved = f"{outputs.capability('s')}/{row['id']}.input"
    assert json.loads(outputs.get(saved) or "{}") == {"command": script}
    assert "; arguments saved" in render(data) and outputs.capability("s") not in render(data)


def test_factrail_inspect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite://{tmp_path / 'state.db'}"
    compacted_session(url, tmp_path / "outputs")
    monkeypatch.setenv("FACTRAIL_STATE_URL", url)
    assert main(["inspect", "--header", "run-1"]) == 0
    assert "1 compaction(s)" in capsys.readouterr().out
    assert main(["inspect", header_key("run-1"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["compactions"] == 1
    store = open_state_store(url)
    # the fence's records of a client's session id and of a transcript's head: nothing to show
    store.save("a-0123456789abcdef01234567", SessionState(plan={}, origin="start"))
    store.save("s-0123456789abcdef01234567", SessionState(plan={}, origin="start"))
    store.close()
    assert main(["inspect", "--list"]) == 0
    listed = capsys.readouterr().out
    assert header_key("run-1") in listed and "0123456789abcdef01234567" not in listed
    assert main(["inspect", "--list", "--json", "--limit", "5"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert [s["session"] for s in as_json["sessions"]] == [header_key("run-1")]
    assert as_json["summary"]["sessions"] == 0  # compacted offline: no answer billed it
    assert main(["inspect", "nope"]) == 1


def test_the_admin_route_needs_the_key_and_is_never_forwarded(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'state.db'}"
    compacted_session(url, tmp_path / "outputs")
    key = "adm" + "Q" * 20
    forwarded: list[httpx.Request] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        forwarded.append(request)
        return httpx.Response(200)

    app = gateway(Settings(state_url=url, admin_key=SecretStr(key)), upstream)
    session = header_key("run-1")
    with TestClient(app) as client:
        assert client.get(f"/v1/factrail/sessions/{session}").status_code == 401
        auth = {"authorization": f"Bearer {key}"}
        got = client.get(f"/v1/factrail/sessions/{session}", headers=auth)
        assert got.status_code == 200 and got.json()["compactions"] == 1
        listed = client.get("/v1/factrail/sessions", headers=auth).json()["sessions"]
        assert [s["session"] for s in listed] == [session]
        one = client.get("/v1/factrail/sessions?limit=1", headers=auth)
        assert one.status_code == 200 and len(one.json()["sessions"]) == 1
        for bad in ("0", "1001", "x", "-1"):
            got = client.get(f"/v1/factrail/sessions?limit={bad}", headers=auth)
            assert got.status_code == 400 and got.json()["error"]["code"] == "invalid_limit"
        assert client.get("/v1/factrail/sessions/nope", headers=auth).status_code == 404
        for method in ("POST", "DELETE", "HEAD"):
            client.request(method, "/v1/factrail/sessions", headers=auth)
            client.request(method, "/v1/factrail/outputs/x/y", headers=auth)
    assert forwarded == []


def test_a_session_s_bill_is_priced_from_the_upstream_s_usage_against_sending_it_whole(
    tmp_path: Path,
) -> None:
    """Through the gateway with the real step: every answered turn adds its billed-equivalent
    input (the provider's split at Anthropic's prices) to its session's bill, and what it
    spared against sending it whole: the tokens it kept out at the cached price, less, on the
    compaction that was not free, re-writing every token the provider did not read from its
    cache. The sessions route and `factrail inspect` show it, per session and all together."""
    url = f"sqlite://{tmp_path / 'state.db'}"
    figures = [(9000, 0), (9500, 8000), (9900, 9400)]  # (prompt, cached) per turn
    usages = iter(figures)

    def upstream(request: httpx.Request) -> httpx.Response:
        prompt, cached = next(usages)
        details = {"cached_tokens": cached}
        usage = {"prompt_tokens": prompt, "prompt_tokens_details": details}
        return httpx.Response(200, json={"choices": [], "usage": usage})

    settings = Settings(
        state_url=url,
        trigger_tokens=6000,
        trigger_percent=0.0,
        price_profile="anthropic",
        outputs_dir=str(tmp_path / "outputs"),
    )
    app = gateway(settings, upstream)
    session = header_key("run-1")
    headers = {"x-factrail-session": "run-1"}
    with TestClient(app) as client:
        admin = {"authorization": f"Bearer {admin_key.read(settings)}"}  # made at start
        outcomes = []
        for turns in (30, 31, 32):
            body = {"model": "claude-sonnet-4", "messages": chat(turns)}
            r = client.post("/v1/chat/completions", json=body, headers=headers)
            assert r.status_code == 200
            outcomes.append(r.headers["x-factrail"])
        # (whether a later turn compacts again depends on when the first answer's calibration
        # lands: it is stored off the event loop)
        assert outcomes[0] == "compacted"
        exported = client.get("/metrics").text
        removed = metric_total(exported, "factrail_input_tokens_removed_total")
        listed = client.get("/v1/factrail/sessions", headers=admin).json()
        inspected = client.get(f"/v1/factrail/sessions/{session}", headers=admin).json()
    billed = sum(prompt - cached + 0.1 * cached for prompt, cached in figures)
    # each compaction re-wrote every token the provider did not read from its cache
    rewritten = sum(p - c for (p, c), o in zip(figures, outcomes, strict=True) if o == "compacted")
    expected = 0.1 * removed - 1.15 * rewritten
    assert removed > 0 and inspected["history"][0]["decision"] == "forced"
    assert len(inspected["history"]) == outcomes.count("compacted")
    assert inspected["bill"]["billed"] == pytest.approx(billed, abs=0.1)
    assert inspected["bill"]["spared"] == pytest.approx(expected, abs=0.1)
    assert inspected["bill"]["whole"] == pytest.approx(billed + expected, abs=0.2)
    # the fleet's counters keep the same account
    assert metric_total(exported, "factrail_billed_input_tokens_total") == pytest.approx(billed)
    spared_total = "factrail_spared_input_tokens_total"
    kept_out = metric_total(exported, spared_total, part="kept_out")
    rewritten = metric_total(exported, spared_total, part="rewritten")
    assert kept_out == pytest.approx(0.1 * removed)
    assert kept_out - rewritten == pytest.approx(expected)
    (row,) = listed["sessions"]
    assert row["session"] == session and row["bill"] == inspected["bill"]
    assert listed["summary"]["sessions"] == 1
    # seen a moment ago: live, so not yet counted above sent whole whatever it stands at
    assert row["live"] is True and listed["summary"]["live"] == 1
    assert listed["summary"]["above_whole"] == 0
    assert "bill: " in render(inspected)


def test_the_listing_says_which_sessions_above_sent_whole_were_lost_bets() -> None:
    """A session above sent whole that the gate never compacted on a bet (only past the danger
    line) is counted apart: no payback horizon keeps it under. A record written before bets
    were counted says nothing of them."""
    dearer = bill(SessionState(plan={}, billed=1050.0, spared=-50.0))
    rows = [
        Recent("s-bet", 0, dearer, False, compactions=2, bets=1),
        Recent("s-forced", 0, dearer, False, compactions=1, bets=0),
        Recent("s-old", 0, dearer, False, compactions=3, bets=None),
        Recent("s-whole", 0, bill(SessionState(plan={}, billed=10.0, spared=0.0)), False),
    ]
    together = summary(rows)
    assert (together["above_whole"], together["above_unbet"]) == (3, 1)
    text = listing(rows)
    assert (
        "s-bet  1970-01-01 00:00:00 UTC  1.050× of sent whole  2 compaction(s), 1 on a bet\n"
        in text
    )
    assert (
        "s-forced  1970-01-01 00:00:00 UTC  1.050× of sent whole  1 compaction(s), 0 on a bet\n"
        in text
    )
    assert "s-old  1970-01-01 00:00:00 UTC  1.050× of sent whole  3 compaction(s)\n" in text
    assert "s-whole  1970-01-01 00:00:00 UTC  1.000× of sent whole\n" in text
    assert (
        "3 of 4 settled cost more than sent whole (worst 1.050×), 1 of them with no bet"
        " (forced past the danger line)"
    ) in text
    assert listed_json(rows)[0]["bets"] == 1 and listed_json(rows)[2]["bets"] is None
    forced = report("s-forced", SessionState(plan={}, compactions=1, bets=0))
    assert forced["bets"] == 0
    assert render(forced).startswith("session s-forced: 1 compaction(s), 0 on a bet, 0 result(s)")
    old = report("s-old", SessionState(plan={}, compactions=3, bets=None))
    assert render(old).startswith("session s-old: 3 compaction(s), 0 result(s)")


def listed_json(rows: list[Recent]) -> list[dict[str, Any]]:
    sessions: list[dict[str, Any]] = recent_report(rows)["sessions"]
    return sessions


def test_the_bills_of_recent_sessions_together() -> None:
    """A session that re-wrote more than it kept out cost more than sent whole; the summary
    counts it and weighs every session by its bill. A session seen within the cache's
    lifetime is live (its last compaction may yet pay back): it is not counted above."""
    cheaper = bill(SessionState(plan={}, billed=800.0, spared=200.0))
    dearer = bill(SessionState(plan={}, billed=1050.0, spared=-50.0))
    assert cheaper is not None and cheaper["ratio"] == 0.8 and cheaper["whole"] == 1000.0
    assert dearer is not None and dearer["ratio"] == 1.05
    assert bill(SessionState(plan={})) is None  # no usage reported yet
    rows = [
        Recent("s-a", 0, cheaper, False),
        Recent("s-b", 0, dearer, False, compactions=1, bets=1),
        Recent("s-c", 0, None, False),
        Recent("s-d", 0, dearer, True),
    ]
    together = summary(rows)
    assert together == {
        "sessions": 3, "live": 1, "above_whole": 1, "above_unbet": 0, "worst_ratio": 1.05,
        "ratio": 0.9667, "billed": 2900.0, "whole": 3000.0, "spared": 100.0, "projected": None,
    }  # fmt: skip
    text = listing(rows)
    assert "s-a  1970-01-01 00:00:00 UTC  0.800× of sent whole\n" in text
    assert "s-d  1970-01-01 00:00:00 UTC  1.050× of sent whole  (live)" in text
    assert (
        "3 with a bill: 0.967× of sending them whole; 1 of 2 settled cost more than sent whole"
        " (worst 1.050×); 1 still live (their last compaction may yet pay back)"
    ) in text
    nothing = bill(SessionState(plan={}, billed=0.0, spared=0.0))
    assert nothing is not None and nothing["ratio"] == 1.0
    assert "with a bill" not in listing([Recent("s-e", 0, nothing, False)])  # nothing billed
    assert "cost 50 more" in render(
        {**report("s-b", SessionState(plan={}, billed=1050.0, spared=-50.0))}
    )


def test_a_shadow_session_reports_its_projection() -> None:
    state = SessionState(
        plan={}, compactions=2, shadow=2, billed=1000.0, spared=0.0,
        projected_billed=700.0, projected_spared=300.0,
    )  # fmt: skip
    data = report("s-shadow", state)
    assert data["compactions"] == 0
    assert data["projected"] == {
        "compactions": 2, "billed": 700.0, "spared": 300.0, "whole": 1000.0, "ratio": 0.7,
    }  # fmt: skip
    assert "projected (shadow mode): 2 compaction(s) not sent" in render(data)
    assert "(0.700×)" in render(data)
