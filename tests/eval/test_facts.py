"""Hindsight facts: candidate tokens, uses, cuts, visibility and labels."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from factrail.core.model import Message, ToolResult, ToolUse
from factrail.eval.facts import (
    Shown,
    candidate_tokens,
    facts,
    hindsight_labels,
    needed_across,
    oracle_actions,
    visible_text,
)


def call(i: str, tool: str = "Bash", **inp: str) -> Message:
    return Message("assistant", tool_uses=[ToolUse(i, tool, dict(inp), text="MIRROR-123456")])


def result(i: str, text: str) -> Message:
    return Message("user", tool_results=[ToolResult(i, text)])


def reference_candidate_tokens(s: str) -> set[str]:
    """The definition, one character at a time (as the module computed it before 4f82891)."""
    out: set[str] = set()
    for m in re.finditer(r"[A-Za-z0-9][A-Za-z0-9_.:/@#-]{5,}", s):
        t = m.group().rstrip(".:,")
        if len(t) >= 6 and any("0" <= c <= "9" for c in t):
            out.add(t)
    for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_./-]{7,}", s):
        t = m.group().rstrip(".:,")
        if len(t) >= 8 and not any("0" <= c <= "9" for c in t) and any(c in t for c in "/_."):
            out.add(t)
    return out


PIECES = ["abcd", "efghij", "Z", "9", "04", "_", "/", ".", ":", ",", "-", "@", "#", " ", "\n"]
PIECES += ["é", "٣", "main.rs", "src/", "req-", "v1.2"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_candidate_tokens_match_the_definition(text: str) -> None:
    assert candidate_tokens(text) == reference_candidate_tokens(text)


def test_candidate_tokens_classes() -> None:
    toks = candidate_tokens("see 9f3c2ab1 in src/main_loop.rs and 48211 or plainwords here")
    assert toks == {"9f3c2ab1", "src/main_loop.rs"}


def test_trailing_punctuation_stripped_before_checks() -> None:
    # The reference quirk: `returned.` became a token and `12345.` a 5-char one.
    assert candidate_tokens("the request returned.") == set()
    assert candidate_tokens("pid 12345.") == set()
    assert candidate_tokens("pid 123456.") == {"123456"}
    assert candidate_tokens("at src/api/mod.rs:12:4,") == {"src/api/mod.rs:12:4", "src/api/mod.rs"}
    assert candidate_tokens("module_name:") == {"module_name"}


def transcript() -> list[Message]:
    return [
        Message("user", "fix it"),
        call("a", command="curl x"),
        result("a", "request_id=req-0a1b2c3d4e and port 8080 and trace_9f8e7d6c"),
        Message("assistant", "Saw req-0a1b2c3d4e."),
        call("b", command="ls"),
        result("b", "nothing 777777"),
        Message("assistant", "Now trace_9f8e7d6c and 777777"),
        call("c", command="grep req-0a1b2c3d4e"),
        result("c", "done"),
    ]


def test_facts_introduction_and_uses() -> None:
    found = {f.token: f for f in facts(transcript())}
    assert set(found) == {"req-0a1b2c3d4e", "trace_9f8e7d6c", "777777"}
    req = found["req-0a1b2c3d4e"]
    assert (req.source, req.introduced, req.uses) == ("a", 2, [3, 7])
    assert found["777777"].source == "b"


def test_needed_across_and_echoed() -> None:
    found = facts(transcript())
    at_six = {f.token for f in needed_across(found, 6)}
    assert at_six == {"req-0a1b2c3d4e", "trace_9f8e7d6c", "777777"}
    echoed = {f.token for f in found if f.echoed_before(6)}
    assert echoed == {"req-0a1b2c3d4e"}
    assert {f.token for f in needed_across(found, 7)} == {"req-0a1b2c3d4e"}


def test_visible_text_excludes_mirror() -> None:
    text = visible_text(transcript()[:3])
    assert "MIRROR-123456" not in text
    assert '{"command":"curl x"}\n' in text


def test_strict_vs_compat_visibility() -> None:
    ms = [Message("user", "saved at /tmp/out/req-0a1b2c3d4e5f.txt and ab1234567")]
    strict, compat = Shown(ms, "strict"), Shown(ms, "compat")
    assert not strict("req-0a1b2c3d4e")
    assert compat("req-0a1b2c3d4e")
    assert not strict("1234567") and compat("1234567")
    assert strict("ab1234567") and compat("ab1234567")


def test_hindsight_labels() -> None:
    ms = [
        Message("user", "go"),
        call("a", command="curl http://api.internal/health"),
        result("a", "request_id=req-0a1b2c3d4e"),
        call("b", command="cat config_file.toml"),
        result("b", "nothing"),
        call("c", command="ls"),
        result("c", "zzz"),
        call("d", command="ls"),
        result("d", "zzz"),
        Message("assistant", "use req-0a1b2c3d4e and open config_file.toml.bak"),
    ]
    labels = hindsight_labels(ms, 7)
    assert labels["a"].keep_result and labels["a"].keep_call
    assert not labels["b"].keep_result and labels["b"].keep_call
    assert labels["c"].keep_result  # re-run by d after the cut
    strict = hindsight_labels(ms, 7, visibility="strict")
    assert not strict["b"].keep_call  # config_file.toml is not a whole token of the later text
    actions = oracle_actions(ms, 5, pinned=["b"])
    assert actions == {"a": "keep", "b": "keep"}
    assert oracle_actions(ms, 7)["b"] == "drop_result"
