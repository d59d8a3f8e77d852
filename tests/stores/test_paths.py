"""XDG roots, name sanitising and private directories."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factrail.stores.paths import cache_root, data_root, ensure_private_dir, sanitise_name


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_xdg_values_win_when_absolute() -> None:
    env = {"XDG_CACHE_HOME": "/x/cache", "XDG_DATA_HOME": "/x/data", "HOME": "/home/u"}
    assert cache_root(env) == Path("/x/cache/factrail")
    assert data_root(env) == Path("/x/data/factrail")


@pytest.mark.parametrize("xdg", ["", "relative/dir"])
def test_empty_or_relative_xdg_falls_back_to_home(xdg: str) -> None:
    env = {"XDG_CACHE_HOME": xdg, "XDG_DATA_HOME": xdg, "HOME": "/home/u"}
    assert cache_root(env) == Path("/home/u/.cache/factrail")
    assert data_root(env) == Path("/home/u/.local/share/factrail")


def test_no_usable_root_without_home() -> None:
    assert cache_root({}) is None
    assert data_root({"XDG_DATA_HOME": "rel"}) is None


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("../../etc/passwd", "_._.._etc_passwd"),
        ("..", "_."),
        (".expired", "_expired"),
        ("", "_"),
        ("toolu_01AbC-9.x", "toolu_01AbC-9.x"),
        ("sessión/ü", "sessi_n__"),
        ("a\\b", "a_b"),
    ],
)
def test_sanitise_examples(raw: str, safe: str) -> None:
    assert sanitise_name(raw) == safe


def test_sanitise_keeps_first_200_chars() -> None:
    assert sanitise_name("a" * 250) == "a" * 200


@settings(max_examples=200)
@given(st.text(max_size=260))
def test_sanitised_names_are_single_safe_components(raw: str) -> None:
    safe = sanitise_name(raw)
    assert 1 <= len(safe) <= 200
    assert not safe.startswith(".")
    assert "/" not in safe and "\\" not in safe
    assert sanitise_name(safe) == safe


def test_ensure_private_dir_creates_and_forces_0700(tmp_path: Path) -> None:
    nested = tmp_path / "a" / "b"
    ensure_private_dir(nested)
    assert mode(nested) == 0o700
    assert mode(tmp_path / "a") == 0o700
    existing = tmp_path / "open"
    existing.mkdir(mode=0o755)
    existing.chmod(0o755)
    ensure_private_dir(existing)
    assert mode(existing) == 0o700


def test_ensure_private_dir_refuses_a_file(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_text("x")
    with pytest.raises(NotADirectoryError):
        ensure_private_dir(target)
