"""Settings fail closed by rule, not by the cases listed: every boolean, number, list name and
variable name is read by one grammar, and no problem line shows a secret, a URL's credentials or
query, an unknown variable's value or a table of the TOML file. Spellings are built here at run
time (secret-shaped ones too)."""

from __future__ import annotations

import os
import secrets
import string
from pathlib import Path

import pytest
from pydantic import SecretStr

from factrail.settings import Settings, SettingsError


def problems() -> list[str]:
    try:
        Settings()
    except SettingsError as err:
        return err.problems
    return []


def token(prefix: str = "", size: int = 36) -> str:
    return prefix + "".join(
        secrets.choice(string.ascii_letters + string.digits) for _ in range(size)
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        *[("FACTRAIL_SAVE_OUTPUTS", v) for v in ("Yes", "on", "T", "TRUE", "True", "1.0", "tru")],
        ("FACTRAIL_JUDGE_LOCAL", "\uff54\uff52\uff55\uff45"),  # full-width "true"
        ("FACTRAIL_CACHE_MARK", "y"),
        *[("FACTRAIL_TRIGGER_TOKENS", v) for v in ("1e3", "0x10", "5.0", "+5", "1 000")],
        ("FACTRAIL_TRIGGER_TOKENS", "\uff11\uff10"),  # full-width digits
        ("FACTRAIL_HEAD_CHARS", "\u0661\u0662"),  # Arabic-Indic digits
        ("FACTRAIL_MAX_CONNECTIONS", "1_0"),
        *[("FACTRAIL_KEEP_THRESHOLD", v) for v in ("-inf", "0,5", "1_0.5", "0x1p-1", "5e")],
        ("FACTRAIL_PAYBACK_HORIZON", "\uff10.\uff15"),
        *[
            ("FACTRAIL_TAINT_TOOLS", v)
            for v in (
                "mcp__a__\uff1bmcp__b__",  # full-width semicolon
                "mcp__a__\tmcp__b__",
                "mcp__a__\u00b7mcp__b__",  # middle dot
                "mcp__a__+mcp__b__",
                "mcp__a__&mcp__b__",
                "mcp__a__\u200bmcp__b__",  # zero-width space
                "mcp__a__--mcp__b__",  # a second MCP prefix
                "mcp__a__mcp__b__",
                "crm:lookup",  # a colon belongs to plugin:skill only
                '["mcp__a__\\\\mcp__b__"]',
            )
        ],
        ("FACTRAIL_KEEP_TOOLS", "crm_lookup:hr_lookup"),
        *[("FACTRAIL_TAINT_SKILLS", v) for v in ("pdf:a:b", "plugin:", "email search")],
    ],
)
def test_a_value_outside_the_grammar_is_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    (line,) = problems()
    assert line.startswith(f"{name}=") and " is not allowed: " in line


def test_values_inside_the_grammar_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    for word, flag in (("true", True), ("1", True), ("false", False), ("0", False)):
        monkeypatch.setenv("FACTRAIL_JUDGE_LOCAL", word)
        assert Settings().judge_local is flag
    monkeypatch.setenv("FACTRAIL_TRIGGER_TOKENS", "007")
    monkeypatch.setenv("FACTRAIL_KEEP_THRESHOLD", ".5")
    monkeypatch.setenv("FACTRAIL_PAYBACK_HORIZON", "5e-1")
    monkeypatch.setenv("FACTRAIL_TAINT_TOOLS", "mcp__github-mcp__, crm.lookup, mcp__a_b__")
    monkeypatch.setenv("FACTRAIL_TAINT_SKILLS", "plugin:email-search")
    settings = Settings()
    assert settings.trigger_tokens == 7 and settings.keep_threshold == 0.5
    assert settings.payback_horizon == 0.5
    assert settings.taint_tools == ("mcp__github-mcp__", "crm.lookup", "mcp__a_b__")
    assert settings.taint_skills == ("plugin:email-search",)


