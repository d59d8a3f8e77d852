"""Claude Code jsonl adapter: spec §1.2 entry rules, merges, and byte-identical write-back."""

from __future__ import annotations

import json
from typing import Any

from factrail.core.formats import claude_jsonl


def line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def assistant(msg_id: str | None, *blocks: dict[str, Any], **extra: Any) -> str:
    return line(
        {
            "type": "assistant",
            "message": {"id": msg_id, "role": "assistant", "content": list(blocks)},
            **extra,
        }
    )


def user(content: Any, **extra: Any) -> str:
    return line({"type": "user", "message": {"role": "user", "content": content}, **extra})


def use(i: str, name: str = "Bash", **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": i, "name": name, "input": inp}


def result(i: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": i, "content": content, **extra}


SESSION = (
    "\n".join(
        [
            line({"type": "summary", "summary": "s"}),
            user("run the tests"),
            assistant(
                "m1",
                {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
                {"type": "text", "text": "Running."},
            ),
            assistant("m1", use("t1", command="pytest")),
            assistant("m1", use("t2", "Read", file_path="a.py")),
            "garbage line",
            user([result("t1", "1 failed", is_error=True)], toolUseResult={"stdout": "1 failed"}),
            user([result("t2", [{"type": "text", "text": "print()"}])]),
            user("side", isSidechain=True),
            user("<reminder>", isMeta=True),
            user([]),
            assistant("m2", {"type": "text", "text": "Fixed."}),
        ]
    )
    + "\n"
)


def test_entries_merge_and_skip_per_spec() -> None:
    doc = claude_jsonl.parse(SESSION)
    assert doc.format == "claude-jsonl"
    assert [(m.role, m.text) for m in doc.messages] == [
        ("user", "run the tests"),
        ("assistant", "Running."),
        ("user", ""),
        ("assistant", "Fixed."),
    ]
    uses = doc.messages[1].tool_uses
    assert [(u.tool_use_id, u.tool, u.input) for u in uses] == [
        ("t1", "Bash", {"command": "pytest"}),
        ("t2", "Read", {"file_path": "a.py"}),
    ]
    assert uses[0].is_error and uses[0].text == "1 failed"
    assert [(r.tool_use_id, r.text, r.is_error) for r in doc.messages[2].tool_results] == [
        ("t1", "1 failed", True),
        ("t2", "print()", False),
    ]


def test_results_with_text_do_not_merge() -> None:
    text = "\n".join(
        [
            user([result("a", "1")]),
            user([result("b", "2"), {"type": "text", "text": "and a note"}]),
            user([result("c", "3")]),
        ]
    )
    doc = claude_jsonl.parse(text)
    assert [(m.text, len(m.tool_results)) for m in doc.messages] == [
        ("", 1),
        ("and a note", 1),
        ("", 1),
    ]


def test_same_id_after_a_user_entry_is_a_new_message() -> None:
    text = "\n".join(
        [
            assistant("m", {"type": "text", "text": "a"}),
            user("x"),
            assistant("m", {"type": "text", "text": "b"}),
            assistant(None, {"type": "text", "text": "c"}),
            assistant(None, {"type": "text", "text": "d"}),
        ]
    )
    assert [m.text for m in claude_jsonl.parse(text).messages] == ["a", "x", "b", "c", "d"]


def test_emit_rewrites_only_changed_lines() -> None:
    doc = claude_jsonl.parse(SESSION)
    assert doc.emit(doc.messages) == SESSION
    new = [m.copy() for m in doc.messages]
    new[2].tool_results[1].text = "cut"
    new[1].tool_uses[0].input = {"command": "pytest -q"}
    out = doc.emit(new)
    old_lines, new_lines = SESSION.split("\n"), out.split("\n")
    assert [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b] == [
        3,
        7,
    ]
    assert json.loads(new_lines[7])["message"]["content"][0]["content"] == [
        {"type": "text", "text": "cut"}
    ]
    assert json.loads(new_lines[3])["message"]["content"][0]["input"] == {"command": "pytest -q"}


def test_lines_iterable_and_crlf_are_kept() -> None:
    lines = [user("hi") + "\r\n", user([result("a", "x")]) + "\r\n"]
    doc = claude_jsonl.parse(iter(lines))
    assert doc.emit(doc.messages) == "".join(lines)
    new = [m.copy() for m in doc.messages]
    new[1].tool_results[0].text = "y"
    out = doc.emit(new)
    assert out.split("\n")[1].endswith("\r")
    assert claude_jsonl.parse(out).messages[1].tool_results[0].text == "y"
