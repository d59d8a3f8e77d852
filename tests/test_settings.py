"""The one settings object: every knob once, its sections, its generated reference page."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from factrail.policy.cost import ANTHROPIC, NO_CACHE, Prices, prices
from factrail.settings import KEEP_THRESHOLD_BOUNDS, Settings
from factrail.settings_doc import GROUPS, markdown

ROOT = Path(__file__).resolve().parents[1]


def test_the_configuration_page_is_generated_from_the_settings() -> None:
    """`docs/configuration.md` is `factrail settings --markdown`: regenerate it when this fails."""
    assert (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8") == markdown()


def test_every_setting_is_documented_once() -> None:
    listed = [name for _, names, _ in GROUPS for name in names]
    assert sorted(listed) == sorted(Settings.model_fields)
    assert len(listed) == len(set(listed))
    assert all(Settings.model_fields[n].description for n in listed)


def test_sections_carry_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FACTRAIL_PRESERVE_RECENT", "9")
    monkeypatch.setenv("FACTRAIL_TAINT_TOOLS", "mcp__crm__")
    monkeypatch.setenv("FACTRAIL_EGRESS", "metadata")
    settings = Settings(trigger_tokens=50_000, rearm_tokens=7)
    options = settings.engine_options()
    assert options.plan.preserve_recent == 9 and options.plan.egress == "metadata"
    assert options.trigger.for_model("unknown") == 50_000 and options.trigger.gap(50_000) == 7
    assert options.fence.taints("mcp__crm__lookup")
    assert options.fence.taints("mcp__email-gateway__send")  # added to the defaults
    monkeypatch.setenv("FACTRAIL_TAINT_REPLACE_DEFAULTS", "true")
    assert not Settings().fence().taints("mcp__email-gateway__send")


def test_malformed_values_fall_back_and_the_threshold_is_clamped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FACTRAIL_TRIGGER_TOKENS", "-5")
    monkeypatch.setenv("FACTRAIL_KEEP_THRESHOLD", "7")
    monkeypatch.setenv("FACTRAIL_PRESERVE_RECENT", "lots")
    settings = Settings()
    assert settings.trigger_tokens == Settings.model_fields["trigger_tokens"].default
    assert settings.keep_threshold == KEEP_THRESHOLD_BOUNDS[1]
    assert settings.preserve_recent == Settings.model_fields["preserve_recent"].default


def test_the_tev_key_alias_and_the_known_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "tev" + "-k" * 12
    monkeypatch.setenv("FACTRAIL_TEV_API_KEY", key)
    settings = Settings(admin_key=SecretStr("adm" + "x" * 9))
    assert settings.judge_api_key.get_secret_value() == key
    assert settings.known_secrets() == [key, "adm" + "x" * 9]


def test_the_toml_file_is_read_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "factrail.toml"
    path.write_text("[factrail]\ntrigger_tokens = 90000\nhead_chars = 120\n", encoding="utf-8")
    monkeypatch.setenv("FACTRAIL_CONFIG", str(path))
    monkeypatch.setenv("FACTRAIL_HEAD_CHARS", "150")
    settings = Settings()
    assert settings.trigger_tokens == 90_000
    assert settings.plan_options().head_chars == 150


@pytest.mark.parametrize(
    ("model", "window", "trigger"),
    [
        ("claude-sonnet-4-5-20250929", 200_000, 120_000),  # 60 % of the window is lower
        ("claude-haiku-4-5", 200_000, 120_000),
        ("claude-opus-4-6", 1_000_000, 180_000),
        ("claude-opus-5-5", 1_000_000, 180_000),
        ("claude-sonnet-5", 1_000_000, 180_000),
        ("claude-fable-5-1", 1_000_000, 180_000),
        ("gpt-5.5", 400_000, 180_000),
        ("gpt-6-sol", 922_000, 180_000),
        ("openai/gpt-5.6-luna", 922_000, 180_000),
    ],
)
def test_the_built_in_windows_know_the_current_models(
    model: str, window: int, trigger: int
) -> None:
    """Every current Claude model but Haiku 4.5 has a 1M window, and GPT-5.6 and GPT-6 take
    922K input tokens: with the old 200K for every Claude, a session on Opus 5.5 was compacted
    from 100K and had its recent results cut from 180K, far from its window."""
    lines = Settings().trigger()
    assert lines.window_for(model) == window
    assert lines.for_model(model) == trigger
    assert lines.fit(model) == int(0.9 * window)


def test_model_prices_override_the_built_in_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """`FACTRAIL_MODEL_PRICES` prices a model the tables do not know, or one whose price they
    missed, under either profile; an entry that cannot be a price list is refused whole."""
    monkeypatch.setenv(
        "FACTRAIL_MODEL_PRICES",
        '{"claude-opus-6": {"cached": 0.05, "write": 1.25},'
        ' "GPT-7": {"cached": 0.05, "write": 1.25, "long_context": 500000}}',
    )
    options = Settings().engine_options()
    opus = prices("anthropic", "claude-opus-6-1", None, options.model_prices)
    assert opus == Prices(cached=0.05, write=1.25)
    assert prices("anthropic", "claude-opus-6", 3600, options.model_prices).write == 2.0
    gpt = prices("openai", "gpt-7-sol", None, options.model_prices)
    assert gpt.tier(500_001) == 2.0 and gpt.cached == 0.05
    assert prices("anthropic", "claude-opus-5", None, options.model_prices) == ANTHROPIC
    assert prices("none", "claude-opus-6", None, options.model_prices) == NO_CACHE
    for bad in ('{"x": {"cached": 2, "write": 1}}', '{"x": {"cached": 0.1}}',
                '{"x": {"cached": 0.1, "write": 1, "read": 1}}', "[1]"):  # fmt: skip
        monkeypatch.setenv("FACTRAIL_MODEL_PRICES", bad)
        assert Settings().model_prices == {}
