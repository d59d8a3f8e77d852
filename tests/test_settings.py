"""The one settings object: every knob once, its sections, its generated reference page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import SecretStr

from factrail.policy.cost import ANTHROPIC, NO_CACHE, Prices, prices
from factrail.settings import Settings, SettingsError
from factrail.settings_doc import GROUPS, markdown

ROOT = Path(__file__).resolve().parents[1]
UNKNOWN_ON_PURPOSE = {"FACTRAIL_TAINT_TOOL", "FACTRAIL_ADMIN_KEYS", "FACTRAIL_ENV"}
"""Misspellings the tests set to see them refused, and `tests/test_deploy.py`'s constant."""


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


def refused(**kwargs: object) -> list[str]:
    """The problem lines `Settings(**kwargs)` is refused with (none: it is accepted)."""
    try:
        Settings(**kwargs)  # type: ignore[arg-type]
    except SettingsError as err:
        assert str(err).startswith(err.problems[0])
        return err.problems
    return []


@pytest.mark.parametrize(
    ("name", "value", "line"),
    [
        ("FACTRAIL_EGRESS", "Full", "FACTRAIL_EGRESS='Full' is not allowed: one of full, metadata"),
        ("FACTRAIL_EGRESS", " full", "FACTRAIL_EGRESS=' full' is not allowed: one of full"),
        ("FACTRAIL_EGRESS", "ful", "FACTRAIL_EGRESS='ful' is not allowed: one of full, metadata"),
        ("FACTRAIL_JUDGE", "tevv", "FACTRAIL_JUDGE='tevv' is not allowed: one of rules, systemone"),
        ("FACTRAIL_TRIGGER_TOKENS", "-5", "FACTRAIL_TRIGGER_TOKENS='-5' is not allowed: a whole"),
        ("FACTRAIL_TRIGGER_TOKENS", "true", "FACTRAIL_TRIGGER_TOKENS='true' is not allowed"),
        ("FACTRAIL_KEEP_THRESHOLD", "7", "is not allowed: a finite number from 0.01 to 0.99"),
        ("FACTRAIL_TRIGGER_PERCENT", "nan", "FACTRAIL_TRIGGER_PERCENT='nan' is not allowed"),
        ("FACTRAIL_PRESERVE_RECENT", "lots", "FACTRAIL_PRESERVE_RECENT='lots' is not allowed"),
        ("FACTRAIL_SAVE_OUTPUTS", "maybe", "is not allowed: not a boolean; true, false, 1 or 0"),
        ("FACTRAIL_TAINT_TOOLS", "mcp__a__;mcp__b__", "';' does not separate names"),
        ("FACTRAIL_TAINT_TOOLS", "mcp__a__ mcp__b__", "' ' does not separate names"),
        ("FACTRAIL_TAINT_TOOLS", '["mcp__a__", ', "not a valid JSON array"),
        ("FACTRAIL_TAINT_SKILLS", "[1, 2]", "a list holds strings only"),
        ("FACTRAIL_CONTEXT_WINDOWS", '{"gpt-9": 0}', "'gpt-9' maps to 0"),
        ("FACTRAIL_TRIGGER_BY_MODEL", "gpt-4.1=400000", "not valid JSON"),
        ("FACTRAIL_STATE_URL", "sqlite://state.db", "a SQLite store needs an absolute path"),
        ("FACTRAIL_UPSTREAM_URL", "api.openai.com/v1", "no http:// or https:// scheme"),
        ("FACTRAIL_OUTPUTS_DIR", "/data/outputs\n", "spaces or line breaks around it"),
        ("FACTRAIL_LOG_LEVEL", "loud", "FACTRAIL_LOG_LEVEL='loud' is not allowed: one of DEBUG"),
        ("FACTRAIL_PURE_PYTHON", "true", "FACTRAIL_PURE_PYTHON='true' is not allowed: one of 0, 1"),
        (
            "FACTRAIL_TAINT_TOOL",
            "mcp__crm__",
            "is not a setting: did you mean FACTRAIL_TAINT_TOOLS?",
        ),
        ("factrail_egress", "full", "did you mean FACTRAIL_EGRESS? (names are upper case)"),
    ],
)
def test_a_malformed_value_or_name_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, line: str
) -> None:
    monkeypatch.setenv(name, value)
    problems = refused()
    assert len(problems) == 1 and problems[0].startswith(name), problems
    assert line in problems[0]


def test_every_problem_is_one_line_and_secrets_are_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "ak-" + "z" * 5
    monkeypatch.setenv("FACTRAIL_OUTPUTS_SECRET", key)
    monkeypatch.setenv("FACTRAIL_JUDGE_API_KEY", f" {key}-long-enough ")
    monkeypatch.setenv("FACTRAIL_ADMIN_KEYS", key)
    monkeypatch.setenv("FACTRAIL_EGRESS", "none")
    problems = refused()
    assert len(problems) == 4
    assert all("\n" not in line and key not in line for line in problems)
    assert (
        "FACTRAIL_OUTPUTS_SECRET=<hidden> is not allowed: too short; empty, or at least 16"
        in "\n".join(problems)
    )
    assert any(p.startswith("FACTRAIL_ADMIN_KEYS=<hidden> is not a setting") for p in problems)


