"""Hook SessionMessage adapter, format detection and `dump_document`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from factrail.core.formats import FormatError, dump_document, hook, parse_any


def hook_messages() -> list[dict[str, Any]]:
    return [
        {"role": "user", "text": "go", "handle": 0},
        {
            "role": "assistant",
            "text": "ok",
            "toolUses": [
                {"tool_use_id": "u1", "tool": "Bash", "input": {"command": "ls"}, "text": "a b"}
            ],
        },
        {
            "role": "user",
            "text": "",
            "toolResults": [{"tool_use_id": "u1", "text": "a b", "isError": True}],
            "content": "stray",
        },
    ]


def test_hook_messages_parse_one_to_one() -> None:
    doc = hook.parse(hook_messages())
    assert doc.format == "hook"
    assert [(m.role, m.text) for m in doc.messages] == [
        ("user", "go"),
        ("assistant", "ok"),
        ("user", ""),
    ]
    u = doc.messages[1].tool_uses[0]
    assert (u.tool_use_id, u.tool, u.input, u.text, u.is_error) == (
        "u1",
        "Bash",
        {"command": "ls"},
        "a b",
        True,
    )
    assert doc.messages[2].tool_results[0].is_error


def test_hook_write_back_updates_result_and_mirror() -> None:
    wire = hook_messages()
    doc = hook.parse(wire)
    new = [m.copy() for m in doc.messages]
    new[2].tool_results[0].text = "a"
    new[1].tool_uses[0].text = "a"
    out = doc.emit(new)
    assert out[2]["toolResults"][0] == {"tool_use_id": "u1", "text": "a", "isError": True}
    assert out[1]["toolUses"][0]["text"] == "a"
    assert out[0] is wire[0]
    assert wire[2]["toolResults"][0]["text"] == "a b"


def test_hook_rejects_malformed_lists() -> None:
    with pytest.raises(FormatError, match="toolUses must be a list of objects"):
        hook.parse([{"role": "assistant", "toolUses": "nope"}])


def test_hook_list_with_content_key_is_still_hook() -> None:
    doc = parse_any(json.dumps(hook_messages()))
    assert doc.format == "hook"
    assert doc.messages[2].tool_results[0].text == "a b"


@pytest.mark.parametrize(
    ("value", "fmt"),
    [
        ([{"role": "user", "content": "x"}], "openai-chat"),
        ({"messages": [{"role": "tool", "tool_call_id": "a", "content": "x"}]}, "openai-chat"),
        ([{"role": "user", "text": "x"}], "hook"),
        ({"input": [{"type": "function_call_output", "call_id": "a", "output": "x"}]}, "responses"),
        ([{"type": "message", "role": "user", "content": "x"}], "responses"),
        ({"system": "s", "messages": [{"role": "user", "content": "x"}]}, "anthropic"),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}],
                }
            ],
            "anthropic",
        ),
        ([], "openai-chat"),
    ],
)
def test_detection_by_shape(value: Any, fmt: str) -> None:
    assert parse_any(json.dumps(value).encode()).format == fmt


def test_jsonl_by_name_or_by_shape() -> None:
    text = json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}}) + "\n"
    assert parse_any(text, filename="s.jsonl").format == "claude-jsonl"
    assert parse_any(text + text).format == "claude-jsonl"
    entry = {"type": "user", "sessionId": "s", "message": {"role": "user", "content": "hi"}}
    assert parse_any(json.dumps(entry)).messages[0].text == "hi"


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"\xff\xfe", "not UTF-8"),
        ("nope", "neither JSON nor JSON lines"),
        ("42", "JSON int"),
        ('{"model": "x"}', "needs a `messages` array"),
        ('[{"role": "user"}]', "cannot tell the format"),
        ("[1]", "must be a JSON object"),
    ],
)
def test_bad_input_says_what_is_wrong(data: bytes | str, needle: str) -> None:
    with pytest.raises(FormatError, match=needle):
        parse_any(data)


def test_dump_keeps_envelope_and_layout() -> None:
    body = {
        "model": "m",
        "messages": [{"role": "tool", "tool_call_id": "a", "content": "long"}],
        "temperature": 0,
    }
    doc = parse_any(json.dumps(body, indent=2))
    new = [m.copy() for m in doc.messages]
    new[0].tool_results[0].text = "short"
    dumped = dump_document(doc, doc.emit(new))
    assert json.loads(dumped) == {
        **body,
        "messages": [{"role": "tool", "tool_call_id": "a", "content": "short"}],
    }
    assert list(json.loads(dumped)) == ["model", "messages", "temperature"]
    assert dumped.startswith("{\n")
    compact = parse_any(json.dumps(body, separators=(",", ":")))
    assert dump_document(compact, compact.emit(compact.messages)) == json.dumps(
        body, separators=(",", ":")
    )


def test_dump_jsonl_is_the_emitted_text() -> None:
    text = json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}}) + "\n"
    doc = parse_any(text, filename="x.jsonl")
    assert dump_document(doc, doc.emit(doc.messages)) == text


def test_responses_envelope_instructions_are_system_text() -> None:
    doc = parse_any(json.dumps({"instructions": "be terse", "input": "hi"}))
    assert doc.system_texts == ["be terse"]
    assert [m.text for m in doc.messages] == ["hi"]
