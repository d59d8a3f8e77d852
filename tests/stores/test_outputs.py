"""Saved outputs: layout, permissions, redaction, the byte cap, ids and expiry."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from factrail.stores import output_store
from factrail.stores.outputs import (
    CAP_BYTES,
    DAY_SECONDS,
    OutputStore,
    SavedOutput,
    cap_bytes,
    output_id,
    parse_output_id,
)

NOW = 1_800_000_000.0


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def store(tmp_path: Path) -> OutputStore:
    return OutputStore(tmp_path / "outputs")


def test_save_writes_private_file_at_sanitised_path(store: OutputStore) -> None:
    saved = store.save("../sess", "toolu/1", "hello")
    assert saved.path == store.root / "_._sess" / "toolu_1.txt"
    assert saved.output_id == "_._sess/toolu_1"
    assert saved.path.read_text() == "hello"
    assert saved.bytes_written == 5 and not saved.truncated
    assert mode(saved.path) == 0o600
    assert mode(saved.path.parent) == 0o700
    assert mode(store.root) == 0o700
    assert store.path_for("../sess", "toolu/1") == saved.path


def test_save_overwrites_and_forces_modes(store: OutputStore) -> None:
    first = store.save("s", "t", "first version, longer")
    first.path.chmod(0o644)
    first.path.parent.chmod(0o755)
    second = store.save("s", "t", "second")
    assert second.path.read_text() == "second"
    assert mode(second.path) == 0o600
    assert mode(second.path.parent) == 0o700
    assert sorted(os.listdir(second.path.parent)) == ["t.txt"]  # no temp file left behind


def test_get_round_trips_and_rejects_bad_ids(store: OutputStore) -> None:
    saved = store.save("sess", "call_1", "body ✓")
    assert store.get(saved.output_id) == "body ✓"
    assert store.get("sess/missing") is None
    assert store.get("../sess/call_1") is None
    assert store.get("sess/../../call_1") is None


@pytest.mark.parametrize(
    "bad",
    ["", "a", "a/b/c", "../x", "x/..", "./x", "x/.", "/x", "x/", ".hidden/x", "a\\b/c", "a/b c"],
)
def test_parse_output_id_rejects_everything_but_two_sanitised_parts(bad: str) -> None:
    assert parse_output_id(bad) is None


def test_parse_output_id_accepts_what_output_id_makes() -> None:
    oid = output_id("../../etc", "..")
    assert oid == "_._.._etc/_."
    assert parse_output_id(oid) == ("_._.._etc", "_.")


def test_secrets_are_redacted_in_saved_output(tmp_path: Path) -> None:
    key = "sk-" + "proj-" + "A1b2" * 12
    judge_key = "judge" + "Z9y8" * 6
    store = OutputStore(tmp_path, known_secrets=[judge_key])
    saved = store.save("s", "t", f"OPENAI_API_KEY={key}\ntoken {judge_key} used\nplain line")
    text = saved.path.read_text()
    assert key not in text and judge_key not in text
    assert "plain line" in text
    assert sum(saved.redactions.values()) >= 2


def test_cap_cuts_back_to_a_char_boundary() -> None:
    text = "a" * (CAP_BYTES - 1) + "é" + "tail"  # "é" is 2 bytes, straddling the cap
    data, truncated = cap_bytes(text)
    total = len(text.encode())
    assert truncated
    expected_note = (
        f"\n[factrail saved the first {CAP_BYTES - 1} of {total} bytes of this output]\n"
    )
    assert data == b"a" * (CAP_BYTES - 1) + expected_note.encode()
    data.decode("utf-8")  # still valid UTF-8


def test_cap_keeps_text_of_exactly_the_cap() -> None:
    text = "€" * (CAP_BYTES // 3) + "ab"  # 3 bytes each, then 2: exactly 8 MiB
    data, truncated = cap_bytes(text)
    assert not truncated and data == text.encode()


def test_save_applies_the_cap(store: OutputStore) -> None:
    saved = store.save("s", "big", "x" * (CAP_BYTES + 10))
    assert saved.truncated
    content = saved.path.read_bytes()
    assert content.startswith(b"x" * CAP_BYTES + b"\n[factrail saved the first ")
    assert saved.bytes_written == len(content)


def test_lone_surrogates_do_not_break_saving(store: OutputStore) -> None:
    saved = store.save("s", "t", "bad \ud800 char")
    assert saved.path.read_text() == "bad ? char"


def age(path: Path, days: float) -> None:
    stamp = NOW - days * DAY_SECONDS
    os.utime(path, (stamp, stamp))


def test_expire_deletes_old_files_then_empty_folders(store: OutputStore) -> None:
    old = store.save("old", "a", "x").path
    mixed_old = store.save("mixed", "a", "x").path
    mixed_new = store.save("mixed", "b", "x").path
    age(old, 31)
    age(mixed_old, 40)
    age(mixed_new, 29)
    assert store.expire(NOW) == 2
    assert not old.parent.exists()
    assert not mixed_old.exists() and mixed_new.exists()
    assert store.expire(NOW, days=10) == 1
    assert not mixed_new.parent.exists()


def test_expire_of_missing_folder_is_zero(tmp_path: Path) -> None:
    assert OutputStore(tmp_path / "nope").expire(NOW) == 0


def test_expire_skips_files_it_cannot_remove(
    store: OutputStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = store.save("locked", "a", "x").path
    gone = store.save("open", "a", "x").path
    age(locked, 40)
    age(gone, 40)
    real_unlink = os.unlink

    def unlink(path: str) -> None:
        if path == str(locked):
            raise PermissionError(path)
        real_unlink(path)

    monkeypatch.setattr(os, "unlink", unlink)
    assert store.expire(NOW) == 1
    assert locked.exists() and not gone.exists() and not gone.parent.exists()


def test_maybe_expire_runs_at_most_daily(store: OutputStore) -> None:
    first = store.save("s", "a", "x").path
    age(first, 40)
    assert store.maybe_expire(NOW) == 1
    marker = store.root / ".expired"
    assert marker.stat().st_mtime == NOW and mode(marker) == 0o600
    second = store.save("s", "b", "x").path
    age(second, 40)
    assert store.maybe_expire(NOW + DAY_SECONDS - 1) is None
    assert second.exists()
    assert store.maybe_expire(NOW + DAY_SECONDS) == 1
    assert not second.exists()


def test_future_marker_suppresses_expiry(store: OutputStore) -> None:
    path = store.save("s", "a", "x").path
    age(path, 40)
    marker = store.root / ".expired"
    marker.touch()
    os.utime(marker, (NOW + 10 * DAY_SECONDS, NOW + 10 * DAY_SECONDS))
    assert store.maybe_expire(NOW) is None
    assert path.exists()


def test_default_store_lives_under_the_cache_root() -> None:
    store = output_store("", (), {"XDG_CACHE_HOME": "/c"})
    assert store is not None and store.root == Path("/c/factrail/outputs")
    assert output_store("", (), {}) is None
    configured = output_store("/o")
    assert configured is not None and configured.root == Path("/o")


def test_saving_the_same_output_again_keeps_the_file_and_refreshes_its_age(
    store: OutputStore,
) -> None:
    first = store.save("s", "t", "the same body")
    os.utime(first.path, (1_000_000, 1_000_000))
    inode = first.path.stat().st_ino
    again = store.save("s", "t", "the same body")
    assert again.path.read_text() == "the same body"
    assert again.path.stat().st_ino == inode  # not rewritten
    assert again.path.stat().st_mtime > 1_000_000
    other = store.save("s", "t", "another body")
    assert other.path.read_text() == "another body"


def test_save_all_saves_the_rest_when_one_cannot_be_written(store: OutputStore) -> None:
    blocked = store.path_for("s", "bad")
    blocked.mkdir(parents=True)  # a folder where the file should go
    got = store.save_all("s", [("a", "first"), ("bad", "second"), ("c", "third")])
    assert isinstance(got["bad"], OSError)
    saved = [got["a"], got["c"]]
    assert all(isinstance(x, SavedOutput) for x in saved)
    assert [x.path.read_text() for x in saved if isinstance(x, SavedOutput)] == ["first", "third"]
    assert mode(store.root / "s") == 0o700


def test_a_new_output_is_created_in_place_and_a_failed_write_leaves_nothing(
    store: OutputStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.save("s", "first", "warm the folders")
    old = os.umask(0o277)  # would take the owner's write bit: the mode is forced back to 0600
    try:
        saved = store.save("s", "new", "fresh body")
    finally:
        os.umask(old)
    assert saved.path.read_text() == "fresh body" and mode(saved.path) == 0o600

    def full_disk(fd: int, data: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    got = store.save_all("s", [("cut", "never written")])
    assert isinstance(got["cut"], OSError)
    assert not store.path_for("s", "cut").exists()
    assert sorted(os.listdir(store.root / "s")) == ["first.txt", "new.txt"]


def test_a_symlink_where_the_output_goes_is_replaced_not_followed(
    store: OutputStore, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    store.save("s", "warm", "folders")
    link = store.path_for("s", "t")
    link.symlink_to(outside)
    saved = store.save("s", "t", "the output")
    assert outside.read_text() == "keep me"
    assert not saved.path.is_symlink() and saved.path.read_text() == "the output"


def test_paths_for_names_what_path_for_names(store: OutputStore) -> None:
    ids = ["call_1", "../x", "toolu/2", ".hidden", ""]
    assert store.paths_for("../sess", ids) == {i: str(store.path_for("../sess", i)) for i in ids}
