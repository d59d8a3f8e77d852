"""The session step: soft line, hysteresis, plan re-application, saved outputs, the fence."""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from factrail.core.formats import openai_chat
from factrail.core.model import input_json
from factrail.judges.base import JudgeRound
from factrail.judges.rules import RulesJudge
from factrail.policy.trigger import Trigger
from factrail.session import SessionCompactor
from factrail.session.analyses import _CollectorPause
from factrail.settings import Settings
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.outputs import OutputStore
from tests.options import engine_options


def chat(turns: int, *, tool: str = "Bash", size: int = 4000) -> list[dict[str, Any]]:
    """A chat transcript with `turns` tool calls whose outputs are `size` chars of log lines."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing deploy."},
    ]
    for i in range(turns):
        cid = f"call_{i:03d}"
        msgs.append(
            {
                "role": "assistant",
                "content": f"Step {i}: checking.",
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {
                            "name": tool,
                            "arguments": f'{{"command": "curl -sv http://svc{i}.internal/health"}}',
                        },
                    }
                ],
            }
        )
        lines = [f"line {j} of output {i} with request id req-{i:04d}{j:04d}" for j in range(200)]
        body = "\n".join(lines)[:size]
        msgs.append({"role": "tool", "tool_call_id": cid, "content": body})
    msgs.append({"role": "user", "content": "Keep going."})
    return msgs


OUTPUTS_SECRET = b"test outputs secret, 32 bytes..."
"""One secret for every store a test makes, so two stores name a session's outputs alike."""


def compactor(
    trigger: int,
    tmp_path: Path | None = None,
    judge: Any = None,
) -> tuple[SessionCompactor, MemoryStateStore]:
    """A compactor over memory state; outputs under `tmp_path`."""
    store = MemoryStateStore()
    outputs = (
        OutputStore(tmp_path / "outputs", secret=OUTPUTS_SECRET) if tmp_path is not None else None
    )
    # No provider cache to pay back: these tests are about the step, not about when it pays.
    options = engine_options(
        trigger_tokens=trigger, trigger_percent=0.0, rearm_tokens=0, price_profile="none"
    )
    compactor = SessionCompactor(options, state=store, outputs=outputs, judge=judge or RulesJudge())
    return compactor, store


def texts(messages: Sequence[dict[str, Any]]) -> list[Any]:
    return [m.get("content") for m in messages if m["role"] != "tool"]


async def test_below_the_soft_line_nothing_changes() -> None:
    c, _ = compactor(10_000_000)
    doc = openai_chat.parse(chat(10))
    result = await c.compact("s", doc)
    assert result.outcome == "passthrough"
    assert result.document is None


async def test_past_the_soft_line_compacts_keeps_prose_and_pairing(tmp_path: Path) -> None:
    wire = chat(30)
    c, _ = compactor(16000, tmp_path)
    doc = openai_chat.parse(wire)
    result = await c.compact("s", doc)
    assert result.outcome == "compacted"
    out = result.document
    assert isinstance(out, list)
    assert len(out) == len(wire)
    assert texts(out) == texts(wire)
    assert [m.get("tool_call_id") for m in out] == [m.get("tool_call_id") for m in wire]
    assert result.tokens_after < result.tokens_before
    assert result.reduced > 0
    assert result.saved == result.reduced


async def test_outputs_are_saved_before_return_and_the_note_names_them(tmp_path: Path) -> None:
    wire = chat(30)
    c, _ = compactor(16000, tmp_path)
    result = await c.compact("sess", openai_chat.parse(wire))
    reduced = [
        (orig, new)
        for orig, new in zip(wire, result.document, strict=True)
        if orig.get("role") == "tool" and orig["content"] != new["content"]
    ]
    assert reduced
    assert c.writer is not None
    cap = c.writer.outputs.capability("sess")
    for orig, new in reduced:
        path = tmp_path / "outputs" / cap / f"{orig['tool_call_id']}.txt"
        assert path.read_text(encoding="utf-8") == orig["content"]
        oid = f"{cap}/{orig['tool_call_id']}"
        assert f"full output saved at /v1/factrail/outputs/{oid} (" in new["content"]
        assert "(`factrail outputs get` prints it)" in new["content"]
        assert str(tmp_path) not in new["content"]  # never a path on the server
        assert "/sess/" not in new["content"]  # nor the session key