def test_keyword_arguments_are_checked_the_same_way() -> None:
    assert refused(egress="FULL") == ["egress='FULL' is not allowed: one of full, metadata"]
    assert refused(trigger_tokenz=5) == [
        "trigger_tokenz is not a setting: did you mean trigger_tokens?"
    ]
    assert refused(keep_threshold=0.0)[0].startswith("keep_threshold=0.0 is not allowed")
    assert refused(judge="tev") == [
        "judge='tev' is not allowed: the Tev judge needs FACTRAIL_JUDGE_URL, its base URL"
    ]
    assert isinstance(SettingsError(["x"]), ValueError)


def test_lists_take_commas_newlines_or_a_json_array(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in (
        "mcp__crm__, mcp__hr__",
        "mcp__crm__\nmcp__hr__\n",
        '["mcp__crm__", "mcp__hr__"]',
    ):
        monkeypatch.setenv("FACTRAIL_TAINT_TOOLS", value)
        assert Settings().taint_tools == ("mcp__crm__", "mcp__hr__")
    monkeypatch.setenv("FACTRAIL_TAINT_TOOLS", "")
    assert Settings().taint_tools == ()
    monkeypatch.setenv("FACTRAIL_LOG_LEVEL", "debug")
    assert Settings().log_level == "DEBUG"


def test_the_config_file_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "factrail.toml"
    monkeypatch.setenv("FACTRAIL_CONFIG", str(path))
    assert refused() == [
        f"FACTRAIL_CONFIG={str(path)!r} is not allowed: no such file; the path of a TOML file"
    ]
    path.write_text("[factrail\n", encoding="utf-8")
    assert refused()[0].startswith(f"FACTRAIL_CONFIG={str(path)!r} is not allowed: not TOML")
    path.write_bytes(b"egress = '\xff'\n")
    assert "not UTF-8" in refused()[0]
    path.write_text("[factrail]\ntaint_tool = ['mcp__crm__']\negress = 'Full'\n", encoding="utf-8")
    assert refused() == [
        f"{path}: taint_tool is not a setting: did you mean taint_tools?",
        f"{path}: egress='Full' is not allowed: one of full, metadata",
    ]
    path.write_text("pure_python = '1'\n", encoding="utf-8")
    assert refused() == [
        f"{path}: pure_python is not allowed: it is read from the environment"
        " (FACTRAIL_PURE_PYTHON)"
    ]
    path.write_text("egress = 'metadata'\n", encoding="utf-8")
    assert Settings().egress == "metadata"  # no [factrail] table: the top level is the table
    path.write_text("[factrail]\negress = 'metadata'\n[other]\nx = 1\n", encoding="utf-8")
    assert refused() == [f"{path}: other is not allowed: settings go in the [factrail] table"]
    monkeypatch.setenv("FACTRAIL_CONFIG", "")
    assert refused()[0].startswith("FACTRAIL_CONFIG='' is not allowed")


def test_a_public_bind_needs_a_long_admin_key() -> None:
    key = "k" * 16
    assert Settings().bind_problems("127.0.0.1") == []
    assert Settings(admin_key=SecretStr(key)).bind_problems("0.0.0.0") == []
    for short in ("", "Q", "Q7" * 7 + "Q"):
        (line,) = Settings(admin_key=SecretStr(short)).bind_problems("0.0.0.0")
        shown = "<hidden>" if short else "''"
        assert line.startswith(f"FACTRAIL_ADMIN_KEY={shown} is not allowed with --host 0.0.0.0")
        assert "at least 16 characters" in line and (not short or short not in line)


def test_every_factrail_name_the_repository_reads_is_declared() -> None:
    """The tests, CI, the Makefile, the deployment and the plugin read only declared names."""
    known = {f"FACTRAIL_{n.upper()}" for n in Settings.model_fields} | {"FACTRAIL_TEV_API_KEY"}
    used: set[str] = set()
    for folder in ("tests", "bench", "deploy", "plugin/hooks", ".ci", "factrail", "app"):
        for file in (ROOT / folder).rglob("*"):
            if file.is_file() and file.suffix not in (".so", ".pyc", ".png", ".db"):
                text = file.read_text(encoding="utf-8", errors="ignore")
                used |= set(re.findall(r"\bFACTRAIL_[A-Z][A-Z0-9_]*[A-Z0-9]\b", text))
    used |= set(re.findall(r"\bFACTRAIL_[A-Z0-9_]+", (ROOT / "Makefile").read_text()))
    assert used - known - UNKNOWN_ON_PURPOSE == set()


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
        (line,) = refused()
        assert line.startswith(f"FACTRAIL_MODEL_PRICES={bad!r} is not allowed: ")
