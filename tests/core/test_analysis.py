"""A warm `Analysis` changes how fast `apply` is, never what it gives."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from factrail.core.analysis import MAX_MEMO_ENTRIES, Analysis
from factrail.core.apply import Applied, Reduction, apply, prepare
from factrail.core.model import Action, Message, collect_tool_calls
from factrail.core.render import Selection
from factrail.eval.corpora import load_corpus_dir
from factrail.eval.synthetic import corpus as synthetic
from factrail.eval.synthetic_v2 import corpus as synthetic_v2

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "dev"


def _actions(messages: Sequence[Message]) -> dict[str, Action]:
    calls = collect_tool_calls(messages, preserve_recent=6)
    return {
        c.tool_use_id: "keep" if c.pinned else "drop_call" if k % 7 == 3 else "drop_result"
        for k, c in enumerate(calls)
    }


def _outcome(got: Applied) -> tuple[object, ...]:
    return (got.tier, got.changed, got.briefed, got.tokens_before, got.tokens_after, got.touched)


def _grow(messages: list[Message], selection: Selection) -> int:
    """Follow a session turn by turn as the proxy does (prepare below the line, apply above it)
    and compare every warm outcome with a cold one; the number of compactions compared."""
    memo = Analysis()
    compared = 0
    cuts = sorted({len(messages) * k // 6 for k in range(2, 7)})
    for n, cut in enumerate(cuts):
        turn = messages[:cut]
        if n % 2 == 0:
            prepare(turn, memo, selection=selection)
            continue
        reduction = Reduction(0.4, 0.6) if n % 4 == 1 else Reduction(0.1, 0.0)
        actions = _actions(turn)
        warm = apply(turn, actions, reduction=reduction, selection=selection, memo=memo)
        cold = apply(turn, actions, reduction=reduction, selection=selection)
        assert _outcome(warm) == _outcome(cold)
        compared += 1
    return compared


@pytest.mark.parametrize("selection", [Selection(), Selection(value=False)])
def test_warm_compactions_equal_cold_ones_on_synthetic_sessions(selection: Selection) -> None:
    compared = sum(_grow(m, selection) for _, m in synthetic(3, 3) + synthetic_v2(3, 2))
    assert compared >= 10


def test_warm_compactions_equal_cold_ones_on_the_corpus() -> None:
    if not CORPUS.is_dir():
        pytest.skip("no dev corpus")
    named = sorted(load_corpus_dir(CORPUS), key=lambda x: -len(x[1]))[:8]
    assert sum(_grow(m, Selection()) for _, m in named) >= 8


def test_prepare_learns_results_and_forgets_the_dead() -> None:
    _, messages = synthetic(1, 1)[0]
    memo = Analysis()
    prepare(messages, memo)
    texts = {r.text for m in messages for r in m.tool_results}
    assert memo.layouts and {k[0] for k in memo.layouts} <= texts
    assert {k[0] for k in memo.notes} == texts
    assert memo.facts.keys() <= texts
    prepare(messages[:2], memo)
    left = {r.text for m in messages[:2] for r in m.tool_results}
    assert {k[0] for k in memo.layouts} <= left
    assert memo.facts.keys() <= left


def test_unit_memos_start_over_past_their_bound() -> None:
    memo = Analysis()
    memo.own.update((f"tok{i}", 0.0) for i in range(MAX_MEMO_ENTRIES + 1))
    memo.score.many(["error 1", "ok"])
    memo.retain([])
    assert memo.own == {}
    assert len(memo.score) == 2
