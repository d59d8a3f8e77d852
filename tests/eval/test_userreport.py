"""`factrail report`: the figures of each session, the page, the progress bar, the exit codes."""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path

import pytest

from factrail.cli import main
from factrail.eval.sessions import load
from factrail.eval.userreport import ReportRun, build, trace
from factrail.settings import Settings
from tests.session_files import claude_code, codex_rollout, openai_chat, steps

TRIGGER = 2000


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def _secret() -> str:
    """A GitHub-token-shaped string, built at run time so no literal sits in the tree."""
    return "ghp_" + hashlib.sha256(b"report").hexdigest()[:36]


def _tree(root: Path, secret: str) -> dict[str, Path]:
    """Three sessions (one per format) under a folder tree, and a broken JSON file."""
    rounds = steps("report", rounds=8, secret=secret)
    project = root / "projects" / "-home-someone-app"
    day = root / "sessions" / "2025" / "05" / "01"
    chat = root / "chat"
    for folder in (project, day, chat):
        folder.mkdir(parents=True)
    (chat / "broken.json").write_text('{"messages": 3', encoding="utf-8")
    return {
        "claude": claude_code(project / "9d2e.jsonl", rounds),
        "codex": codex_rollout(day / "rollout-2025-05-01T10-00-00-r1.jsonl", rounds),
        "chat": openai_chat(chat / f"s-{secret}.json", rounds, envelope=True,
                            agent=f"agent {secret}", model=f"m-{secret}"),
    }  # fmt: skip


def test_each_format_is_replayed_under_factrail_erase_and_everything(tmp_path: Path) -> None:
    files = _tree(tmp_path, _secret())
    report = build(ReportRun((tmp_path,), trigger=TRIGGER), Settings(), io.StringIO())
    by_client = {f.client: f for f in report.sessions}
    assert sorted(by_client) == ["Claude Code", "Codex CLI", "agent [REDACTED:gh-token]"]
    assert [s.name for s in report.skipped] == ["broken.json"]
    assert report.skipped[0].reason.startswith("not a transcript")
    assert by_client["Claude Code"].profile == "anthropic"
    assert by_client["Codex CLI"].profile == "openai"
    for f in report.sessions:
        assert f.turns == 15 and f.trigger == TRIGGER
        assert f.peak_whole > 2 * f.peak_factrail and f.compactions >= 1
        assert f.billed_factrail < min(f.billed_everything, f.billed_erase)
        assert f.facts_needed > 0 and f.facts_factrail > f.facts_erase
    assert report.trace is not None
    largest = max(report.sessions, key=lambda f: f.peak_whole)
    assert report.trace.name == largest.name
    assert abs(max(report.trace.whole) - largest.peak_whole) <= 1
    assert abs(max(report.trace.sent) - largest.peak_factrail) <= 1
    assert abs(report.trace.trigger - TRIGGER) <= 1
    assert files  # every file written


def test_the_trace_replays_what_the_simulation_measured(tmp_path: Path) -> None:
    path = claude_code(tmp_path / "a.jsonl", steps("trace", rounds=8))
    report = build(ReportRun((path,), trigger=TRIGGER), Settings(), io.StringIO())
    (figures,) = report.sessions
    again = trace(load(path), Settings(), figures)
    assert again == report.trace
    assert len(again.whole) == figures.turns
    assert sum(b < a for a, b in zip(again.whole, again.sent, strict=True)) > 0


def test_the_page_is_self_contained_and_holds_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = _secret()
    _tree(tmp_path, secret)
    odd = openai_chat(tmp_path / "a<b>&.json", steps("odd", rounds=4))
    notes = tmp_path / "notes.txt"
    notes.write_text("not a session")
    out = tmp_path / "out" / "r.html"
    out.parent.mkdir()
    argv = ["report", str(tmp_path), str(notes), "--trigger", str(TRIGGER), "-o", str(out)]
    assert main(argv) == 0
    page = out.read_text(encoding="utf-8")
    assert capsys.readouterr().err.strip().endswith(f"4 session(s) → {out}")
    rows = re.findall(r'<tr><td title="([^"]*)">', page)
    assert sorted(rows) == sorted(
        ["9d2e.jsonl", "rollout-2025-05-01T10-00-00-r1.jsonl", "s-[REDACTED:gh-token].json",
         "a&lt;b&gt;&amp;.json"]
    )  # fmt: skip
    assert odd.name not in page and "<b>" not in page
    assert page.count("<svg") == 2 and "<polyline" in page and "<circle" in page
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"\b(src|href)\s*=|url\(|@import", page)
    assert "default-src 'none'" in page
    assert "broken.json" in page and "notes.txt" in page and "not a .json or .jsonl" in page
    assert secret not in page and secret[4:20] not in page
    assert "/home/someone" not in page and str(tmp_path) not in page
    assert "make test-" not in page and "FAILED" not in page  # no transcript content at all


def test_no_session_found_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.json").write_text("nope", encoding="utf-8")
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path), str(tmp_path / "gone"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no sessions found" in err and "broken.json" in err and "gone" in err
    assert not out.exists()


def test_a_session_with_no_turn_to_replay_is_skipped(tmp_path: Path) -> None:
    short = openai_chat(tmp_path / "short.json", [])
    report = build(ReportRun((short,)), Settings(), io.StringIO())
    assert report.sessions == []
    assert [(s.name, s.reason) for s in report.skipped] == [
        ("short.json", "no assistant turn to replay")
    ]


def test_the_bar_is_drawn_on_a_terminal_only(tmp_path: Path) -> None:
    rounds = steps("bar", rounds=3, filler=5)
    openai_chat(tmp_path / "one.json", rounds)
    openai_chat(tmp_path / "two.json", rounds)
    quiet = io.StringIO()
    build(ReportRun((tmp_path,)), Settings(), quiet)
    assert quiet.getvalue() == ""
    tty = FakeTTY()
    build(ReportRun((tmp_path,)), Settings(), tty)
    frames = [f.rstrip() for f in tty.getvalue().rstrip("\n").split("\r")[1:]]
    assert frames[0].endswith("0/2 one.json") and frames[1].endswith("1/2 two.json")
    assert frames[-1].endswith("2/2") and tty.getvalue().endswith("\n")


def test_a_trigger_below_one_token_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = openai_chat(tmp_path / "a.json", steps("t", rounds=3, filler=5))
    assert main(["report", str(path), "--trigger", "0", "-o", str(tmp_path / "r.html")]) == 1
    assert "--trigger must be a positive number" in capsys.readouterr().err
