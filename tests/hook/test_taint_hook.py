"""`factrail hook taint`: the fence's one matcher, one call at a time, the record written once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from factrail.hook import run_hook


def taint(**fields: Any) -> Any:
    body = run_hook("taint", json.dumps({"protocol": 1, "now": 7, **fields}).encode())
    assert body["ok"] is True, body
    return body["taint"]


@pytest.mark.parametrize(
    "tool",
    [
        "mcp__email-gateway__ask_email",
        "mcp__email-gateway__fetch_email_raw",
        "mcp__claude_ai_Gmail__authenticate",
        "mcp__plugin_agentbox_email-gateway__ask_email",
    ],
)
def test_fenced_tools_taint_the_first_time(tool: str) -> None:
    assert taint(tool=tool) == {"v": 2, "tainted": True, "count": 1, "sample": [tool], "at": 7}


@pytest.mark.parametrize(
    "tool", ["Read", "Bash", "mcp__codebase-memory__search", "email", "mcp__other__x"]
)
def test_clean_tools_write_nothing(tool: str) -> None:
    assert taint(tool=tool) is None


@pytest.mark.parametrize("skill", ["email-search", "agentbox:email-search", "/email-search now"])
def test_skills_taint_as_a_skill_call_and_as_a_slash_command(skill: str) -> None:
    assert taint(tool="Skill", skill=skill)["sample"] == ["Skill"]
    assert taint(tool=None, skill=skill)["sample"] == ["Skill"]


def test_other_skills_are_clean() -> None:
    assert taint(tool="Skill", skill="email-research") is None
    assert taint(tool="Skill", skill="myemail-search") is None
    assert taint(tool="Skill", skill=None) is None
    assert taint(tool=None, skill=None) is None


def test_written_once_the_first_sighting_stays() -> None:
    record = {"tainted": True, "count": 1, "sample": ["x"], "at": 1}
    assert taint(tool="mcp__email-gateway__ask", store={"taint": record}) is None
    # a record that does not count (a string "true", garbage) is no taint: written afresh
    for bad in ({"tainted": "true"}, "tainted", 7):
        assert taint(tool="mcp__email-gateway__ask", store={"taint": bad})["at"] == 7


def test_the_config_adds_fenced_names() -> None:
    config = {"taintTools": "mcp__codebase-memory__", "taintSkills": ["pdf"]}
    assert taint(tool="mcp__codebase-memory__search", config=config)["count"] == 1
    assert taint(tool="Skill", skill="pdf", config=config)["count"] == 1
    # added to the defaults, never replacing them
    assert taint(tool="mcp__email-gateway__x", config=config)["count"] == 1


def test_malformed_fields_taint_nothing() -> None:
    for fields in ({"tool": 7}, {"tool": ["x"], "skill": {}}, {"config": "nope"}):
        assert taint(**fields) is None
