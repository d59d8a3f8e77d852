"""The frozen zone's cache breakpoint on OpenAI requests to models that cache at breakpoints
(GPT-5.6 and later): the placing rules, and the marker through the gateway."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx

from factrail.core.formats.openai_chat import parse as parse_chat
from factrail.core.formats.responses import parse as parse_responses
from factrail.gateway import openai_marks
from tests.gateway.support import UPSTREAM
from tests.gateway.test_cache_marks import FrozenCompactor, scripted

MARK = {"mode": "explicit"}
RESPONSES_URL = f"{UPSTREAM}/responses"
CHAT_URL = f"{UPSTREAM}/chat/completions"


def responses_items(calls: int) -> list[dict[str, Any]]:
    """Codex on GPT-6: its tools as an input item, developer text, the task, then code-mode
    calls of `exec` and their outputs."""
    items: list[dict[str, Any]] = [
        {"type": "additional_tools", "role": "developer", "tools": [{"name": "exec"}]},
        {"type": "message", "role": "developer",
         "content": [{"type": "input_text", "text": "You are Codex."}]},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "Find the key."}]},
    ]  # fmt: skip
    for i in range(calls):
        items.append({"type": "custom_tool_call", "call_id": f"call_{i}", "name": "exec",
                      "input": f'await tools.exec_command({{cmd: "cat f{i}"}})'})  # fmt: skip
        items.append({"type": "custom_tool_call_output", "call_id": f"call_{i}",
                      "output": f"line {i}\n" * 40})  # fmt: skip
    return items


def chat_messages(calls: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coder."},
        {"role": "user", "content": "Find the key."},
    ]
    for i in range(calls):
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": "bash", "arguments": f'{{"cmd": "cat f{i}"}}'}}  # fmt: skip
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": f"out {i}\n" * 40})
    return messages


def marked(items: list[Any]) -> list[int]:
    return [k for k, item in enumerate(items) if openai_marks.marks([item])]


def test_the_last_tool_output_of_the_frozen_zone_is_marked_as_one_text_block() -> None:
    items = responses_items(4)
    doc = parse_responses(items)
    # Engine messages: the task (0), then per call an assistant (odd) and its output (even).
    placed = openai_marks.place({}, items, doc, 4, chat=False)
    assert placed is not None and marked(placed) == [6]
    text = items[6]["output"]
    assert placed[6]["output"] == [
        {"type": "input_text", "text": text, "prompt_cache_breakpoint": MARK}
    ]
    assert items == responses_items(4)  # the client's objects are left as they were
    # Mid-way through a call's turn, the zone ends at the output before it.
    again = openai_marks.place({}, items, doc, 5, chat=False)
    assert again is not None and marked(again) == [6]


def test_before_any_output_the_task_message_is_marked() -> None:
    items = responses_items(3)
    placed = openai_marks.place({}, items, parse_responses(items), 0, chat=False)
    assert placed is not None and marked(placed) == [2]
    assert placed[2]["content"] == [
        {"type": "input_text", "text": "Find the key.", "prompt_cache_breakpoint": MARK}
    ]


def test_a_hosted_shell_output_cannot_carry_it_so_the_output_before_it_does() -> None:
    """A `shell_call_output` holds stdout / stderr chunks, not content blocks: the breakpoint
    goes on the last output before it that can carry one (here the task, before any)."""
    items = responses_items(2)
    items.append({"type": "shell_call", "call_id": "s", "action": {"commands": ["ls"]}})
    chunk = {"stdout": "a\n" * 40, "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
    items.append({"type": "shell_call_output", "call_id": "s", "output": [chunk]})
    doc = parse_responses(items)
    placed = openai_marks.place({}, items, doc, 6, chat=False)
    assert placed is not None and marked(placed) == [6]
    assert placed[8] is items[8]
    shells = [items[0], items[1], items[2], items[-2], items[-1]]
    alone = openai_marks.place({}, shells, parse_responses(shells), 2, chat=False)
    assert alone is not None and marked(alone) == [2]


def test_chat_tool_messages_take_a_text_block() -> None:
    messages = chat_messages(3)
    placed = openai_marks.place({}, messages, parse_chat(messages), 2, chat=True)
    assert placed is not None and marked(placed) == [3]
    assert placed[3]["content"] == [
        {"type": "text", "text": messages[3]["content"], "prompt_cache_breakpoint": MARK}
    ]


def test_four_writes_leave_no_room_and_a_marked_item_is_left_alone() -> None:
    items = responses_items(4)
    for k in (2, 4, 8):
        items[k] = {**items[k], "output": [{"type": "input_text", "text": "x",
                                            "prompt_cache_breakpoint": MARK}]}  # fmt: skip
    items[2] = {**responses_items(4)[2]}
    items[2]["content"] = [{**items[2]["content"][0], "prompt_cache_breakpoint": MARK}]
    doc = parse_responses(items)
    # Three client markers and the implicit breakpoint make four.
    assert openai_marks.place({}, items, doc, 4, chat=False) is None
    explicit = {"prompt_cache_options": {"mode": "explicit"}}
    # In explicit mode there is no implicit one, but the zone's last output is marked already.
    assert openai_marks.place(explicit, items, doc, 6, chat=False) is None
    placed = openai_marks.place(explicit, items, doc, 4, chat=False)
    assert placed is not None and marked(placed) == [2, 4, 6, 8]


def test_no_zone_or_no_document_forwards_the_items_as_they_are() -> None:
    items = responses_items(2)
    assert openai_marks.place({}, items, parse_responses(items), None, chat=False) is None
    assert openai_marks.place({}, items, object(), 2, chat=False) is None
    assert openai_marks.place({}, {"not": "a list"}, parse_responses(items), 2, chat=False) is None


# -- through the gateway ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "expected"), [("gpt-6-sol", [6]), ("gpt-5.6-terra", [6]), ("gpt-5-codex", [])]
)
def test_only_models_that_cache_at_breakpoints_get_the_marker(
    router: respx.MockRouter, tmp_path: Path, model: str, expected: list[int]
) -> None:
    route = router.post(RESPONSES_URL).mock(return_value=httpx.Response(200, json={"id": "r"}))
    body = {"model": model, "input": responses_items(4), "prompt_cache_key": "k"}
    engine = FrozenCompactor(outcome="passthrough", frozen_through=4)
    with scripted(router, tmp_path, engine) as c:
        raw = orjson.dumps(body)
        r = c.post("/v1/responses", content=raw)
    assert r.headers["x-factrail"] == "passthrough"
    sent = orjson.loads(route.calls.last.request.content)
    assert marked(sent["input"]) == expected
    if not expected:
        assert route.calls.last.request.content == raw
    else:
        unmarked = copy.deepcopy(sent)
        unmarked["input"][6]["output"] = body["input"][6]["output"]
        assert unmarked == body


def test_chat_requests_get_it_too_unless_switched_off(
    router: respx.MockRouter, tmp_path: Path
) -> None:
    route = router.post(CHAT_URL).mock(return_value=httpx.Response(200, json={"choices": []}))
    body = {"model": "gpt-6-luna", "messages": chat_messages(3)}
    engine = FrozenCompactor(outcome="passthrough", frozen_through=2)
    with scripted(router, tmp_path, engine) as c:
        c.post("/v1/chat/completions", json=body)
    assert marked(orjson.loads(route.calls.last.request.content)["messages"]) == [3]