async def test_next_turn_reapplies_the_plan_byte_identically(tmp_path: Path) -> None:
    wire = chat(30)
    c, _ = compactor(16000, tmp_path)
    first = await c.compact("s", openai_chat.parse(wire))
    assert first.outcome == "compacted"
    wire2 = [
        *wire,
        {"role": "assistant", "content": "Next I will read the config."},
        {"role": "user", "content": "ok"},
    ]
    second = await c.compact("s", openai_chat.parse(wire2))
    assert second.outcome == "reapplied"
    assert second.reapplied == first.reduced
    assert second.document[: len(wire)] == first.document


async def test_a_reused_id_with_other_text_does_not_pick_up_the_reduction(tmp_path: Path) -> None:
    wire = chat(30)
    c, _ = compactor(16000, tmp_path)
    first = await c.compact("s", openai_chat.parse(wire))
    changed = [i for i, (a, b) in enumerate(zip(wire, first.document, strict=True)) if a != b]
    i = next(i for i in changed if wire[i]["role"] == "tool")
    wire2 = [dict(m) for m in wire]
    wire2[i] = {**wire2[i], "content": "a different output under the same id"}
    second = await c.compact("s", openai_chat.parse(wire2))
    out = second.document if second.document is not None else wire2
    assert out[i]["content"] == "a different output under the same id"


async def test_hysteresis_waits_for_the_rearm_gap() -> None:
    wire = chat(30)
    c, store = compactor(16000)
    first = await c.compact("s", openai_chat.parse(wire))
    assert first.outcome == "compacted"
    state = store.load("s")
    assert state is not None and state.compactions == 1
    assert state.baseline_tokens == first.tokens_after
    # One more small turn: still under baseline + gap, so only re-application.
    wire2 = [*wire, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}]
    second = await c.compact("s", openai_chat.parse(wire2))
    assert second.outcome == "reapplied"


def test_lines_soft_line_and_gap() -> None:
    trigger = Trigger(tokens=120_000, percent=0.0, rearm=0)
    first = trigger.lines(120_000, None)
    assert first.soft == 100_000 and first.need == 100_000
    after = trigger.lines(120_000, 90_000)
    assert after.need == 105_000
    capped = Trigger(tokens=120_000, percent=0.0, rearm=40_000).lines(120_000, 118_000)
    assert capped.need == 120_000


def test_trigger_is_min_of_percent_window_and_absolute() -> None:
    cfg = engine_options(
        trigger_tokens=180_000, trigger_percent=60, context_windows={"gpt-4o": 128_000}
    ).trigger
    assert cfg.for_model("gpt-4o-2024-08-06") == 76_800
    assert cfg.for_model("unknown-model") == 180_000
    family = engine_options(
        trigger_tokens=180_000,
        trigger_percent=60,
        context_windows={"gpt-4.1": 1_047_576},
        trigger_by_model={"gpt-4.1": 400_000, "gpt-4.1-mini": 90_000},
    ).trigger
    assert family.for_model("openai/gpt-4.1-2025-04-14") == 400_000
    assert family.for_model("gpt-4.1-mini") == 90_000


class CountingJudge:
    """A non-local model judge that records whether it was asked."""

    kind = "systemone"
    model = "jev-latest"
    local = False

    def __init__(self) -> None:
        self.asked = 0

    async def ask(self, requests: Sequence[Any], *, deadline: float) -> JudgeRound:
        self.asked += 1
        return JudgeRound()


@pytest.mark.parametrize("local", [False, True])
async def test_the_fence_keeps_a_tainted_session_away_from_a_non_local_judge(
    local: bool,
) -> None:
    wire = chat(30)
    wire[2]["tool_calls"][0]["function"]["name"] = "mcp__email-gateway__ask_email"
    judge = CountingJudge()
    judge.local = local
    c, store = compactor(16000, judge=judge)
    result = await c.compact("s", openai_chat.parse(wire))
    assert result.outcome == "compacted"
    assert judge.asked == (1 if local else 0)
    assert result.reason == ("ok-local" if local else "tainted")
    state = store.load("s")
    assert state is not None and state.taint is not None and state.taint["tainted"] is True