@pytest.mark.parametrize(
    "name",
    [
        "FACTRAILEGRESS",
        "FAKTRAIL_EGRESS",
        "FACTARIL_EGRESS",
        "factrail-egress",
        "FACTRAIL__EGRESS",
        "\uff26\uff21\uff23\uff34\uff32\uff21\uff29\uff2c_EGRESS",  # a full-width prefix
    ],
)
def test_a_name_close_to_the_prefix_is_an_unknown_setting(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    secret = token("sv-")
    monkeypatch.setenv(name, secret)
    (line,) = problems()
    assert line == f"{name}=<hidden> is not a setting: did you mean FACTRAIL_EGRESS?"


def test_names_unlike_the_prefix_are_not_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FACTORY_EGRESS", "CONTRAIL_EGRESS", "FACTORIAL_N", "FACTS_DIR", "TRAIL_X"):
        monkeypatch.setenv(name, "x")
    assert problems() == []


def test_no_problem_line_shows_a_secret(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = token(size=24)
    github = token("ghp_")
    env = {
        "FACTRAIL_JUDGE_URL": f"https://j.example/v1#access_token={secret} ",
        "FACTRAIL_UPSTREAM_URL": f"https://user:p@{secret}@up.example/v1 ",
        "FACTRAIL_ANTHROPIC_UPSTREAM_URL": f"http://a.example/v1?x=1&key={secret}\n",
        "FACTRAIL_STATE_URL": f"rediss://:{secret}@cache:6380/0?prefix=f ",
        "FACTRAIL_CONTEXT_WINDOWS": f'{{"https://x:{secret}@h/": 0}}',
        "FACTRAIL_OUTPUTS_DIR": f"/data/{github}\n",
        "FACTRAIL_" + "ADMIN_TOKEN": secret,  # no setting has this name
        "FACTRIAL_JUDGE_API_KEY": secret,
        "factrail-outputs-secret": secret,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    lines = problems()
    assert len(lines) == len(env)
    shown = "\n".join(lines)
    for needle in (secret, secret[:12], secret[12:], github[4:]):
        assert needle not in shown
    assert "FACTRAIL_OUTPUTS_DIR='/data/[REDACTED:" in shown


def test_no_problem_line_shows_what_the_file_holds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = token(size=24)
    path = tmp_path / "factrail.toml"
    monkeypatch.setenv("FACTRAIL_CONFIG", str(path))
    for body, line in (
        (f'[factrail]\njudge_url = ["https://x/?k={secret}"]', "judge_url=<a list>"),
        (f'[factrail.judge]\napi_key = "{secret}"', "judge=<a table>"),
        (f'[factrail]\negress = "{token("ghp_")}"', "egress='[REDACTED:gh-token]'"),
        (
            f'[factrail]\njudge_url = "https://u:{secret}@j/v1 "',
            "judge_url='https://<hidden>@j/v1 '",
        ),
        (f'factrail = "{secret}"', "factrail is not allowed: a [factrail] table"),
        (f'[factrail]\njudge_key = "{secret}"', "judge_key is not a setting"),
    ):
        path.write_text(body + "\n", encoding="utf-8")
        (problem,) = problems()
        assert line in problem and secret not in problem and secret[:12] not in problem, problem


def test_only_a_regular_file_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # nobody writes it: reading it must not wait
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * (1 << 20) + "\n", encoding="utf-8")
    link = tmp_path / "link.toml"
    (tmp_path / "real.toml").write_text('egress = "metadata"\n', encoding="utf-8")
    link.symlink_to(tmp_path / "real.toml")
    for path, why in ((fifo, "not a regular file"), (tmp_path, "not a regular file"),
                      (Path(os.devnull), "not a regular file"), (big, "larger than")):  # fmt: skip
        monkeypatch.setenv("FACTRAIL_CONFIG", str(path))
        (line,) = problems()
        assert line.startswith(f"FACTRAIL_CONFIG={str(path)!r} is not allowed: ") and why in line
    monkeypatch.setenv("FACTRAIL_CONFIG", str(link))
    assert Settings().egress == "metadata"


@pytest.mark.parametrize(
    "key",
    ["k" * 8 + " " + "k" * 8, "\uff4b" * 16, "k\u200b" * 8, "a\u0301" * 8, "k" * 15 + "\u00e9"],
)
def test_an_admin_key_is_printable_ascii(key: str) -> None:
    with pytest.raises(SettingsError) as err:
        Settings(admin_key=SecretStr(key))
    (line,) = err.value.problems
    assert line.startswith("admin_key=<hidden> is not allowed: ") and key not in line
    assert Settings(admin_key=SecretStr("k" * 16)).bind_problems("0.0.0.0") == []


def test_an_overlay_never_leaves_out_a_fence_list() -> None:
    """The hook lays the plugin's options over the settings: a value refused keeps the
    setting, but a fence list refused would fence less than was meant, so it is an error."""
    base = Settings()
    assert base.overlaid({"egress": "none"}).egress == base.egress
    with pytest.raises(SettingsError, match="'/' does not separate names"):
        base.overlaid({"taint_tools": "mcp__a__/mcp__b__"})
    with pytest.raises(SettingsError, match="no tool name holds it"):
        base.overlaid({"taint_tools": ("crm:lookup",)})
