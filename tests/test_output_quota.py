"""A compaction whose saves the quota (or the disk) refuses never claims a saved copy, counts the
refusal, and a compacted transcript compacted again keeps its notes byte for byte."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from factrail.core.formats import openai_chat
from factrail.core.marks import mark_lines
from factrail.gateway.metrics import Metrics
from factrail.judges.rules import RulesJudge
from factrail.session import SessionCompactor, TurnResult
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.outputs import OutputLimits, OutputStore
from tests.options import engine_options
from tests.test_session import chat

SECRET = b"quota tests' outputs secret, 32."


def compact(
    store: OutputStore | None, wire: list[dict[str, Any]], session: str, trigger: int = 16000
) -> TurnResult:
    compactor = SessionCompactor(
        engine_options(trigger_tokens=trigger, trigger_percent=0.0, price_profile="none"),
        state=MemoryStateStore(),
        outputs=store,
        judge=RulesJudge(),
    )
    try:
        return asyncio.run(compactor.compact(session, openai_chat.parse(wire)))
    finally:
        compactor.close()


def reduced_results(wire: list[dict[str, Any]], result: TurnResult) -> list[str]:
    return [
        new["content"]
        for old, new in zip(wire, result.document or wire, strict=True)
        if old.get("role") == "tool" and old["content"] != new["content"]
    ]


def failure_samples(metrics: Metrics) -> dict[str, float]:
    return {
        s.labels["reason"]: s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
        if s.name == "factrail_outputs_save_failures_total"
    }


def test_a_result_the_quota_refuses_to_save_is_sent_whole(tmp_path: Path) -> None:
    """Nothing is lost: a result whose original cannot be saved is not reduced at all (a note
    naming a copy that is not there, or "in this transcript" where it is not, would lose it)."""
    wire = chat(30)
    store = OutputStore(
        tmp_path / "outputs",
        secret=SECRET,
        limits=OutputLimits(session_max_bytes=10_000),  # room for two or three originals
    )
    result = compact(store, wire, "s")
    assert result.outcome == "compacted"
    assert result.saved > 0 and result.save_failures["quota"] > 0
    reduced = reduced_results(wire, result)
    assert len(reduced) == result.saved
    assert all("full output saved" in t for t in reduced)
    sent = result.document
    assert isinstance(sent, list)
    whole = [m for m, o in zip(sent, wire, strict=True) if m.get("role") == "tool" and m == o]
    assert len(whole) >= result.save_failures["quota"]
    on_disk = sum(p.stat().st_size for p in (tmp_path / "outputs").rglob("*.txt"))
    assert on_disk <= 10_000
    metrics = Metrics()
    metrics.record_turn(result, 0.01)
    assert failure_samples(metrics) == {"quota": result.save_failures["quota"], "error": 0.0}


def test_a_store_without_its_secret_saves_nothing_and_reduces_nothing(tmp_path: Path) -> None:
    key_file = tmp_path / "outputs.key"
    key_file.mkdir()  # not a file: no secret can be read or made
    wire = chat(30)
    result = compact(OutputStore(tmp_path / "outputs", secret_file=key_file), wire, "s")
    assert result.saved == 0 and result.save_failures.get("error", 0) > 0
    assert reduced_results(wire, result) == []


def test_compacting_a_compacted_transcript_keeps_its_notes_byte_for_byte(tmp_path: Path) -> None:
    wire = chat(30)
    store = OutputStore(tmp_path / "outputs", secret=SECRET)
    first = compact(store, wire, "s", 33000)  # past the trigger, short of the danger line
    assert first.outcome == "compacted" and first.decision == "pays" and first.saved > 0
    once = first.document
    assert isinstance(once, list)
    notes = [m["content"] for m in once if m.get("role") == "tool" and mark_lines(m["content"])]
    assert notes
    # another session (a fresh state: nothing to re-apply) gets the compacted transcript, past
    # its own trigger: it reduces more, and leaves every note it finds as it was
    again = compact(store, [*once, {"role": "user", "content": "and more"}], "other", 6000)
    assert again.outcome == "compacted" and again.saved > 0
    twice = again.document
    assert isinstance(twice, list)
    kept = [m["content"] for m in twice if m.get("role") == "tool"]
    assert all(note in kept for note in notes)
    saved_twice = {line for t in kept for line in mark_lines(t) if "outputs get" in line}
    assert {line for t in notes for line in mark_lines(t) if "outputs get" in line} < saved_twice
    assert not any(
        "factrail omitted" in line and line.count("[factrail") > 1 for line in saved_twice
    )


def test_arguments_the_store_cannot_save_are_sent_whole(tmp_path: Path) -> None:
    """A reduced call's long arguments are briefed only once their whole is saved."""
    wire = chat(30)
    script = "python3 - <<'PY'\n" + "print('step')\n" * 60 + "PY"
    for m in wire:
        for call in m.get("tool_calls", []):
            call["function"]["arguments"] = json.dumps({"command": script})
    saved = compact(OutputStore(tmp_path / "ok", secret=SECRET), wire, "s")
    assert saved.outcome == "compacted" and saved.document is not None
    briefed = [
        call
        for m in saved.document
        for call in m.get("tool_calls", [])
        if json.loads(call["function"]["arguments"])["command"] != script
    ]
    assert briefed
    key_file = tmp_path / "outputs.key"
    key_file.mkdir()  # not a file: no secret can be read or made
    failed = compact(OutputStore(tmp_path / "outputs", secret_file=key_file), wire, "s")
    sent = failed.document or wire
    assert [m.get("tool_calls") for m in sent] == [m.get("tool_calls") for m in wire]
    assert failed.save_failures["error"] >= len(briefed)
