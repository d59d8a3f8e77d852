"""`bench/kernels_real.py` runs on the largest real session of the corpus: the cold compaction
beside its JSON round trip, and a row per kernel timed (skipped without the corpus)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from factrail.core import kernels

BENCH = Path(__file__).resolve().parents[2] / "bench" / "kernels_real.py"


@pytest.mark.corpus
def test_the_bench_times_a_1_mb_session_and_each_kernel(corpus_dir: Path) -> None:
    if not kernels.loaded().on():
        pytest.skip("no C kernels to time")
    args = ["--corpus", str(corpus_dir), "--runs", "1", "--pairs", "1", "--kernels", "cover"]
    out = subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, check=True
    ).stdout
    label = out.splitlines()[0]
    assert " MB, " in label and float(label.split(" (")[1].split(" MB")[0]) >= 1.0
    assert "JSON round trip (" in out and "| kernels on |" in out and "| pure Python |" in out
    assert "| cover |" in out and "| (none) |" in out
