"""Staging outputs ahead: `OutputStore.stage_all` / `commit`, and the saver process that stages
while the rails run (a real spawned child)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from factrail.stores.outputs import OutputStore, SavedOutput, Staged
from factrail.stores.saver import OutputSaver
from tests.stores.saver_support import started

SECRET = "sk-" + "proj-" + "A1b2C3d4" * 4  # assembled at run time: no key-shaped literal


def files(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


@pytest.fixture
def store(tmp_path: Path) -> OutputStore:
    return OutputStore(tmp_path / "outputs", known_secrets=["hunter2-known-value"])


def test_commit_puts_the_needed_in_place_and_removes_the_rest(store: OutputStore) -> None:
    staged = store.stage_all(
        "s", [("a", f"first {SECRET}"), ("b", "second"), ("c", "third hunter2-known-value")]
    )
    folder = store.root / "s"
    assert all(isinstance(x, Staged) and x.temp for x in staged.values())
    assert all(name.startswith(".") for name in files(folder))  # nothing visible yet
    saved = store.commit("s", staged, {"a", "c"})
    assert files(folder) == ["a.txt", "c.txt"]
    assert set(saved) == {"a", "c"}
    a, c = saved["a"], saved["c"]
    assert isinstance(a, SavedOutput) and isinstance(c, SavedOutput)
    assert a.path.read_text() == "first [REDACTED:sk-proj]" and a.redactions == {"sk-proj": 1}
    assert c.path.read_text() == "third [REDACTED:known]"
    assert a.output_id == "s/a" and (a.path.stat().st_mode & 0o777) == 0o600
    same = store.save_all("t", [("a", f"first {SECRET}")])["a"]
    assert isinstance(same, SavedOutput) and same.path.read_bytes() == a.path.read_bytes()


def test_an_identical_file_is_kept_and_only_its_age_refreshed(store: OutputStore) -> None:
    first = store.save("s", "a", "body")
    os.utime(first.path, (1_000_000, 1_000_000))
    inode = first.path.stat().st_ino
    staged = store.stage_all("s", [("a", "body")])
    got = staged["a"]
    assert isinstance(got, Staged) and got.temp is None
    store.commit("s", staged, {"a"})
    assert first.path.stat().st_ino == inode and first.path.stat().st_mtime > 1_000_000


def test_a_staging_error_reaches_the_caller_only_when_needed(store: OutputStore) -> None:
    store.path_for("s", "bad").mkdir(parents=True)  # a folder where the file should go
    staged = store.stage_all("s", [("bad", "x"), ("ok", "y")])
    assert isinstance(staged["bad"], Staged)  # staged under a temp name: the rename fails
    saved = store.commit("s", staged, {"bad", "ok"})
    assert isinstance(saved["bad"], OSError) and isinstance(saved["ok"], SavedOutput)
    assert files(store.root / "s") == ["bad.txt", "ok.txt"]  # the failed temp was removed
    assert store.commit("s", store.stage_all("s", [("bad", "x")]), set()) == {}


@pytest.fixture(scope="module")
def saver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OutputSaver]:
    root = tmp_path_factory.mktemp("saver") / "outputs"
    s = started(OutputSaver(OutputStore(root, ["hunter2-known-value"]), min_chars=0))
    yield s
    s.close()


def test_the_child_stages_and_commits_what_the_parent_would_save(saver: OutputSaver) -> None:
    outputs = [(f"call_{i}", f"line {i} {SECRET}\n" * 50) for i in range(20)]
    staging = saver.stage("sess", outputs)
    assert staging is not None
    saved = saver.commit(staging, ["call_3", "call_7"])
    assert saved is not None and set(saved) == {"call_3", "call_7"}
    assert files(saver.store.root / "sess") == ["call_3.txt", "call_7.txt"]  # no temp stays
    inline = OutputStore(saver.store.root.parent / "inline", ["hunter2-known-value"])
    want = inline.save_all("sess", outputs[3:4])["call_3"]
    got = saved["call_3"]
    assert isinstance(got, SavedOutput) and isinstance(want, SavedOutput)
    assert got.path.read_bytes() == want.path.read_bytes()
    assert got.redactions == want.redactions == {"sk-proj": 50}
    assert got.output_id == "sess/call_3"


def test_small_batches_and_an_unready_child_are_left_to_the_caller(tmp_path: Path) -> None:
    s = OutputSaver(OutputStore(tmp_path), min_chars=1000)
    assert s.stage("s", [("a", "x" * 5000)]) is None  # not ready (the call starts the child)
    s.close()
    s.start()  # closed for good: nothing starts
    assert not s.ready and s._child is None
    assert s.stage("s", [("a", "x" * 999)]) is None  # too small to be worth the trip


def test_a_staging_given_up_on_leaves_no_files(saver: OutputSaver) -> None:
    outputs = [(f"slow_{i}", "word " * 40_000) for i in range(40)]
    staging = saver.stage("given-up", outputs)
    assert staging is not None
    assert saver.commit(staging, ["slow_1"], timeout=0.0) is None  # the caller saves in-line
    assert len(staging.answer.result(timeout=60)) == 40  # the child staged them all ...
    folder = saver.store.root / "given-up"
    deadline = time.monotonic() + 30
    while files(folder) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert files(folder) == []  # ... and what it wrote went once it was given up on


def test_a_dead_child_is_replaced_and_its_stagings_answer_none(tmp_path: Path) -> None:
    s = started(OutputSaver(OutputStore(tmp_path / "o"), min_chars=0))
    child = s._child
    assert child is not None
    child.proc.kill()
    child.proc.wait()
    staging = s.stage("s", [("a", "x")])
    if staging is not None:  # the reader had not seen the death yet
        assert s.commit(staging, ["a"]) is None
    deadline = time.monotonic() + 60
    while not s.ready and time.monotonic() < deadline:
        s.stage("s", [("a", "x")])  # the first call after the death starts a new child
        time.sleep(0.05)
    assert s.ready and s._child is not child  # a new child answers
    again = s.stage("s", [("a", "x")])
    assert again is not None and isinstance(s.commit(again, ["a"]), dict)
    s.close()


def test_a_child_that_cannot_start_leaves_saving_in_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[object] = []

    def no_process(*args: object, **kwargs: object) -> None:
        calls.append(args)
        raise OSError(2, "No such file or directory")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    s = OutputSaver(OutputStore(tmp_path), min_chars=0)
    s.start()  # logged, not raised
    assert not s.ready
    assert s.stage("s", [("a", "x")]) is None
    assert len(calls) == 1  # no second try within RETRY_S


def test_an_answer_that_cannot_be_read_ends_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import factrail.stores.saver as saver_module

    s = started(OutputSaver(OutputStore(tmp_path / "o"), min_chars=0))
    child = s._child
    assert child is not None

    def unreadable(stream: object) -> object:
        raise AttributeError("an answer of an unknown class")

    monkeypatch.setattr(saver_module, "_receive", unreadable)
    staging = s.stage("s", [("a", "x")])  # answered through the reader's pending read ...
    assert staging is not None and isinstance(s.commit(staging, ["a"]), dict)
    child.proc.wait(timeout=30)  # ... whose next read fails: the child's input is closed
    assert child.gone and not s.ready
    s.close()