async def test_taint_is_sticky_once_the_fenced_call_is_gone() -> None:
    wire = chat(30)
    wire[2]["tool_calls"][0]["function"]["name"] = "mcp__email-gateway__ask_email"
    judge = CountingJudge()
    c, store = compactor(16000, judge=judge)
    await c.compact("s", openai_chat.parse(wire))
    clean = chat(40)
    state = store.load("s")
    assert state is not None
    state.baseline_tokens = None
    store.save("s", state)
    result = await c.compact("s", openai_chat.parse(clean))
    assert judge.asked == 0
    assert result.reason == "tainted"


async def test_briefed_inputs_are_reapplied_with_their_results(tmp_path: Path) -> None:
    wire = chat(30)
    for m in wire:
        for call in m.get("tool_calls", []):
            call["function"]["name"] = "Read"
            call["function"]["arguments"] = '{"file_path": "/repo/' + "x" * 300 + '.py"}'
    c, _ = compactor(16000, tmp_path)
    first = await c.compact("s", openai_chat.parse(wire))
    assert first.outcome == "compacted"
    second = await c.compact("s", openai_chat.parse(wire))
    assert second.document == first.document
    doc = openai_chat.parse(second.document)
    briefed = [u for m in doc.messages for u in m.tool_uses if "chars]" in input_json(u)]
    assert briefed


def test_a_compaction_stuck_past_the_hard_line_waits_for_the_gap() -> None:
    stuck = Trigger(tokens=120_000, percent=0.0, rearm=0).lines(120_000, 130_000)
    assert stuck.need == 145_000


async def test_a_note_naming_its_file_never_lengthens_a_result(tmp_path: Path) -> None:
    wire = chat(40, size=900)
    c, _ = compactor(600, tmp_path)
    result = await c.compact(
        "a-rather-long-session-name-for-the-saved-path", openai_chat.parse(wire)
    )
    assert result.outcome == "compacted"
    pairs = [
        (a["content"], b["content"])
        for a, b in zip(wire, result.document, strict=True)
        if a["role"] == "tool"
    ]
    assert all(len(new) <= len(old) for old, new in pairs)
    assert any(new != old for old, new in pairs)


async def test_past_the_hard_line_old_arguments_give_way_and_are_saved(tmp_path: Path) -> None:
    wire = chat(30, size=400)
    for m in wire:
        for call in m.get("tool_calls", []):
            call["function"]["name"] = "Write"
            body = "\n".join(f"line {i} of the module" for i in range(300))
            call["function"]["arguments"] = json.dumps({"file_path": "/repo/m.py", "content": body})
    c, _ = compactor(3000, tmp_path)
    result = await c.compact("w", openai_chat.parse(wire))
    assert result.outcome == "compacted"
    out = openai_chat.parse(result.document)
    briefed = [u for m in out.messages for u in m.tool_uses if "chars]" in u.input["content"]]
    assert briefed
    for u in briefed:
        cap = OutputStore(tmp_path / "outputs", secret=OUTPUTS_SECRET).capability("w")
        saved = tmp_path / "outputs" / cap / f"{u.tool_use_id}.input.txt"
        assert json.loads(saved.read_text())["content"].startswith("line 0 of the module")
    assert texts(result.document) == texts(wire)


