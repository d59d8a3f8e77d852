"""What the rails never touch, and compaction of a transcript that holds factrail's own notes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factrail.cli import main
from factrail.core.formats import openai_chat
from factrail.core.marks import mark_lines
from factrail.judges.rules import RulesJudge
from factrail.session import SessionCompactor
from factrail.stores.memory_state import MemoryStateStore
from tests.options import engine_options
from tests.test_session import chat

SKILL_TEXT = "\n".join(
    f"Rule {i}: always run the linter before committing file {i}." for i in range(80)
)


def with_special_calls(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`chat` with its first three tools turned into a skill load, a subagent and a retrieval
    of a saved output, and the fourth into a tool the operator keeps."""
    specials = [
        ("Skill", {"skill": "deploy-checklist"}),
        ("Task", {"description": "audit", "prompt": "audit the deploy scripts"}),
        ("Read", {"file_path": "/home/u/.cache/factrail/outputs/s-1/call_000.txt"}),
        ("crm_lookup", {"id": 7}),
    ]
    calls = [m for m in wire if m.get("tool_calls")]
    for m, (tool, args) in zip(calls, specials, strict=False):
        m["tool_calls"][0]["function"] = {"name": tool, "arguments": json.dumps(args)}
    results = [m for m in wire if m["role"] == "tool"]
    results[0]["content"] = SKILL_TEXT
    return wire


async def test_skills_subagents_retrievals_and_kept_tools_stay_verbatim() -> None:
    wire = with_special_calls(chat(30))
    compactor = SessionCompactor(
        engine_options(
            trigger_tokens=4000,
            trigger_percent=0.0,
            price_profile="none",
            keep_tools=("crm_lookup",),
        ),
        state=MemoryStateStore(),
        outputs=None,
        judge=RulesJudge(),
    )
    result = await compactor.compact("s", openai_chat.parse(wire))
    assert result.outcome == "compacted"
    sent = [m for m in result.document if m["role"] == "tool"]
    original = [m for m in wire if m["role"] == "tool"]
    assert [m["content"] for m in sent[:4]] == [m["content"] for m in original[:4]]
    assert sent[4]["content"] != original[4]["content"]  # an ordinary old result is reduced


def test_compacting_a_compacted_transcript_keeps_every_note(tmp_path: Path) -> None:
    """`factrail compact` run again on its own output (a client that persisted what it was
    sent) rewrites none of the notes it wrote, even past the trigger."""
    source = tmp_path / "session.json"
    source.write_text(json.dumps(chat(40, size=1500)), encoding="utf-8")
    once, twice = tmp_path / "once.json", tmp_path / "twice.json"
    assert main(["compact", str(source), "--trigger-tokens", "6000", "--out", str(once)]) == 0
    assert main(["compact", str(once), "--trigger-tokens", "2000", "--out", str(twice)]) == 0
    first = {
        m["tool_call_id"]: m["content"] for m in json.loads(once.read_text()) if m["role"] == "tool"
    }
    second = {
        m["tool_call_id"]: m["content"]
        for m in json.loads(twice.read_text())
        if m["role"] == "tool"
    }
    noted = [c for c, text in first.items() if mark_lines(text)]
    assert noted
    for call in noted:
        assert second[call] == first[call]


def test_every_way_a_note_names_a_saved_output_is_a_retrieval() -> None:
    from factrail.core.classify import verbatim_calls
    from factrail.core.model import Message, ToolUse

    cap = "0123456789abcdef0123456789abcdef"
    inputs = {
        "cli": {"command": f"factrail outputs get {cap}/call_001"},
        "curl": {"command": f"curl -s http://127.0.0.1:8080/v1/factrail/outputs/{cap}/call_001"},
        "fetch": {"url": f"http://localhost:8080/v1//factrail/outputs/{cap}/call_001"},
        "file": {"file_path": "/home/u/.cache/factrail/outputs/s-1/call_000.txt"},
        "other": {"command": "factrail outputs expire --days 3"},
    }
    messages = [
        Message("assistant", "", tool_uses=[ToolUse(i, "Bash", args)]) for i, args in inputs.items()
    ]
    assert verbatim_calls(messages) == {"cli", "curl", "fetch", "file"}
