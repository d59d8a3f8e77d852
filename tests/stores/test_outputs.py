"""Saved outputs: layout, capabilities, permissions, redaction, the byte cap, ids, safe reads,
quotas, the sweep and expiry."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from factrail.stores import output_store, outputs
from factrail.stores.outputs import (
    CAP_BYTES,
    DAY_SECONDS,
    EMPTY_FOLDER_GRACE_S,
    OutputLimits,
    OutputStore,
    QuotaExceeded,
    SavedOutput,
    cap_bytes,
    is_capability,
    parse_output_id,
)
from factrail.stores.secret import SECRET_BYTES, SecretFileError, load_or_create_secret

NOW = 1_800_000_000.0


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def store(tmp_path: Path) -> OutputStore:
    return OutputStore(tmp_path / "outputs")


def test_save_writes_private_file_at_sanitised_path(store: OutputStore) -> None:
    saved = store.save("../sess", "toolu/1", "hello")
    cap = store.capability("../sess")
    assert is_capability(cap)
    assert saved.path == store.root / cap / "toolu_1.txt"
    assert saved.output_id == f"{cap}/toolu_1" == store.output_id("../sess", "toolu/1")
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
    cap = store.capability("sess")
    assert store.get(saved.output_id) == "body ✓"
    assert store.get(saved.output_id, capability_only=True) == "body ✓"
    assert store.get(f"{cap}/missing") is None
    assert store.get("sess/call_1") is None  # the session key is not the capability
    assert store.get(f"../{cap}/call_1") is None
    assert store.get(f"{cap}/../../call_1") is None


def test_capabilities_are_unguessable_per_session_and_stable_per_secret(tmp_path: Path) -> None:
    one = OutputStore(tmp_path / "a", secret=b"k" * 32)
    same = OutputStore(tmp_path / "b", secret=b"k" * 32)
    other = OutputStore(tmp_path / "c", secret=b"j" * 32)
    assert one.capability("s-1") == same.capability("s-1")  # workers sharing a secret agree
    assert one.capability("s-1") != one.capability("s-2")
    assert one.capability("s-1") != other.capability("s-1")  # it depends on the secret
    assert "s-1" not in one.capability("s-1")


def test_the_generated_secret_is_made_once_kept_private_and_shared(tmp_path: Path) -> None:
    key_file = tmp_path / "data" / "outputs.key"
    first = OutputStore(tmp_path / "o1", secret_file=key_file)
    cap = first.capability("sess")
    assert mode(key_file) == 0o600
    assert len(bytes.fromhex(key_file.read_text().strip())) == SECRET_BYTES
    # a restart, or another worker on the same volume, reads the same secret back
    assert OutputStore(tmp_path / "o2", secret_file=key_file).capability("sess") == cap
    assert [p.name for p in key_file.parent.iterdir()] == ["outputs.key"]  # no temp left


def test_concurrent_first_uses_agree_on_one_secret(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    key_file = tmp_path / "outputs.key"
    with ThreadPoolExecutor(8) as pool:
        keys = set(pool.map(lambda _: load_or_create_secret(key_file), range(16)))
    assert len(keys) == 1 and keys == {bytes.fromhex(key_file.read_text().strip())}


def test_an_unusable_secret_file_is_refused_and_nothing_is_saved(tmp_path: Path) -> None:
    key_file = tmp_path / "outputs.key"
    key_file.write_text("not hex\n")
    store = OutputStore(tmp_path / "o", secret_file=key_file)
    with pytest.raises(SecretFileError):
        store.capability("s")
    got = store.save_all("s", [("t", "body")])
    assert isinstance(got["t"], OSError)
    assert key_file.read_text() == "not hex\n"  # never silently replaced
    target = tmp_path / "elsewhere"
    target.write_text("ab" * SECRET_BYTES)
    link = tmp_path / "link.key"
    link.symlink_to(target)
    with pytest.raises(OSError):
        load_or_create_secret(link)


def test_reads_refuse_symlinks_fifos_and_linked_folders(store: OutputStore, tmp_path: Path) -> None:
    saved = store.save("s", "warm", "folders")
    cap = store.capability("s")
    outside = tmp_path / "outside.txt"
    outside.write_text("a secret of the host")
    (saved.path.parent / "planted.txt").symlink_to(outside)
    assert store.get(f"{cap}/planted") is None
    os.mkfifo(saved.path.parent / "pipe.txt")
    assert store.get(f"{cap}/pipe") is None  # refused at once, no wait for a writer
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.txt").write_text("not ours to serve")
    other = "0" * 32
    (store.root / other).symlink_to(elsewhere)
    assert store.get(f"{other}/x") is None
    assert store.get(saved.output_id) == "folders"


def test_a_symlinked_session_folder_is_not_written_through(
    store: OutputStore, tmp_path: Path
) -> None:
    store.save("warm", "t", "x")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    (store.root / store.capability("s")).symlink_to(elsewhere)
    got = store.save_all("s", [("t", "body")])
    assert isinstance(got["t"], OSError)
    assert list(elsewhere.iterdir()) == [] and mode(elsewhere) == 0o755


def test_the_http_form_serves_only_capability_folders(store: OutputStore) -> None:
    legacy = store.root / "s-0123456789abcdef01234567"
    legacy.mkdir(parents=True, mode=0o700)
    (legacy / "call_1.txt").write_text("an output saved by an older version")
    assert store.get(f"{legacy.name}/call_1") == "an output saved by an older version"  # CLI
    assert store.get(f"{legacy.name}/call_1", capability_only=True) is None  # HTTP route


@pytest.mark.parametrize(
    "bad",
    ["", "a", "a/b/c", "../x", "x/..", "./x", "x/.", "/x", "x/", ".hidden/x", "a\\b/c", "a/b c"],
)
def test_parse_output_id_rejects_everything_but_two_sanitised_parts(bad: str) -> None:
    assert parse_output_id(bad) is None


def test_parse_output_id_accepts_what_output_id_makes(store: OutputStore) -> None:
    oid = store.output_id("../../etc", "..")
    cap = store.capability("../../etc")
    assert oid == f"{cap}/_."
    assert parse_output_id(oid) == (cap, "_.")


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
    assert (store.root / ".secret").exists()  # the root's own files are not outputs


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


def test_maybe_sweep_runs_at_most_daily(store: OutputStore) -> None:
    first = store.save("s", "a", "x").path
    age(first, 40)
    report = store.maybe_sweep(NOW)
    assert report is not None and report.expired == 1
    marker = store.root / ".expired"
    assert marker.stat().st_mtime == NOW and mode(marker) == 0o600
    second = store.save("s", "b", "x").path
    age(second, 40)
    assert store.maybe_sweep(NOW + DAY_SECONDS - 1) is None
    assert second.exists()
    report = store.maybe_sweep(NOW + DAY_SECONDS)
    assert report is not None and report.expired == 1
    assert not second.exists()


def test_future_marker_suppresses_expiry(store: OutputStore) -> None:
    path = store.save("s", "a", "x").path
    age(path, 40)
    marker = store.root / ".expired"
    marker.touch()
    os.utime(marker, (NOW + 10 * DAY_SECONDS, NOW + 10 * DAY_SECONDS))
    assert store.maybe_sweep(NOW) is None
    assert path.exists()


def test_default_store_lives_under_the_cache_root(tmp_path: Path) -> None:
    store = output_store("", (), {"XDG_CACHE_HOME": "/c"})
    assert store is not None and store.root == Path("/c/factrail/outputs")
    assert output_store("", (), {}) is None
    configured = output_store("/o")
    assert configured is not None and configured.root == Path("/o")
    env = {"XDG_CACHE_HOME": str(tmp_path / "c"), "XDG_DATA_HOME": str(tmp_path / "d")}
    generated = output_store("", (), env)
    assert generated is not None
    generated.capability("s")
    assert (tmp_path / "d" / "factrail" / "outputs.key").is_file()  # the data root's
    keyed = output_store("", (), env, secret="configured secret value")
    other = output_store("", (), env, secret="another secret value")
    assert keyed is not None and other is not None
    assert keyed.capability("s") != other.capability("s") != generated.capability("s")


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
    assert mode(store.root / store.capability("s")) == 0o700


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
    assert sorted(os.listdir(store.root / store.capability("s"))) == ["first.txt", "new.txt"]


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


def limited(tmp_path: Path, total: int = 0, session: int = 0) -> OutputStore:
    limits = OutputLimits(max_bytes=total, session_max_bytes=session)
    return OutputStore(tmp_path / "outputs", secret=b"q" * 32, limits=limits)


def test_the_session_quota_drops_the_sessions_oldest_first(tmp_path: Path) -> None:
    store = limited(tmp_path, session=25)
    a = store.save("s", "a", "x" * 10).path
    b = store.save("s", "b", "x" * 10).path
    age(a, 2)
    age(b, 1)
    other = store.save("t", "a", "x" * 10).path
    age(other, 3)  # older, but another session's
    c = store.save("s", "c", "x" * 10).path
    assert not a.exists() and b.exists() and c.exists() and other.exists()


def test_an_output_over_the_session_quota_is_refused_and_nothing_is_dropped(
    tmp_path: Path,
) -> None:
    store = limited(tmp_path, session=25)
    kept = store.save("s", "a", "x" * 10).path
    with pytest.raises(QuotaExceeded):
        store.save("s", "big", "x" * 26)
    assert kept.exists() and not store.path_for("s", "big").exists()


def test_one_batch_never_evicts_its_own_outputs(tmp_path: Path) -> None:
    store = limited(tmp_path, session=25)
    got = store.save_all("s", [("a", "x" * 10), ("b", "x" * 10), ("c", "x" * 10)])
    assert isinstance(got["a"], SavedOutput) and isinstance(got["b"], SavedOutput)
    assert isinstance(got["c"], QuotaExceeded)
    assert store.path_for("s", "a").exists() and store.path_for("s", "b").exists()
    assert not store.path_for("s", "c").exists()


def test_one_batch_never_evicts_its_own_outputs_under_the_total_quota(tmp_path: Path) -> None:
    store = limited(tmp_path, total=25)
    older = store.save("t", "old", "x" * 8).path
    age(older, 1)
    got = store.save_all("s", [("a", "x" * 10), ("b", "x" * 10), ("c", "x" * 10)])
    assert isinstance(got["a"], SavedOutput) and isinstance(got["b"], SavedOutput)
    assert isinstance(got["c"], QuotaExceeded)
    assert not older.exists()  # another session's oldest file made room for "b"
    assert store.path_for("s", "a").exists() and store.path_for("s", "b").exists()
    assert not store.path_for("s", "c").exists()


def test_the_total_quota_drops_the_oldest_of_any_session(tmp_path: Path) -> None:
    store = limited(tmp_path, total=25)
    a = store.save("s", "a", "x" * 10).path
    b = store.save("t", "b", "x" * 10).path
    age(a, 2)
    age(b, 1)
    c = store.save("u", "c", "x" * 10).path
    assert not a.exists() and b.exists() and c.exists()
    with pytest.raises(QuotaExceeded):
        store.save("u", "big", "x" * 26)
    assert b.exists() and c.exists()  # nothing dropped for a save that could never fit


def test_the_sweep_expires_then_enforces_both_quotas_oldest_first(tmp_path: Path) -> None:
    writer = limited(tmp_path)  # no quotas while writing: as another worker might have
    paths = {}
    for i, (session, name, days) in enumerate(
        [("s", "old", 40), ("s", "a", 5), ("s", "b", 4), ("s", "c", 3), ("t", "d", 2)]
    ):
        paths[name] = writer.save(session, name, str(i) * 10).path
        age(paths[name], days)
    sweeper = limited(tmp_path, total=25, session=25)
    report = sweeper.sweep(NOW)
    assert report.expired == 1 and report.evicted == 2
    assert {n for n, p in paths.items() if p.exists()} == {"c", "d"}
    assert report.files == 2 and report.bytes == 20
    assert sweeper.sweep(NOW) == type(report)(expired=0, evicted=0, files=2, bytes=20)


def test_a_sweep_leaves_the_empty_folder_a_save_has_just_made(store: OutputStore) -> None:
    # A save makes its session's folder, then writes into it; a sweep in between (another
    # thread, or another worker on the volume) used to remove the still empty folder and the
    # save failed, sending its result whole.
    folder = store._private_folder("s")
    now = time.time()
    store.sweep(now)
    assert folder.is_dir()
    assert store.save("s", "a", "x").path.exists()
    store.expire(now)
    assert folder.is_dir()  # not empty
    empty = store._private_folder("t")
    store.sweep(now + EMPTY_FOLDER_GRACE_S + 1)  # older than the grace: removed
    assert not empty.exists() and folder.is_dir()


def test_a_folder_removed_before_the_save_lists_it_is_made_again(
    store: OutputStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = outputs._folder_files
    calls: list[str] = []

    def vanished_once(folder: str) -> list[outputs._File]:
        calls.append(folder)
        if len(calls) == 1:
            os.rmdir(folder)  # the sweep's rmdir lands between making and listing
            raise FileNotFoundError(folder)
        return real(folder)

    monkeypatch.setattr(outputs, "_folder_files", vanished_once)
    assert store.save("s", "a", "x").path.read_text() == "x"
    assert len(calls) >= 2  # listed again once the folder was made again
