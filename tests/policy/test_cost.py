"""Prompt-cache prices and the payback rule of a soft-line compaction."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factrail.policy.cost import (
    ANTHROPIC,
    DEFAULT_TTL_S,
    NO_CACHE,
    Prices,
    billed_input,
    cold,
    duration_s,
    model_ttl_s,
    pays,
    prices,
    profile_for,
    spared,
)


def test_profiles() -> None:
    assert prices("anthropic") == Prices(cached=0.1, write=1.25)
    assert prices("none") == NO_CACHE
    assert prices("openai", "gpt-4o-2024-08-06").cached == 0.5
    assert prices("openai", "openai/gpt-4.1-mini").cached == 0.25
    assert prices("openai", "gpt-5-codex").cached == 0.1
    assert prices("openai", "some-local-model").cached == 0.5
    assert prices("openai").write == 1.0
    # Anthropic's one-hour entries are written at twice the input price, read at the same 0.1.
    assert prices("anthropic", ttl_s=3600) == Prices(cached=0.1, write=2.0)
    assert prices("anthropic", ttl_s=300) == prices("anthropic")
    assert prices("openai", "gpt-4o", ttl_s=86_400) == prices("openai", "gpt-4o")


def test_openai_bills_cache_writes_from_the_gpt_5_6_family_on() -> None:
    assert prices("openai", "gpt-5.5") == Prices(cached=0.1, write=1.0)
    assert prices("openai", "gpt-5.6-luna") == Prices(cached=0.1, write=1.25, long_context=272_000)
    assert prices("openai", "openai/gpt-6-sol") == prices("openai", "gpt-5.6-luna")
    assert prices("openai", "gpt-6.1-terra") == Prices(0.05, 1.25, long_context=272_000)
    assert prices("openai", "gpt-6.2-sol") == prices("openai", "gpt-6.1-terra")
    # A 12-hour cache entry is written at 2.5x; older models bill no writes at any lifetime.
    assert prices("openai", "gpt-6.2-sol", ttl_s=43_200).write == 2.5
    assert prices("openai", "gpt-6.2-sol", ttl_s=1800).write == 1.25
    assert prices("openai", "gpt-4.1", ttl_s=86_400).write == 1.0
    assert model_ttl_s("gpt-6-astra") == 1800.0
    assert model_ttl_s("gpt-5-codex") is None
    assert model_ttl_s("claude-sonnet-4-5") is None


def test_claude_s_prices_by_model() -> None:
    assert prices("anthropic", "claude-sonnet-4-5") == ANTHROPIC
    assert prices("anthropic", "claude-opus-5") == ANTHROPIC
    assert prices("anthropic", "claude-opus-5-5") == Prices(cached=0.05, write=1.25)
    assert prices("anthropic", "claude-sonnet-5-5-20260915") == Prices(cached=0.05, write=1.25)
    # The one-hour cache writes at twice the input price whatever the read price.
    assert prices("anthropic", "claude-opus-5-5", ttl_s=3600) == Prices(cached=0.05, write=2.0)
    fable = Prices(cached=0.025, write=1.25)  # $0.25 of $10; 5.2: $0.20 of $8
    for model in ("claude-fable-5-1", "claude-mythos-5-1", "claude-fable-5-2-20261110"):
        assert prices("anthropic", model) == fable
    assert prices("anthropic", "claude-fable-5-20260609") == ANTHROPIC  # Fable 5, dated
    haiku = prices("anthropic", "claude-haiku-5-5")
    assert haiku.tier(100_000) == 1.0 and haiku.tier(100_001) == 5.0
    # Cheaper reads make a compaction's saving worth less: about twice the turns to pay back.
    opus = prices("anthropic", "claude-opus-5-5")
    assert pays(10_000, 2_000, 58, ANTHROPIC) and not pays(10_000, 2_000, 120, opus)
    assert pays(10_000, 2_000, 121, opus)


def test_bringing_a_request_back_under_the_long_context_line_saves_on_all_of_it() -> None:
    gpt6 = prices("openai", "gpt-6-sol")
    assert gpt6.tier(272_000) == 1.0 and gpt6.tier(272_001) == 2.0
    assert prices("openai", "gpt-5.5").tier(500_000) == 1.0
    # 300k tokens, 60k removed, 250k re-billed. Brought under the line, each later turn saves
    # the doubled half of all 300k too, so 8 turns pay it back; on one side of it, 48.
    assert pays(250_000, 60_000, 8, gpt6, 300_000)
    assert not pays(250_000, 60_000, 7, gpt6, 300_000)
    assert not pays(250_000, 60_000, 47, gpt6, 200_000)
    assert not pays(250_000, 60_000, 47, gpt6, 400_000)
    assert pays(250_000, 60_000, 48, gpt6, 400_000)
    # Without a size the rule is the plain one.
    assert pays(250_000, 60_000, 48, gpt6) and not pays(250_000, 60_000, 47, gpt6)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("30m", 1800.0), ("1h", 3600.0), ("300s", 300.0), ("24h", 86_400.0),
     ("m", None), ("30", None), ("-5m", None), ("30d", None), (30, None), (None, None)],
)  # fmt: skip
def test_durations(value: object, seconds: float | None) -> None:
    assert duration_s(value) == seconds


def test_auto_picks_the_provider_by_model() -> None:
    assert profile_for("auto", "claude-sonnet-4-5") == "anthropic"
    assert profile_for("auto", "anthropic/claude-opus-4") == "anthropic"
    assert profile_for("auto", "gpt-4o") == "openai"
    assert profile_for("none", "claude-sonnet-4-5") == "none"


def test_billing() -> None:
    assert ANTHROPIC.billed(1000, 100) == pytest.approx(100 + 125)
    assert NO_CACHE.billed(1000, 100) == 1100


def test_a_turn_s_bill_is_priced_from_the_provider_s_own_split() -> None:
    # Anthropic: past every breakpoint at the input price, reads at 0.1, writes at 1.25
    assert billed_input(200, 10_000, 1_000, ANTHROPIC) == pytest.approx(200 + 1_000 + 1_250)
    # past the long-context line the whole request costs that tier's price
    long = Prices(cached=0.1, write=1.25, long_context=5_000)
    assert billed_input(200, 10_000, 1_000, long) == pytest.approx(2 * (200 + 1_000 + 1_250))
    assert billed_input(100, 0, 0, NO_CACHE) == 100


def test_what_a_turn_spared_against_sending_it_whole() -> None:
    # 3k tokens not sent would have been cache reads: 300 kept out
    assert spared(3_000, 0, ANTHROPIC) == pytest.approx((300, 0))
    # a compaction that re-wrote 10k tokens paid 1.15 more on each of them than a read
    assert spared(3_000, 10_000, ANTHROPIC) == pytest.approx((300, 11_500))
    # without a cache nothing is re-billed: every token not sent is spared whole
    assert spared(3_000, 10_000, NO_CACHE) == (3_000, 0)


def test_the_payback_rule() -> None:
    # R > (I/H)·(P_write − P_cached)/P_cached: 10k invalidated, 2k saved a turn, anthropic →
    # 5 · 11.5 = 57.5 turns.
    assert not pays(10_000, 2_000, 57, ANTHROPIC)
    assert pays(10_000, 2_000, 58, ANTHROPIC)
    assert pays(10_000, 2_000, 1, NO_CACHE)  # no cache: always worth it
    assert not pays(10_000, 0, 1_000, ANTHROPIC)  # saves nothing: never
    assert pays(0, 10, 1, ANTHROPIC)  # breaks nothing: always


@given(
    st.floats(0, 1e7),
    st.floats(1, 1e6),
    st.floats(1, 1e4),
)
def test_paying_is_monotone_in_remaining_turns_and_savings(
    invalidated: float, saved: float, turns: float
) -> None:
    if pays(invalidated, saved, turns, ANTHROPIC):
        assert pays(invalidated, saved, turns * 2, ANTHROPIC)
        assert pays(invalidated, saved * 2, turns, ANTHROPIC)
        assert pays(invalidated / 2, saved, turns, ANTHROPIC)


def test_cold() -> None:
    assert cold(DEFAULT_TTL_S + 1, DEFAULT_TTL_S)
    assert not cold(DEFAULT_TTL_S, DEFAULT_TTL_S)
    assert not cold(None, DEFAULT_TTL_S)
    assert not cold(float("nan"), DEFAULT_TTL_S)
