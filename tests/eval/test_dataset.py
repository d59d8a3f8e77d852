"""`export_dataset`: hindsight-labelled Tev records, split by transcript, redacted, private."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from factrail.core import tev
from factrail.core.model import Message, ToolResult, ToolUse
from factrail.eval.dataset import (
    DATA_FILES,
    MANIFEST,
    DatasetExistsError,
    cut_indices,
    export_dataset,
    split_of,
    transcript_key,
)
from tests.leaks import new_family_leaks
from tests.options import plan_options

SECRET = "sk-" + "proj-" + "Q7x9" * 8
USED = 3
"""The agent later writes back the ids of the first USED outputs, nothing of the others."""


def session(tag: str, turns: int = 12, prompt: str = "fix the failing build") -> list[Message]:
    """A transcript whose tool outputs introduce ids; the agent uses the first USED later."""
    messages = [Message("user", prompt)]
    for i in range(turns):
        uid = f"{tag}-call-{i}"
        messages.append(
            Message(
                "assistant",
                f"step {i}",
                tool_uses=[ToolUse(uid, "Bash", {"command": f"./probe --item {tag}{i}"})],
            )
        )
        out = f"probe {i}: build-{tag}{i}000 ok\nunused-{tag}{i}999 line\n" + "log line\n" * 40
        messages.append(Message("user", tool_results=[ToolResult(uid, out)]))
    used = " ".join(f"build-{tag}{i}000" for i in range(USED))
    messages.append(Message("assistant", f"Deploying {used}"))
    messages.append(Message("user", "thanks"))
    messages.append(Message("assistant", "done"))
    return messages


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def names_in(split: str) -> list[str]:
    """Transcript names that land in `split` at the default 0.1 dev share."""
    return [n for n in (f"s{i}" for i in range(200)) if split_of(n, 0.1) == split]


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Path, Any]:
    names = names_in("train")[:2] + names_in("dev")[:2]
    out = tmp_path / "ds"
    manifest = export_dataset([(n, session(n)) for n in names], out, options=plan_options())
    return out, manifest


def test_files_are_private_and_the_folder_is_0700(exported: tuple[Path, Any]) -> None:
    out, _ = exported
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    for sub in ("records", "sft"):
        assert stat.S_IMODE((out / sub).stat().st_mode) == 0o700
    for rel in (*DATA_FILES, MANIFEST):
        assert stat.S_IMODE((out / rel).stat().st_mode) == 0o600


def test_manifest_counts_match_the_files(exported: tuple[Path, Any]) -> None:
    out, manifest = exported
    written = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    assert written == manifest.as_dict()
    for split in ("train", "dev"):
        records = read_jsonl(out / f"records/{split}.jsonl")
        sft = read_jsonl(out / f"sft/{split}.jsonl")
        assert len(records) == len(sft) > 0
        for key in ("true", "false"):
            assert written["counts"][f"{split}/{key}"] == sum(
                r["answer_key"] == key for r in records
            )
        assert written["labels"][f"{split}/hindsight"] == len(records)
        assert written["transcripts"][split] == len({r["source"]["transcript"] for r in records})
    for rel, digest in written["files"].items():
        assert hashlib.sha256((out / rel).read_bytes()).hexdigest() == digest
    assert manifest.records == sum(written["counts"].values())
    assert written["counts"]["train/true"] > 0
    assert written["counts"]["train/false"] > 0


def test_split_is_by_transcript(exported: tuple[Path, Any]) -> None:
    out, _ = exported
    train = {r["source"]["transcript"] for r in read_jsonl(out / "records/train.jsonl")}
    dev = {r["source"]["transcript"] for r in read_jsonl(out / "records/dev.jsonl")}
    assert train == {transcript_key(n) for n in names_in("train")[:2]}
    assert dev == {transcript_key(n) for n in names_in("dev")[:2]}


def test_labels_follow_hindsight(exported: tuple[Path, Any]) -> None:
    out, _ = exported
    records = read_jsonl(out / "records/train.jsonl") + read_jsonl(out / "records/dev.jsonl")
    for r in records:
        src = r["source"]
        assert src["label"] == "hindsight" and src["probability"] is None
        call = int(src["tool_use_id"].rsplit("-", 1)[1])
        expected = call < USED
        assert r["answer_key"] == ("true" if expected else "false"), r["id"]
        assert r["answer"] == ("A" if expected else "B")
        assert r["options"] == tev.OPTIONS
    assert len({r["id"] for r in records}) == len(records)


def test_sft_user_message_is_the_shared_tev_rendering(exported: tuple[Path, Any]) -> None:
    out, _ = exported
    records = read_jsonl(out / "records/train.jsonl")
    sft = read_jsonl(out / "sft/train.jsonl")
    for record, example in zip(records, sft, strict=True):
        system, user, assistant = example["messages"]
        assert system == {"role": "system", "content": tev.SYSTEM}
        instructions = record["question"].removesuffix(tev.QUESTION_SUFFIX)
        assert instructions != record["question"]
        assert user["content"] == tev.render_decision(json.loads(record["state"]), instructions)
        assert assistant == {"role": "assistant", "content": record["answer"]}


def test_states_are_redacted(tmp_path: Path) -> None:
    prompt = f"deploy with OPENAI_API_KEY={SECRET} please"
    manifest = export_dataset(
        [("s0", session("s0", prompt=prompt))], tmp_path / "ds", options=plan_options()
    )
    text = "".join((tmp_path / "ds" / rel).read_text(encoding="utf-8") for rel in DATA_FILES)
    assert manifest.records > 0
    assert SECRET not in text
    assert "Q7x9Q7x9" not in text
    assert "[REDACTED:" in text
    assert manifest.redactions > 0


def test_states_are_redacted_for_the_newer_families(tmp_path: Path) -> None:
    leaks = new_family_leaks()
    prompt = "deploy with:\n" + "\n".join(line for line, _, _ in leaks)
    manifest = export_dataset(
        [("s0", session("s0", prompt=prompt))], tmp_path / "ds", options=plan_options()
    )
    text = "".join((tmp_path / "ds" / rel).read_text(encoding="utf-8") for rel in DATA_FILES)
    assert manifest.records > 0
    for line, secret, family in leaks:
        assert secret not in text, line
        assert f"[REDACTED:{family}]" in text, line


def test_refuses_an_existing_folder(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    out.mkdir()
    (out / "keep.txt").write_text("x", encoding="utf-8")
    with pytest.raises(DatasetExistsError, match="refusing to overwrite"):
        export_dataset([("s0", session("s0"))], out, options=plan_options())
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_empty_export_still_writes_every_file(tmp_path: Path) -> None:
    manifest = export_dataset([], tmp_path / "ds", options=plan_options())
    for rel in DATA_FILES:
        assert (tmp_path / "ds" / rel).read_text(encoding="utf-8") == ""
    assert manifest.records == 0
    assert manifest.transcripts == {"train": 0, "dev": 0}


def _teacher_record(session_key: str, p_call: float, p_result: float) -> dict[str, Any]:
    state = {"context": "c", "goal": f"use {SECRET}", "history": []}
    return {
        "session": session_key,
        "requests": [
            {
                "state": state,
                "questions": {
                    "call_t1": {"type": "noul", "instructions": "Tool call t1 (Bash) matters"},
                    "result_t1": {"type": "noul", "instructions": "Output of t1 matters"},
                    "call_t2": {"type": "noul", "instructions": "Tool call t2 (Bash) matters"},
                },
                "answers": {"call_t1": p_call, "result_t1": p_result},
                "calls": [["t1", "toolu_1"], ["t2", "toolu_2"]],
            }
        ],
    }


def test_teacher_records_share_the_transcript_split(tmp_path: Path) -> None:
    train, dev = names_in("train")[0], names_in("dev")[0]
    teacher = [_teacher_record(train, 0.9, 0.2), _teacher_record(dev, 0.4, 0.6)]
    manifest = export_dataset(
        [(train, session(train)), (dev, session(dev))],
        tmp_path / "ds",
        options=plan_options(),
        teacher_records=teacher,
    )
    assert manifest.labels["train/teacher"] == 2
    assert manifest.labels["dev/teacher"] == 2
    for split, name in (("train", train), ("dev", dev)):
        records = read_jsonl(tmp_path / "ds" / f"records/{split}.jsonl")
        assert {r["source"]["transcript"] for r in records} == {transcript_key(name)}
    dev_teacher = [
        r
        for r in read_jsonl(tmp_path / "ds" / "records/dev.jsonl")
        if r["source"]["label"] == "teacher"
    ]
    assert [(r["source"]["kind"], r["answer_key"]) for r in dev_teacher] == [
        ("call", "false"),
        ("result", "true"),
    ]
    assert all(r["source"]["cut"] is None for r in dev_teacher)
    assert dev_teacher[0]["source"]["probability"] == 0.4
    assert SECRET not in (tmp_path / "ds" / "records/dev.jsonl").read_text(encoding="utf-8")


def test_teacher_states_over_the_budget_are_left_out(tmp_path: Path) -> None:
    record = _teacher_record("s0", 0.9, 0.9)
    record["requests"][0]["state"]["goal"] = "word " * 3000
    manifest = export_dataset([], tmp_path / "ds", options=plan_options(), teacher_records=[record])
    assert manifest.records == 0
    assert manifest.skipped == {"teacher/state-too-long": 1}


def test_no_teacher_records_unless_asked(tmp_path: Path) -> None:
    manifest = export_dataset([("s0", session("s0"))], tmp_path / "ds", options=plan_options())
    assert manifest.labels["train/teacher"] == manifest.labels["dev/teacher"] == 0


def test_cut_indices_round_half_away_and_skip() -> None:
    assert cut_indices(10) == [5, 8]  # 7.5 rounds up
    assert cut_indices(3) == [2]  # 1.5 → 2, 2.25 → 2 (a repeat)
    assert cut_indices(2) == []


def test_rendered_prompt_stays_short_at_the_default_budget(exported: tuple[Path, Any]) -> None:
    from factrail.core.tokens import estimate_tokens

    out, _ = exported
    for example in read_jsonl(out / "sft/train.jsonl"):
        assert estimate_tokens(example["messages"][1]["content"]) < 2300