async def test_at_the_soft_line_old_writes_go_briefed_their_arguments_saved(
    tmp_path: Path,
) -> None:
    wire = chat(24, size=2000)
    body = "\n".join(f"line {i} of the module" for i in range(300))
    calling = [m for m in wire if m.get("tool_calls")]
    for m in [*calling[::3], calling[-1]]:  # the last among the pinned newest messages
        for call in m.get("tool_calls", []):
            call["function"]["name"] = "Write"
            call["function"]["arguments"] = json.dumps({"file_path": "/repo/m.py", "content": body})
    probe, _ = compactor(10_000_000)
    tokens = (await probe.compact("probe", openai_chat.parse(wire))).tokens_before
    c, _ = compactor(int(tokens * 1.1), tmp_path)  # past the soft line, short of the trigger
    result = await c.compact("w", openai_chat.parse(wire))
    assert result.outcome == "compacted"
    out = openai_chat.parse(result.document)
    writes = [u for m in out.messages for u in m.tool_uses if u.tool == "Write"]
    briefed = [u for u in writes if u.input["content"] != body]
    assert briefed and len(briefed) < len(writes)  # the newest are kept as they were
    store = OutputStore(tmp_path / "outputs", secret=OUTPUTS_SECRET)
    for u in briefed:
        assert u.input == {
            "file_path": "/repo/m.py",
            "content": body[:200] + f"…[factrail omitted {len(body) - 200} chars]",
        }
        saved = store.get(f"{store.capability('w')}/{u.tool_use_id}.input")
        assert saved is not None and json.loads(saved)["content"] == body
    assert texts(result.document) == texts(wire)
    # The next turn sends the same briefs, byte for byte, before what is new.
    later = [
        *wire,
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Thanks."},
    ]
    again = await c.compact("w", openai_chat.parse(later))
    assert again.outcome == "reapplied"
    assert again.document[: len(result.document)] == result.document


class CallKeepingJudge:
    """A local model judge that says every call matters with its arguments, no result does."""

    kind = "tev"
    model = "tev-test"
    local = True

    async def ask(self, requests: Sequence[Any], *, deadline: float) -> JudgeRound:
        answers = {}
        for request in requests:
            for short, _ in request.calls:
                answers[f"call_{short}"], answers[f"result_{short}"] = 0.9, 0.1
        return JudgeRound(answers=answers)


@pytest.mark.parametrize("judge", [None, CallKeepingJudge()], ids=["rules", "calls-kept"])
async def test_a_reduced_call_s_long_command_is_briefed_unless_the_judge_kept_the_call(
    judge: Any,
) -> None:
    wire = chat(30)
    script = "python3 - <<'PY'\n" + "print('step')\n" * 60 + "PY"
    for m in wire[2:8]:
        for call in m.get("tool_calls", []):
            call["function"]["arguments"] = json.dumps({"command": script})
    c, _ = compactor(16000, judge=judge)
    result = await c.compact("s", openai_chat.parse(wire))
    assert result.outcome == "compacted" and result.reduced > 0
    commands = [
        u.input["command"]
        for m in openai_chat.parse(result.document).messages
        for u in m.tool_uses
        if u.input["command"].startswith("python3")
    ]
    assert len(commands) == 3
    if judge is None:
        assert all(
            c == script[:200] + f"…[factrail omitted {len(script) - 200} chars]" for c in commands
        )
    else:
        assert commands == [script] * 3


async def test_the_step_cuts_no_result_for_less_than_the_minimum(tmp_path: Path) -> None:
    assert Settings().min_cut_chars == 800  # the product's default; the helper here sets 0
    wire = chat(30, size=3000)
    calls = {c["id"]: c for m in wire for c in m.get("tool_calls", [])}
    for m in [m for m in wire if m["role"] == "tool"][::2]:  # every other one a 600-char read
        m["content"] = m["content"][:600]
        call = calls[m["tool_call_id"]]["function"]
        call["name"], call["arguments"] = (
            "Read",
            json.dumps({"file_path": f"/r/{m['tool_call_id']}"}),
        )
    options = engine_options(trigger_tokens=16000, trigger_percent=0.0, price_profile="none")
    for minimum in (0, 800):
        c = SessionCompactor(
            replace(options, min_cut_chars=minimum),
            state=MemoryStateStore(),
            outputs=OutputStore(tmp_path / f"o{minimum}", secret=OUTPUTS_SECRET),
            judge=RulesJudge(),
        )
        result = await c.compact("s", openai_chat.parse(wire))
        assert result.outcome == "compacted"
        sent = zip(wire, result.document, strict=True)
        cut = [a for a, b in sent if a != b and a["role"] == "tool"]
        small = [a for a in cut if len(a["content"]) == 600]
        assert small if minimum == 0 else not small
        assert any(len(a["content"]) == 3000 for a in cut)


