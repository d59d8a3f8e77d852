"""The simulation drives the gateway's own compaction step, one request per assistant turn."""

from __future__ import annotations

import asyncio

from factrail.eval.sim import simulate, totals
from factrail.eval.synthetic import corpus
from tests.options import engine_options

OPTIONS = engine_options(outputs_route=None)


def test_rails_stay_under_the_window_and_keep_the_facts_in_use() -> None:
    rows = []
    for name, messages in corpus(0, 2):
        rows.extend(asyncio.run(simulate(name, messages, OPTIONS, lengths=(1.5,))))
    by = totals(rows)
    rails = by["rails"]["1.5"]
    assert rails["peak_fill"] <= 0.75
    assert rails["rate"] > 0.9
    assert rails["needed"] > 0
    assert 0 < rails["cache_share"] < 1
    # Sending everything overflows a transcript 1.5 windows long; the rivals are reported too.
    assert by["none"]["1.5"]["peak_fill"] > 1.4
    assert set(by) == {"rails", "erase", "clear-oldest", "mask", "middle-out", "none"}
    for name in ("erase", "clear-oldest", "mask"):
        assert by[name]["1.5"]["rate"] < rails["rate"]


def test_rails_only_break_the_prompt_cache_when_they_compact() -> None:
    name, messages = corpus(3, 1)[0]
    rows = asyncio.run(
        simulate(name, messages, OPTIONS, lengths=(1.2,), strategies=("rails", "mask"))
    )
    rails = next(r for r in rows if r.strategy == "rails")
    mask = next(r for r in rows if r.strategy == "mask")
    assert 0 < rails.compactions < mask.compactions
    assert rails.cached_tokens > mask.cached_tokens
    assert rails.billed < mask.billed
