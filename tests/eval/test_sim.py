"""The simulation drives the gateway's own compaction step, one request per assistant turn."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from factrail.eval.sim import cache_floor, simulate, totals, with_floors
from factrail.eval.synthetic import corpus
from factrail.policy.cost import ANTHROPIC
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


def test_the_cache_floor_is_what_the_share_goal_alone_costs() -> None:
    # 3.5 % new: n(0.1·19 + 1.25) = 3.15n against 0.1·0.965 + 1.25·0.035 per token sent.
    assert cache_floor(0.035, ANTHROPIC) == pytest.approx(3.15 * 0.035 / (0.0965 + 0.04375))
    # Everything itself (at its own share) is above the floor of any goal it meets.
    assert cache_floor(0.035, ANTHROPIC, share=0.965) == pytest.approx(1.0)
    assert cache_floor(0.0, ANTHROPIC) == 0.0


def test_the_floor_is_reported_beside_everything() -> None:
    name, messages = next(iter(corpus(0, 1)))
    rows = asyncio.run(simulate(name, messages, OPTIONS, lengths=(1.2,)))
    out = with_floors(totals(rows), "anthropic")
    none = out["none"]["1.2"]
    assert 0 < none["floor_at_goal"] <= 1.0
    # No strategy that forwards new messages whole beats it while meeting the goal.
    for by_length in out.values():
        row = by_length["1.2"]
        if row["cache_share"] >= 0.95:
            assert row["billed_ratio"] >= none["floor_at_goal"] - 1e-9


def test_no_strategy_bills_under_the_soft_line_floor() -> None:
    """Every strategy sends requests as they are below the soft line and keeps the text of
    each message: none can bill under the floor that keeps nothing else past it."""
    name, messages = next(iter(corpus(0, 1)))
    rows = asyncio.run(simulate(name, messages, OPTIONS, lengths=(0.8, 1.5)))
    out = totals(rows)
    for length in ("0.8", "1.5"):
        floor = out["none"][length]["soft_floor"]
        assert 0 < floor < 1.0
        for by_length in out.values():
            assert by_length[length]["billed_ratio"] >= floor
    assert out["none"]["1.5"]["soft_floor"] < out["none"]["0.8"]["soft_floor"]


OVERFLOWING = (
    "codex__Shyaar__beam_v1",  # a 16k-char listing among its last calls, in a short run
    "gemini_cli__metaphi-agent__figma-eval-010ac575",  # a 496k-char `git add` output
    "msa_tbench__blind-maze-explorer-5x5",  # a 246k-char timed-out script
)


def test_one_giant_recent_output_no_longer_overflows_the_window(corpus_dir: Path) -> None:
    """Real sessions whose one recent output is larger than the window: every request the rails
    send fits it (they used to send up to 1.42 windows while it stayed among the recent calls)."""
    from factrail.eval.corpora import load_corpus_dir

    named = [
        (n, m)
        for n, m in load_corpus_dir(corpus_dir)
        if any(n.startswith(prefix) for prefix in OVERFLOWING)
    ]
    assert len(named) >= 3
    for name, messages in named:
        rows = asyncio.run(
            simulate(name, messages, OPTIONS, lengths=(1.2, 1.5), strategies=("rails", "none"))
        )
        for row in rows:
            if row.strategy == "none":
                assert row.peak_fill > 1.0  # the whole transcript does not fit
            else:
                assert row.peak_fill <= 1.0, (name, row.length, row.peak_fill)


def test_the_rails_are_billed_with_the_notes_the_gateway_sends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Unless outputs are not saved, the sim saves them (to a temporary folder) as the gateway
    does, so each reduced result is billed with the note naming its saved copy, which is longer
    than the note naming the call."""
    from factrail.eval import sim

    sent: dict[bool, list[str]] = {True: [], False: []}
    saving = True
    request = sim._Run.request

    def spy(self: sim._Run, messages: Any, *args: Any) -> None:
        if self.row.strategy == "rails":
            sent[saving].extend(r.text for m in messages for r in m.tool_results)
        request(self, messages, *args)

    monkeypatch.setattr(sim._Run, "request", spy)
    name, messages = corpus(3, 1)[0]
    for saving in (True, False):
        options = replace(engine_options(), save_outputs=saving)
        asyncio.run(simulate(name, messages, options, lengths=(1.2,), strategies=("rails",)))
    saved_notes = [t for t in sent[True] if "full output saved at /v1/factrail/outputs/" in t]
    assert saved_notes and not any("in this transcript]" in t for t in sent[True])
    assert any("in this transcript]" in t for t in sent[False])


