"""Responses adapter: item kinds, grouping, opaque items and write-back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from factrail.core.formats import FormatError, responses

REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA=="}


def sample() -> list[dict[str, Any]]:
    return [
        {"role": "developer", "content": "rules"},
        {"role": "user", "content": [{"type": "input_text", "text": "list files"}]},
        {"type": "compaction", "encrypted_content": "zzz"},  # only calls before it are pruned
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Looking."}],
        },
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "shell",
            "arguments": '{"cmd": ["ls"]}',
            "id": "fc_1",
            "status": "completed",
        },
        {
            "type": "custom_tool_call",
            "call_id": "c2",
            "name": "apply_patch",
            "input": "*** Begin Patch",
        },
        {"type": "function_call_output", "call_id": "c1", "output": "a\nb"},
        {
            "type": "custom_tool_call_output",
            "call_id": "c2",
            "output": [
                {"type": "input_text", "text": "Done"},
                {"type": "input_image", "image_url": "data:x"},
            ],
        },
        dict(REASONING),
        {"type": "item_reference", "id": "msg_9"},
        {"role": "user", "content": "thanks"},
    ]


def test_items_parse_into_engine_turns() -> None:
    doc = responses.parse(sample())
    assert doc.format == "responses"
    assert doc.system_texts == ["rules"]
    assert [(m.role, m.text) for m in doc.messages] == [
        ("user", "list files"),
        ("assistant", "Looking."),
        ("user", ""),
        ("user", "thanks"),
    ]
    uses = doc.messages[1].tool_uses
    assert [(u.tool_use_id, u.tool, u.input) for u in uses] == [
        ("c1", "shell", {"cmd": ["ls"]}),
        ("c2", "apply_patch", {"input": "*** Begin Patch"}),
    ]
    assert [(r.tool_use_id, r.text) for r in doc.messages[2].tool_results] == [
        ("c1", "a\nb"),
        ("c2", "Done"),
    ]


def test_write_back_keeps_opaque_items_and_spellings() -> None:
    wire = sample()
    before = json.dumps(wire)
    doc = responses.parse(wire)
    new = [m.copy() for m in doc.messages]
    new[2].tool_results[0].text = "a"
    new[2].tool_results[1].text = "Dn"
    new[1].tool_uses[1].input = {"input": "*** Begin"}
    new[1].tool_uses[0].input = {"cmd": ["ls", "-a"]}
    out = doc.emit(new)
    assert json.dumps(wire) == before
    assert all(out[i] is wire[i] for i in (0, 1, 2, 3, 8, 9, 10))
    assert out[6]["output"] == "a"
    assert out[7]["output"] == [
        {"type": "input_text", "text": "Dn"},
        {"type": "input_image", "image_url": "data:x"},
    ]
    assert out[5]["input"] == "*** Begin"
    assert out[4] == {**wire[4], "arguments": '{"cmd":["ls","-a"]}'}
    assert list(out[4]) == list(wire[4])


def test_output_parts_without_text_get_an_input_text_part() -> None:
    wire = [
        {
            "type": "function_call_output",
            "call_id": "c",
            "output": [{"type": "input_image", "image_url": "u"}],
        }
    ]
    doc = responses.parse(wire)
    new = [m.copy() for m in doc.messages]
    new[0].tool_results[0].text = "note"
    assert doc.emit(new)[0]["output"] == [
        {"type": "input_text", "text": "note"},
        {"type": "input_image", "image_url": "u"},
    ]


def test_string_input_is_one_user_message() -> None:
    doc = responses.parse("hello")
    assert [(m.role, m.text) for m in doc.messages] == [("user", "hello")]
    assert doc.emit(doc.messages) == "hello"


def test_calls_after_results_start_a_new_assistant_turn() -> None:
    wire = [
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "1"},
        {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
    ]
    doc = responses.parse(wire)
    assert [(m.role, len(m.tool_uses), len(m.tool_results)) for m in doc.messages] == [
        ("assistant", 1, 0),
        ("user", 0, 1),
        ("assistant", 2, 0),
    ]


@pytest.mark.parametrize(("wire", "needle"), [(5, "string or a JSON array"), (["x"], "item 0")])
def test_bad_input_raises(wire: Any, needle: str) -> None:
    with pytest.raises(FormatError, match=needle):
        responses.parse(wire)


def _exit(code: int) -> dict[str, Any]:
    return {"type": "exit", "exit_code": code}


def hosted() -> list[dict[str, Any]]:
    """A turn of the tools a client runs for hosted tool definitions (shell, local shell,
    apply_patch), in the shapes of the OpenAI SDK's input item types."""
    return [
        {"role": "user", "content": "fix it"},
        {
            "type": "shell_call",
            "call_id": "s1",
            "action": {"commands": ["cat a.py", "ls src"], "timeout_ms": 1000},
            "status": "completed",
        },
        {
            "type": "local_shell_call",
            "id": "lsh_1",
            "call_id": "l1",
            "action": {"type": "exec", "command": ["bash", "-lc", "git log"], "env": {}},
            "status": "completed",
        },
        {
            "type": "apply_patch_call",
            "call_id": "p1",
            "operation": {"type": "update_file", "path": "a.py", "diff": "@@\n-a\n+b\n"},
            "status": "completed",
        },
        {
            "type": "shell_call_output",
            "call_id": "s1",
            "output": [
                {"stdout": "print(1)", "stderr": "", "outcome": _exit(0)},
                {"stdout": "", "stderr": "ls: src: No such file", "outcome": _exit(2)},
            ],
            "max_output_length": 4096,
        },
        {"type": "local_shell_call_output", "id": "l1", "output": "commit 1"},
        {"type": "apply_patch_call_output", "call_id": "p1", "status": "failed", "output": "no"},
        {"type": "mcp_call", "id": "mcp_1", "name": "q", "server_label": "s", "arguments": "{}"},
    ]


