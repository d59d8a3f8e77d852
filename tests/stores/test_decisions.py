"""The decision log: UTC day files, permissions, reading back, failures and retention."""

from __future__ import annotations

import os
import stat
from datetime import date
from pathlib import Path

import pytest

from factrail.session.keys import header_key
from factrail.stores.decisions import (
    DecisionLog,
    default_decision_log,
    hashed_session,
    safe_endpoint,
    utc_day,
)

DAY = 24 * 60 * 60
T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_utc_day() -> None:
    assert utc_day(T0) == date(2023, 11, 14)
    assert utc_day(T0 + 2 * 3600) == date(2023, 11, 15)  # past midnight UTC
    assert utc_day(-5 * DAY) == date(1970, 1, 1)


def test_append_writes_one_line_per_record_in_day_files(tmp_path: Path) -> None:
    log = DecisionLog(tmp_path / "decisions")
    assert log.append({"ts_ms": 1, "outcome": "ok"}, T0)
    assert log.append({"ts_ms": 2, "outcome": "ok"}, T0 + 60)
    assert log.append({"ts_ms": 3, "goal": None}, T0 + 2 * 3600)
    first = tmp_path / "decisions" / "2023-11-14.jsonl"
    second = tmp_path / "decisions" / "2023-11-15.jsonl"
    assert first.read_bytes().count(b"\n") == 2
    assert second.read_text() == '{"ts_ms":3,"goal":null}\n'
    assert mode(first) == 0o600 and mode(tmp_path / "decisions") == 0o700
    assert [r["ts_ms"] for r in log.read_all()] == [1, 2, 3]


def test_append_forces_file_mode(tmp_path: Path) -> None:
    log = DecisionLog(tmp_path)
    log.append({"a": 1}, T0)
    path = log.path_for(utc_day(T0))
    path.chmod(0o644)
    log.append({"a": 2}, T0)
    assert mode(path) == 0o600


def test_append_failures_return_false(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert not DecisionLog(blocker / "decisions").append({"a": 1}, T0)
    assert not DecisionLog(tmp_path / "ok").append({"a": object()}, T0)


def test_read_all_skips_bad_lines_and_orders_by_name(tmp_path: Path) -> None:
    (tmp_path / "2024-01-02.jsonl").write_text('{"n": 3}\n')
    (tmp_path / "2024-01-01.jsonl").write_text('{"n": 1}\nnot json\n[1, 2]\n\n{"n": 2}\n')
    (tmp_path / "notes.txt").write_text('{"n": 99}\n')
    assert [r["n"] for r in DecisionLog(tmp_path).read_all()] == [1, 2, 3]


def test_read_all_of_missing_folder_is_empty(tmp_path: Path) -> None:
    assert list(DecisionLog(tmp_path / "missing").read_all()) == []


def test_expire_deletes_day_files_past_retention(tmp_path: Path) -> None:
    for name in ["2023-10-14.jsonl", "2023-10-15.jsonl", "2023-11-14.jsonl", "keep.jsonl"]:
        (tmp_path / name).write_text("{}\n")
    log = DecisionLog(tmp_path, retention_days=30)
    assert log.expire(T0) == 1  # 2023-10-14 is 31 days before 2023-11-14
    assert sorted(os.listdir(tmp_path)) == ["2023-10-15.jsonl", "2023-11-14.jsonl", "keep.jsonl"]


def test_first_append_of_a_day_applies_retention(tmp_path: Path) -> None:
    log = DecisionLog(tmp_path, retention_days=1)
    log.append({"n": 1}, T0)
    log.append({"n": 2}, T0 + 3 * DAY)
    assert [r["n"] for r in log.read_all()] == [2]


@pytest.mark.parametrize(
    ("env", "root"),
    [
        ({"XDG_DATA_HOME": "/d"}, Path("/d/factrail/decisions")),
        ({"HOME": "/h"}, Path("/h/.local/share/factrail/decisions")),
    ],
)
def test_default_log_lives_under_the_data_root(env: dict[str, str], root: Path) -> None:
    log = default_decision_log(env)
    assert log is not None and log.root == root


def test_no_default_log_without_a_data_root() -> None:
    assert default_decision_log({}) is None


@pytest.mark.parametrize(
    ("url", "safe"),
    [
        ("https://api.example.com/v1/judge", "https://api.example.com/v1/judge"),
        ("https://user:pw@api.example.com/v1/x?key=abc#frag", "https://api.example.com/v1/x"),
        ("http://:pw@10.0.0.5:8000/v1?token=t", "http://10.0.0.5:8000/v1"),
        ("http://u:p@[::1]:9/x", "http://[::1]:9/x"),
        ("http://h:notaport/x", ""),
        ("", ""),
    ],
)
def test_safe_endpoint_drops_userinfo_query_and_fragment(url: str, safe: str) -> None:
    assert safe_endpoint(url) == safe


def test_session_keys_are_logged_hashed() -> None:
    key = header_key("run-1")
    assert hashed_session(key) == key  # already a hashed key
    named = hashed_session("my-project/alice")
    assert named.startswith("x-") and "alice" not in named
    assert hashed_session("my-project/alice") == named  # stable


def test_a_record_is_scrubbed_on_its_way_to_disk(tmp_path: Path) -> None:
    password = "pw-" + "q7" * 8
    log = DecisionLog(tmp_path / "decisions")
    record = {
        "session": "demo-session-name",
        "judge": {
            "kind": "tev",
            "endpoint": f"https://bob:{password}@judge.example/v1/chat/completions?api_key=k1",
            "model": "tev1",
        },
        "endpoint": f"https://alice:{password}@upstream.example/v1?sig=s1",
    }
    assert log.append(record, T0)
    text = (tmp_path / "decisions" / "2023-11-14.jsonl").read_text()
    for leaked in (password, "bob", "alice", "api_key", "sig=", "demo-session-name"):
        assert leaked not in text
    (got,) = log.read_all()
    assert got["judge"] == {
        "kind": "tev",
        "endpoint": "https://judge.example/v1/chat/completions",
        "model": "tev1",
    }
    assert got["endpoint"] == "https://upstream.example/v1"
    assert got["session"] == hashed_session("demo-session-name")
    assert record["session"] == "demo-session-name"  # the caller's record is left alone
