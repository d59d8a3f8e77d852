"""`factrail report`'s loaders: Claude Code sessions, Codex rollouts, OpenAI chat JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from factrail.core.formats.base import FormatError
from factrail.eval.codex import parse_rollout
from factrail.eval.sessions import discover, load, newest, shown_name, turns
from tests.session_files import claude_code, codex_rollout, openai_chat, steps

ROUNDS = steps("loader", rounds=3, filler=5)


def _shape(messages: list) -> tuple[int, int, str]:
    uses = sum(len(m.tool_uses) for m in messages)
    results = sum(len(m.tool_results) for m in messages)
    return uses, results, "".join(m.role[0] for m in messages)


def test_a_claude_code_session_reads_as_calls_results_and_remarks(tmp_path: Path) -> None:
    s = load(claude_code(tmp_path / "3f1c.jsonl", ROUNDS, model="claude-opus-4-6"))
    assert (s.client, s.model, s.name) == ("Claude Code", "claude-opus-4-6", "3f1c.jsonl")
    assert _shape(s.messages) == (3, 3, "u" + "auau" * 3)
    assert s.messages[1].tool_uses[0].input == {"command": "make test-0"}
    assert s.messages[2].tool_results[0].text == ROUNDS[0].output
    assert turns(s.messages) == 5  # every assistant message but the first


@pytest.mark.parametrize("wrapped", [True, False])
def test_a_codex_rollout_reads_its_items_and_leaves_reasoning_out(
    tmp_path: Path, wrapped: bool
) -> None:
    path = codex_rollout(tmp_path / "rollout-2025-05-01T10-00-00-r1.jsonl", ROUNDS, wrapped=wrapped)
    s = load(path)
    assert s.client == "Codex CLI"
    assert s.model == ("gpt-5-codex" if wrapped else "")
    assert _shape(s.messages) == (3, 3, "u" + "auau" * 3)
    assert s.messages[1].tool_uses[0].tool_use_id == "call_0"
    assert s.messages[2].tool_results[0].text == ROUNDS[0].output
    assert all("gAAA" not in m.text for m in s.messages)


def test_a_rollout_is_recognised_by_its_lines_whatever_its_name(tmp_path: Path) -> None:
    s = load(codex_rollout(tmp_path / "session.jsonl", ROUNDS))
    assert s.client == "Codex CLI" and len(s.messages) == 13


def test_text_with_no_rollout_line_is_not_a_rollout() -> None:
    with pytest.raises(FormatError):
        parse_rollout('{"hello": 1}\nnot json\n')


def test_openai_chat_lists_and_envelopes(tmp_path: Path) -> None:
    plain = load(openai_chat(tmp_path / "a.json", ROUNDS))
    assert (plain.client, plain.model) == ("OpenAI chat", "")
    assert _shape(plain.messages) == (3, 3, "u" + "auau" * 3)
    wrapped = load(openai_chat(tmp_path / "b.json", ROUNDS, envelope=True, agent="Codex CLI",
                               model="gpt-5.4"))  # fmt: skip
    assert (wrapped.client, wrapped.model) == ("Codex CLI", "gpt-5.4")
    assert _shape(wrapped.messages) == _shape(plain.messages)


def test_a_malformed_json_file_raises_a_format_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError):
        load(bad)


def test_discover_recurses_skips_subagents_and_reports_what_it_cannot_read(
    tmp_path: Path,
) -> None:
    project = tmp_path / "projects" / "-home-someone-app"
    (project / "abc" / "subagents").mkdir(parents=True)
    claude_code(project / "abc.jsonl", ROUNDS)
    claude_code(project / "abc" / "subagents" / "agent-1.jsonl", ROUNDS)
    day = tmp_path / "sessions" / "2025" / "05" / "01"
    day.mkdir(parents=True)
    codex_rollout(day / "rollout-1.jsonl", ROUNDS)
    (day / "notes.txt").write_text("x")
    notes = tmp_path / "notes.md"
    notes.write_text("x")
    found, skipped = discover(
        [tmp_path / "projects", tmp_path / "sessions", notes, tmp_path / "gone.json", project]
    )
    assert [p.name for p in found] == ["abc.jsonl", "rollout-1.jsonl"]
    assert [(s.name, s.reason) for s in skipped] == [
        ("notes.md", "not a .json or .jsonl file"),
        ("gone.json", "no such file or folder"),
    ]


def test_newest_keeps_the_most_recently_modified_in_order(tmp_path: Path) -> None:
    import os

    paths = []
    for i, name in enumerate(["a.json", "b.json", "c.json"]):
        p = tmp_path / name
        p.write_text("[]")
        os.utime(p, (1000 + (i * 7) % 3, 1000 + (i * 7) % 3))  # mtimes 1000, 1001, 1002
        paths.append(p)
    assert [p.name for p in newest(paths, 2)] == ["b.json", "c.json"]
    assert newest(paths, 0) == paths


def test_shown_names_are_redacted_and_shortened() -> None:
    token = "ghp_" + "a1B2c3D4e5" * 3 + "xYz9Qw"
    assert shown_name(Path(f"/home/alice/s-{token}.json")) == "s-[REDACTED:gh-token].json"
    long = shown_name(Path("/x/" + "n" * 80 + ".jsonl"))
    assert len(long) == 48 and "…" in long and long.endswith(".jsonl")
