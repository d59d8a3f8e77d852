"""Modules of one idea: no module of the package or the deployable app passes 600 lines (a module
that grows past it is split where its ideas part)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 600


def test_no_module_passes_600_lines() -> None:
    modules = [*(ROOT / "factrail").rglob("*.py"), *(ROOT / "app").rglob("*.py")]
    assert len(modules) > 100  # the whole package was found
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
             for p in modules}  # fmt: skip
    assert {path: n for path, n in sizes.items() if n > MAX_LINES} == {}