def test_on_the_one_hour_cache_writes_cost_twice_and_the_rails_compact_no_more() -> None:
    """`--cache-ttl 3600`: the simulated client asks for Anthropic's one-hour cache; every
    strategy's writes are billed at 2× input, and the rails' gate prices its compactions so."""
    name, messages = corpus(0, 1)[0]

    def rows(ttl: float | None) -> dict[str, Any]:
        pair = ("rails", "none")
        got = simulate(name, messages, OPTIONS, lengths=(1.5,), strategies=pair, cache_ttl_s=ttl)
        return {r.strategy: r for r in asyncio.run(got)}

    five, hour = rows(None), rows(3600)
    assert hour["none"].billed > five["none"].billed  # the same requests, writes at 2x
    assert hour["none"].billed_everything == hour["none"].billed
    assert 0 < hour["rails"].compactions < five["rails"].compactions


def test_a_model_with_cheaper_cache_reads_is_billed_and_gated_at_its_own_prices() -> None:
    """`--price-model claude-opus-5-5`: the simulated client asks for Opus 5.5, whose cache
    reads cost 0.05 of input; every strategy is billed at those prices, and the rails' gate,
    told the same model, needs twice the turns to pay a compaction back."""
    name, messages = corpus(0, 1)[0]

    def rows(model: str) -> dict[str, Any]:
        pair = ("rails", "none")
        got = simulate(name, messages, OPTIONS, lengths=(1.5,), strategies=pair, model=model)
        return {r.strategy: r for r in asyncio.run(got)}

    base, opus = rows(""), rows("claude-opus-5-5")
    assert opus["none"].billed < base["none"].billed  # the same requests, reads at half
    assert opus["rails"].compactions < base["rails"].compactions


def test_sessions_billed_above_sending_everything_are_counted() -> None:
    """Each length reports how many sessions a strategy billed more than sending everything
    would have (the per-session bar of "never costs more than direct"); everything itself is
    never above itself."""
    rows = []
    for name, messages in corpus(0, 3):
        rows.extend(
            asyncio.run(
                simulate(
                    name, messages, OPTIONS, lengths=(1.2,), strategies=("rails", "mask", "none")
                )
            )
        )
    by = totals(rows)
    for strategy in ("rails", "mask", "none"):
        t = by[strategy]["1.2"]
        above = [r for r in rows if r.strategy == strategy and r.billed > r.billed_everything]
        assert t["above"] == len(above) and t["sessions"] == 3
        assert t["above_unbet"] == sum(not r.bets for r in above)
    assert by["none"]["1.2"]["above"] == 0
    assert by["mask"]["1.2"]["above"] == 3  # re-writing every turn: every session costs more
    assert by["mask"]["1.2"]["above_unbet"] == 3  # only the rails bet
    assert any(r.bets for r in rows if r.strategy == "rails")


def test_a_session_the_rails_never_bet_on_is_above_everything_only_by_force() -> None:
    """With no bets (`payback_horizon` 0) every compaction is forced or free: a session above
    everything is counted among those with no bet."""
    no_bets = replace(OPTIONS, payback_horizon=0.0)
    rows = []
    for name, messages in corpus(0, 3):
        rows.extend(
            asyncio.run(simulate(name, messages, no_bets, lengths=(1.5,), strategies=("rails",)))
        )
    assert all(r.bets == 0 for r in rows)
    t = totals(rows)["rails"]["1.5"]
    assert t["above_unbet"] == t["above"]
    assert t["compactions"] > 0  # past the danger line it still compacts


def test_the_rivals_do_not_move_with_factrail_s_own_pins() -> None:
    """A rival's rule is its own: the rivals take their decisions with the reference's pinned
    tail whatever `preserve_recent` factrail runs with; the rails follow the setting."""
    name, messages = corpus(3, 1)[0]
    rivals = ("rails", "erase", "clear-oldest", "mask", "middle-out")
    runs = {
        pins: asyncio.run(
            simulate(
                name,
                messages,
                engine_options(outputs_route=None, preserve_recent=pins),
                lengths=(1.2,),
                strategies=rivals,
            )
        )
        for pins in (2, 6)
    }
    by = {pins: {r.strategy: (r.billed, r.kept, r.compactions) for r in rows}
          for pins, rows in runs.items()}  # fmt: skip
    for rival in rivals[1:]:
        assert by[2][rival] == by[6][rival]
    assert by[2]["rails"] != by[6]["rails"]
