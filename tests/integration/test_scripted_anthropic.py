"""The scripted Anthropic endpoint's own rules: what it rejects and what its cache bills."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.scripted_anthropic import Invalid, PromptCache, cut, validate

MARK = {"type": "ephemeral"}


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    system = [{"type": "text", "text": "s" * 5000, "cache_control": MARK}]
    return {"model": "claude-x", "max_tokens": 10, "system": system, "messages": messages, **extra}


def turn(i: int, mark: bool = False) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls"}}
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": f"t{i}", "content": "x" * 800}
    if mark:
        result["cache_control"] = MARK
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]


def session(turns: int, marks: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(turns):
        messages += turn(i, i in marks or i == turns - 1)
    return messages


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([{"role": "user", "content": ""}], "non-empty"),
        ([{"role": "user", "content": [{"type": "text", "text": ""}]}], "non-empty"),
        ([{"role": "assistant", "content": "hi"}], "first message"),
        ([*session(2)[:2], {"role": "user", "content": "no result"}], "without tool_result"),
        ([session(1)[0], session(1)[2]], "previous message"),
        (session(5, marks=(0, 1, 2, 3)), "maximum of 4"),
    ],
)
def test_invalid_requests_are_rejected(messages: list[dict[str, Any]], error: str) -> None:
    with pytest.raises(Invalid, match=error):
        validate(body(messages))


def test_system_messages_take_no_part_in_the_alternation() -> None:
    messages = session(2)
    messages.insert(1, {"role": "system", "content": [{"type": "text", "text": "reminder"}]})
    validate(body(messages))


def test_the_cache_reads_the_longest_written_prefix_within_the_lookback() -> None:
    now = [0.0]
    cache = PromptCache(clock=lambda: now[0])
    first = cut(body(session(3)))
    usage = cache.bill("claude-x", first)
    assert (usage.cache_read, usage.input_tokens) == (0, 0)
    assert usage.cache_creation == first.totals[-1]
    grown = cut(body(session(5)))  # the marker moved two turns on: read what was written
    usage = cache.bill("claude-x", grown)
    assert usage.cache_read == first.totals[-1]
    assert usage.cache_read + usage.cache_creation == grown.totals[-1]
    far = cut(body(session(20)))  # more than 20 blocks past the last entry: only the system
    assert cache.bill("claude-x", far).cache_read == far.totals[0]
    changed = body(session(5))
    changed["messages"][2]["content"][0]["content"] = "y" * 800  # an early result rewritten
    assert cache.bill("claude-x", cut(changed)).cache_read == far.totals[0]
    now[0] = 301.0  # five minutes idle: everything has expired
    assert cache.bill("claude-x", cut(body(session(5)))).cache_read == 0