def test_hosted_tool_calls_and_outputs_are_engine_calls_and_results() -> None:
    doc = responses.parse(hosted())
    assert [(m.role, m.text) for m in doc.messages] == [
        ("user", "fix it"),
        ("assistant", ""),
        ("user", ""),
    ]
    uses = doc.messages[1].tool_uses
    assert [(u.tool_use_id, u.tool) for u in uses] == [
        ("s1", "shell"),
        ("l1", "local_shell"),
        ("p1", "apply_patch"),
    ]
    assert uses[0].input == {"commands": ["cat a.py", "ls src"], "timeout_ms": 1000}
    assert uses[2].input["path"] == "a.py"
    results = doc.messages[2].tool_results
    assert [(r.tool_use_id, r.text, r.is_error) for r in results] == [
        ("s1", "print(1)\nls: src: No such file", True),  # a command exited 2
        ("l1", "commit 1", False),
        ("p1", "no", True),  # the patch failed
    ]


def test_hosted_outputs_are_written_back_in_their_own_shapes() -> None:
    wire = hosted()
    before = json.dumps(wire)
    doc = responses.parse(wire)
    new = [m.copy() for m in doc.messages]
    for r, text in zip(
        new[2].tool_results, ("[reduced shell]", "[reduced log]", "[n]"), strict=True
    ):
        r.text = text
    new[1].tool_uses[2].input = {**new[1].tool_uses[2].input, "diff": "@@…"}
    out = doc.emit(new)
    assert json.dumps(wire) == before  # the client's objects are never changed
    assert all(out[i] is wire[i] for i in (0, 1, 2, 7))
    # Every chunk stays, with its outcome; the text goes in the first stdout.
    assert out[4] == {
        **wire[4],
        "output": [
            {"stdout": "[reduced shell]", "stderr": "", "outcome": _exit(0)},
            {"stdout": "", "stderr": "", "outcome": _exit(2)},
        ],
    }
    assert out[5] == {**wire[5], "output": "[reduced log]"}
    assert out[6] == {**wire[6], "output": "[n]"}
    assert out[3]["operation"] == {"type": "update_file", "path": "a.py", "diff": "@@…"}


def test_an_apply_patch_output_without_text_gets_one_when_changed() -> None:
    wire = [{"type": "apply_patch_call_output", "call_id": "p", "status": "completed"}]
    doc = responses.parse(wire)
    assert doc.messages[0].tool_results[0].text == ""
    new = [m.copy() for m in doc.messages]
    new[0].tool_results[0].text = "note"
    assert doc.emit(new)[0] == {**wire[0], "output": "note"}


def _local(output: Any) -> list[dict[str, Any]]:
    return [{"type": "local_shell_call_output", "id": "l", "output": output}]


def _codex(text: str, code: int = 0) -> str:
    """A local shell output as codex sends it: a JSON object string with its metadata."""
    return json.dumps({"output": text, "metadata": {"exit_code": code, "duration_seconds": 0.5}})


@pytest.mark.parametrize(
    ("output", "text", "is_error"),
    [
        (_codex("a\nb"), "a\nb", False),
        (_codex("boom", 2), "boom", True),  # the exit code in `metadata`
        (json.dumps({"stdout": "out", "stderr": "err", "exit_code": 1}), "out\nerr", True),
        (json.dumps({"stdout": "", "stderr": "err"}), "err", False),
        ('{"result": "x"}', '{"result": "x"}', False),  # no text field: read as plain text
        ('["a"]', '["a"]', False),
        ("plain text {", "plain text {", False),
    ],
)
def test_a_local_shell_json_output_is_read_from_its_text_fields(
    output: str, text: str, is_error: bool
) -> None:
    result = responses.parse(_local(output)).messages[0].tool_results[0]
    assert (result.text, result.is_error) == (text, is_error)


def test_a_local_shell_json_output_is_written_back_as_json_with_its_keys() -> None:
    wire = _local(_codex("line\n" * 50, 1)) + _local(
        json.dumps({"stdout": "o", "stderr": "e", "exit_code": 0, "extra": [1, None]})
    )
    before = json.dumps(wire)
    doc = responses.parse(wire)
    assert doc.emit(doc.messages) == wire
    new = [m.copy() for m in doc.messages]
    new[0].tool_results[0].text = "line\n…[48 lines]"
    new[0].tool_results[1].text = "o…"
    out = doc.emit(new)
    assert json.dumps(wire) == before
    compact = '{"output":"line\\n…[48 lines]","metadata":{"exit_code":1,"duration_seconds":0.5}}'
    assert out[0] == {**wire[0], "output": compact}
    # The text goes in the first text field, the other one is emptied, as for shell chunks.
    assert json.loads(out[1]["output"]) == {
        "stdout": "o…",
        "stderr": "",
        "exit_code": 0,
        "extra": [1, None],
    }
    again = responses.parse(out).messages[0].tool_results
    assert [(r.text, r.is_error) for r in again] == [("line\n…[48 lines]", True), ("o…", False)]


def test_a_plain_text_local_shell_output_is_written_back_as_plain_text() -> None:
    wire = _local('{"result": "x"}') + _local("plain")
    doc = responses.parse(wire)
    new = [m.copy() for m in doc.messages]
    new[0].tool_results[0].text = "short"
    new[0].tool_results[1].text = "p"
    assert [item["output"] for item in doc.emit(new)] == ["short", "p"]