async def test_compaction_sweeps_saved_outputs_older_than_thirty_days(tmp_path: Path) -> None:

    old = tmp_path / "outputs" / "gone" / "call_x.txt"
    old.parent.mkdir(parents=True)
    old.write_text("stale")
    month_ago = time.time() - 31 * 86400
    os.utime(old, (month_ago, month_ago))
    c, _ = compactor(16000, tmp_path)
    result = await c.compact("s", openai_chat.parse(chat(30)))
    assert result.outcome == "compacted"
    assert not old.exists()
    assert c.writer is not None
    assert (tmp_path / "outputs" / c.writer.outputs.capability("s")).is_dir()


async def test_a_fenced_call_below_the_trigger_taints_the_session_for_good() -> None:
    small = chat(3)
    small[2]["tool_calls"][0]["function"]["name"] = "mcp__claude_ai_Gmail__search"
    judge = CountingJudge()
    c, store = compactor(16000, judge=judge)
    first = await c.compact("s", openai_chat.parse(small))
    assert first.outcome == "passthrough" and first.fenced
    state = store.load("s")
    assert state is not None and state.taint is not None and state.taint["tainted"] is True
    later = await c.compact("s", openai_chat.parse(chat(30)))
    assert later.outcome == "compacted"
    assert later.reason == "tainted" and judge.asked == 0
    assert not later.fenced  # counted once, when first seen


async def test_the_decision_log_masks_the_judges_own_key(tmp_path: Path) -> None:
    import httpx

    from factrail.judges.systemone import SystemOneJudge
    from factrail.stores.decisions import DecisionLog

    key = "plainkey" + "7Q" * 8  # not key-shaped: only the known-secret rule can mask it

    def answer(request: httpx.Request) -> httpx.Response:
        questions = json.loads(request.content)["questions"]
        return httpx.Response(200, json={"answers": {q: {"noul": 0.9} for q in questions}})

    wire = chat(30)
    wire[1]["content"] = f"Fix the failing deploy; the service key is {key}."
    log = DecisionLog(tmp_path / "decisions")
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        judge = SystemOneJudge(client=client, url="http://judge.test/v1/systemone", api_key=key)
        options = engine_options(trigger_tokens=16000, trigger_percent=0.0)
        c = SessionCompactor(
            options, state=MemoryStateStore(), outputs=None, judge=judge, decisions=log
        )
        result = await c.compact("s", openai_chat.parse(wire))
    assert result.reason == "ok"  # the judge kept every call: nothing to reduce
    written = "".join(p.read_text() for p in (tmp_path / "decisions").glob("*.jsonl"))
    assert "service key is [REDACTED:known]" in written
    assert key not in written


async def test_turns_below_the_trigger_prepare_the_compaction_turn(tmp_path: Path) -> None:
    """Past half the trigger a turn's results are analysed in the background; the compaction
    that follows uses that analysis and gives exactly what a cold compactor gives."""
    wire = chat(30)
    warm, _ = compactor(40000, tmp_path / "warm")
    before = await warm.compact("s", openai_chat.parse(wire[:-9]))
    assert before.outcome == "passthrough"
    assert before.tokens_before >= 20000
    assert not warm.analyses.take("s").layouts  # nothing runs before the answer is sent
    assert before.after_answer is not None
    before.after_answer()
    await warm.settled()
    analysis = warm.analyses.take("s")
    assert analysis.layouts
    warm.analyses.keep("s", analysis)
    cold, _ = compactor(40000, tmp_path / "cold")
    # The same turn without its preparation: the same session state, a cold analysis.
    assert (await cold.compact("s", openai_chat.parse(wire[:-9]))).outcome == "passthrough"
    got = await warm.compact("s", openai_chat.parse(wire))
    want = await cold.compact("s", openai_chat.parse(wire))
    assert got.outcome == want.outcome == "compacted"
    assert json.dumps(got.document).replace("/warm/", "/") == json.dumps(want.document).replace(
        "/cold/", "/"
    )


async def test_no_preparation_below_the_share_or_when_switched_off() -> None:
    for share, turns in ((0.5, 3), (0.0, 30)):
        options = engine_options(
            trigger_tokens=40000, trigger_percent=0.0, rearm_tokens=0, prepare_share=share
        )
        c = SessionCompactor(options, state=MemoryStateStore(), outputs=None, judge=RulesJudge())
        result = await c.compact("s", openai_chat.parse(chat(turns)[:-9]))
        assert result.outcome == "passthrough"
        assert result.after_answer is None
        await c.settled()
        assert not c.analyses.take("s").layouts


