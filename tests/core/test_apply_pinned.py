"""Every `apply` outcome over seeded transcripts, pinned by hash.

A speed-up of the rails must not change what they produce: this pins the changed texts, briefs,
tier, sizes and touched flags of 78 outcomes (synthetic sessions, v1 and v2; four reductions;
four selections; with and without final results), and 240 of the dev corpus when it is present
(each regeneration and why it was meant is in the git log of this file and its data). A change
that is meant to alter the output regenerates the pins:

    .venv/bin/python tests/core/test_apply_pinned.py
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from factrail.core.apply import Reduction, apply
from factrail.core.model import Message, collect_tool_calls
from factrail.core.render import Selection
from factrail.eval.corpora import load_corpus_dir
from factrail.eval.synthetic import corpus as synthetic
from factrail.eval.synthetic_v2 import corpus as synthetic_v2

PINS = Path(__file__).with_name("data") / "apply_pins.json"
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "dev"
REDUCTIONS = (Reduction(0.3, 0.3), Reduction(0.6, 0.8), Reduction(0.95, 0.98), Reduction(0.1, 0.0))
SELECTIONS = (Selection(), Selection(value=False), Selection(contain=False), Selection(pool=False))


def _cases(named: list[tuple[str, list[Message]]], every: bool = True) -> Iterator[tuple[str, str]]:
    """`(case name, outcome hash)` for every setting worth pinning on every transcript (or, not
    `every`, for the default selection and the regex one at two reductions)."""
    for name, messages in named:
        calls = collect_tool_calls(messages, preserve_recent=6)
        actions = {
            c.tool_use_id: "keep" if c.pinned else "drop_call" if k % 7 == 3 else "drop_result"
            for k, c in enumerate(calls)
        }
        final = frozenset(c.tool_use_id for k, c in enumerate(calls) if k % 11 == 5)
        for r, reduction in enumerate(REDUCTIONS):
            for s, selection in enumerate(SELECTIONS):
                if (r >= 2 and s >= 2) or (not every and (r > 1 or s > 1)):
                    continue
                for f, finals in enumerate((frozenset(), final)):
                    if f and (r or s):
                        continue
                    got = apply(
                        messages, actions, reduction=reduction, selection=selection, final=finals
                    )
                    blob = json.dumps(
                        [got.tier, got.changed, got.briefed, got.tokens_before,
                         got.tokens_after, got.touched],
                        sort_keys=True,
                        ensure_ascii=False,
                    )  # fmt: skip
                    yield f"{name}/{r}/{s}/{f}", hashlib.sha256(blob.encode()).hexdigest()[:16]


def _synthetic() -> list[tuple[str, list[Message]]]:
    return synthetic(0, 4) + synthetic_v2(0, 2)


def _corpus() -> list[tuple[str, list[Message]]]:
    return load_corpus_dir(CORPUS) if CORPUS.is_dir() else []


def test_synthetic_outcomes_are_pinned() -> None:
    pins = json.loads(PINS.read_text(encoding="utf-8"))
    got = dict(_cases(_synthetic()))
    assert got == {k: v for k, v in pins.items() if k.startswith("synthetic")}


def test_corpus_outcomes_are_pinned() -> None:
    named = _corpus()
    if not named:
        pytest.skip("no dev corpus")
    pins = json.loads(PINS.read_text(encoding="utf-8"))
    for case, digest in _cases(named, every=False):
        assert pins.get(case) == digest, case


if __name__ == "__main__":
    pinned = dict(_cases(_synthetic())) | dict(_cases(_corpus(), every=False))
    PINS.write_text(json.dumps(pinned, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(pinned)} outcomes pinned in {PINS}", file=sys.stderr)
