"""OpenAI chat adapter: each spelling parses to the right engine view and writes back in place."""

from __future__ import annotations

import json
from typing import Any

import pytest

from factrail.core.formats import FormatError, openai_chat


def test_tool_calls_nested_and_flat_parse_and_pair() -> None:
    wire: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "developer", "content": [{"type": "text", "text": "dev"}]},
        {"role": "user", "content": "fix it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "Read", "arguments": '{"path": "x.py"}'},
                },
                {"id": "b", "name": "Bash", "arguments": "ls -la"},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "print(1)"},
        {"role": "tool", "tool_call_id": "b", "content": "total 0", "is_error": True},
    ]
    doc = openai_chat.parse(wire)
    assert doc.format == "openai-chat"
    assert doc.system_texts == ["be brief", "dev"]
    assert [m.role for m in doc.messages] == ["user", "assistant", "user"]
    uses = doc.messages[1].tool_uses
    assert [(u.tool_use_id, u.tool, u.input) for u in uses] == [
        ("a", "Read", {"path": "x.py"}),
        ("b", "Bash", {"raw": "ls -la"}),
    ]
    assert uses[0].text == "print(1)" and uses[1].is_error
    results = doc.messages[2].tool_results
    assert [(r.tool_use_id, r.text, r.is_error) for r in results] == [
        ("a", "print(1)", False),
        ("b", "total 0", True),
    ]
    assert doc.result_location(2, 1) == (5, "content")
    assert doc.use_location(1, 0) == (3, "tool_calls", 0, "function", "arguments")
    assert doc.use_location(1, 1) == (3, "tool_calls", 1, "arguments")


def test_emit_writes_changed_values_in_place_and_shares_the_rest() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:x"}}
    wire: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "Read", "arguments": '{"path": "a.txt", "limit": 5}'},
                },
                {"id": "b", "name": "Bash", "arguments": "ls"},
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "a",
            "content": [
                {"type": "text", "text": "one", "cache_control": {"type": "ephemeral"}},
                image,
                {"type": "text", "text": "two"},
            ],
        },
        {"role": "tool", "tool_call_id": "b", "content": "long output", "x": 1},
    ]
    before = json.dumps(wire)
    doc = openai_chat.parse(wire)
    assert doc.messages[2].tool_results[0].text == "one\ntwo"
    new = [m.copy() for m in doc.messages]
    new[2].tool_results[0].text = "cut"
    new[2].tool_results[1].text = "short"
    new[1].tool_uses[0].input = {"path": "a.txt", "limit": "…"}
    new[1].tool_uses[1].input = {"raw": "ls -l"}
    out = doc.emit(new)
    assert json.dumps(wire) == before
    assert out[0] is wire[0]
    assert out[2]["content"] == [
        {"type": "text", "text": "cut", "cache_control": {"type": "ephemeral"}},
        image,
    ]
    assert out[2]["content"][1] is image
    assert out[3] == {"role": "tool", "tool_call_id": "b", "content": "short", "x": 1}
    assert out[1]["tool_calls"][0]["function"]["arguments"] == '{"path":"a.txt","limit":"…"}'
    assert out[1]["tool_calls"][1]["arguments"] == "ls -l"
    assert list(out[1]) == ["role", "content", "tool_calls"]


def test_unchanged_emit_is_the_input_itself() -> None:
    wire = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "a", "content": None},
    ]
    doc = openai_chat.parse(wire)
    assert doc.emit([m.copy() for m in doc.messages]) is wire


def test_null_tool_content_written_as_string() -> None:
    wire: list[dict[str, Any]] = [{"role": "tool", "tool_call_id": "a", "content": None}]
    doc = openai_chat.parse(wire)
    new = [m.copy() for m in doc.messages]
    new[0].tool_results[0].text = "x"
    assert doc.emit(new) == [{"role": "tool", "tool_call_id": "a", "content": "x"}]


def test_object_arguments_stay_objects() -> None:
    wire = [
        {
            "role": "assistant",
            "tool_calls": [{"id": "a", "function": {"name": "Read", "arguments": {"path": "p"}}}],
        }
    ]
    doc = openai_chat.parse(wire)
    new = [m.copy() for m in doc.messages]
    new[0].tool_uses[0].input = {"path": "q"}
    assert doc.emit(new)[0]["tool_calls"][0]["function"]["arguments"] == {"path": "q"}


def test_legacy_function_results_pair_by_name_then_order() -> None:
    wire: list[dict[str, Any]] = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
        },
        {"role": "function", "name": "get_weather", "content": "rain"},
        {"role": "assistant", "content": None, "function_call": {"name": "a", "arguments": "{}"}},
        {"role": "function", "name": "other", "content": "sun"},
        {"role": "function", "name": "orphan", "content": "?"},
    ]
    doc = openai_chat.parse(wire)
    assert [m.role for m in doc.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert doc.messages[1].tool_uses[0].tool_use_id == "fn_1"
    assert doc.messages[1].tool_uses[0].input == {"city": "Oslo"}
    assert doc.messages[1].tool_uses[0].text == "rain"
    assert [(r.tool_use_id, r.text) for r in doc.messages[2].tool_results] == [("fn_1", "rain")]
    assert [r.tool_use_id for r in doc.messages[4].tool_results] == ["fn_3", "fn_5"]
    new = [m.copy() for m in doc.messages]
    new[2].tool_results[0].text = "wet"
    new[1].tool_uses[0].input = {"city": "Bergen"}
    out = doc.emit(new)
    assert out[2] == {"role": "function", "name": "get_weather", "content": "wet"}
    assert out[1]["function_call"]["arguments"] == '{"city":"Bergen"}'


def test_empty_user_messages_are_left_out_and_unknown_roles_are_user_text() -> None:
    wire = [
        {"role": "user", "content": ""},
        {"role": "user", "content": None},
        {"role": "critic", "content": "meh"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
    ]
    doc = openai_chat.parse(wire)
    assert [(m.role, m.text) for m in doc.messages] == [("user", "meh"), ("user", "")]


def test_tool_results_split_by_other_messages_are_separate_turns() -> None:
    wire = [
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "user", "content": "next"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "tool", "tool_call_id": "c", "content": "3"},
    ]
    doc = openai_chat.parse(wire)
    assert [len(m.tool_results) for m in doc.messages] == [1, 0, 2]
    assert doc.result_location(2, 1) == (3, "content")


@pytest.mark.parametrize(
    ("wire", "needle"),
    [
        ({"role": "user"}, "JSON array"),
        ([1], "message 0"),
        ([{"role": "assistant", "tool_calls": ["x"]}], "tool_calls[0]"),
    ],
)
def test_bad_input_raises_format_error(wire: Any, needle: str) -> None:
    with pytest.raises(FormatError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        openai_chat.parse(wire)


def test_emit_rejects_a_view_of_another_shape() -> None:
    doc = openai_chat.parse([{"role": "user", "content": "a"}])
    with pytest.raises(FormatError, match=r"engine view has 0 messages, the document 1"):
        doc.emit([])