async def test_analyses_are_kept_for_the_most_recent_sessions_only() -> None:
    options = engine_options(
        trigger_tokens=40000, trigger_percent=0.0, rearm_tokens=0, analysis_sessions=2
    )
    c = SessionCompactor(options, state=MemoryStateStore(), outputs=None, judge=RulesJudge())
    for session in ("a", "b", "c"):
        result = await c.compact(session, openai_chat.parse(chat(30)[:-9]))
        assert result.after_answer is not None
        result.after_answer()
        await c.settled()
    assert not c.analyses.take("a").layouts
    assert c.analyses.take("b").layouts
    assert c.analyses.take("c").layouts


def test_the_collector_pause_nests_and_restores_what_it_found() -> None:
    pause = _CollectorPause()
    assert gc.isenabled()
    with pause():
        assert not gc.isenabled()
        with pause():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    gc.disable()
    try:
        with pause():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


async def test_preparations_are_observed_done_skipped_or_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    heard: list[tuple[str, float]] = []
    options = engine_options(trigger_tokens=40000, trigger_percent=0.0, rearm_tokens=0)
    c = SessionCompactor(
        options,
        state=MemoryStateStore(),
        outputs=None,
        judge=RulesJudge(),
        observe_preparation=lambda outcome, seconds: heard.append((outcome, seconds)),
    )
    turn = chat(30)[:-9]
    for session in ("done", "skipped", "failed"):
        result = await c.compact(session, openai_chat.parse(turn))
        assert result.after_answer is not None
        with monkeypatch.context() as m:
            if session == "skipped":
                m.setattr("factrail.session.analyses.MAX_QUEUED_PREPARATIONS", 0)
            if session == "failed":

                def broken(*_: object, **__: object) -> None:
                    raise RuntimeError("analysis bug")

                m.setattr("factrail.session.analyses.prepare", broken)
            result.after_answer()
            await c.settled()
    assert [outcome for outcome, _ in heard] == ["done", "skipped", "failed"]
    assert heard[0][1] > 0 and heard[1][1] == 0.0
    assert c.analyses.take("done").layouts
    assert not c.analyses.take("failed").layouts


def _call(i: int, args: str) -> dict[str, Any]:
    fn = {"name": "bash", "arguments": args}
    return {
        "role": "assistant",
        "content": f"step {i}",
        "tool_calls": [{"id": f"call_{i:04d}", "type": "function", "function": fn}],
    }


def _two_runs(tag: str, first_args: str) -> list[dict[str, Any]]:
    """A run whose first call is `call_0001`, as two runs under one session key would be."""
    lines = "\n".join(
        f"{tag} line {j}: value {j * 7919 % 1000} at src/m_{j}.py:{j}" for j in range(80)
    )
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Same task."},
        _call(1, first_args),
        {"role": "tool", "tool_call_id": "call_0001", "content": f"[{tag}]\n{lines}"},
    ]
    for i in range(2, 14):
        msgs += [
            _call(i, json.dumps({"command": f"pytest -k t{i}"})),
            {"role": "tool", "tool_call_id": f"call_{i:04d}", "content": f"{tag}{i}\n{lines}"},
        ]
    return msgs


async def test_a_reused_call_id_never_picks_up_another_runs_briefed_arguments() -> None:
    """Two runs keyed alike, each with a `call_0001`: the second never forwards the first's
    briefed arguments, neither on its compaction turn nor on the turns that re-apply it."""
    c, _ = compactor(6000)
    edit = json.dumps({"command": "edit 1:1\n" + "x = 1\n" * 400})
    assert (await c.compact("s", openai_chat.parse(_two_runs("a", edit)))).outcome == "compacted"
    turn = _two_runs("b", json.dumps({"command": "ls -a"}))
    outcomes = []
    for _ in range(4):
        result = await c.compact("s", openai_chat.parse(turn))
        outcomes.append(result.outcome)
        sent = result.document if result.document is not None else turn
        assert json.loads(sent[2]["tool_calls"][0]["function"]["arguments"]) == {"command": "ls -a"}
        turn = [*turn, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"}]
    assert "compacted" in outcomes and "reapplied" in outcomes
