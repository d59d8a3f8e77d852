"""Re-run notes keep the files a search named and the ids a read held; edited reads observe."""

from __future__ import annotations

from pathlib import Path

from factrail.core.classify import (
    _norm,
    _same_file,
    edited_paths,
    read_paths,
    reproducible,
    rerunnable_ids,
    search_paths,
)
from factrail.core.model import Message, ToolResult, ToolUse
from factrail.core.rails import rerun_note
from factrail.core.readnotes import (
    ID_LINE_CHARS,
    files_line,
    id_lines,
    ids_line,
    read_extras,
    read_ids,
)
from factrail.eval.corpora import load_corpus_dir


def test_search_paths_from_grep_and_listing_outputs() -> None:
    grep = "/repo/src/main.rs:8: the value\n/repo/src/lib.rs:15: cache\n/repo/src/main.rs:22: x"
    assert search_paths(grep) == ["/repo/src/main.rs", "/repo/src/lib.rs"]
    assert search_paths("src/a.py\nsrc/b/c.ts\nREADME.md") == [
        "src/a.py",
        "src/b/c.ts",
        "README.md",
    ]
    assert search_paths(r"C:\Users\dev\app\main.py") == [r"C:\Users\dev\app\main.py"]
    assert search_paths("fn main() {\n    let x = 1;\n}") == []
    assert search_paths("") == []


def test_files_line_keeps_whole_paths_within_an_eighth() -> None:
    grep = "\n".join(f"/repo/src/mod_{i}.rs:{i}: hit" for i in range(400))
    line = files_line(grep)
    assert line.startswith("files: /repo/src/mod_0.rs, /repo/src/mod_1.rs")
    assert line.endswith("more)")
    assert len(line) <= len(grep) // 8 + 20


def test_ids_are_digit_bearing_tokens_with_a_letter_or_long() -> None:
    text = "build id bld-20251130a7 set; see 9f3c2ab1e4d0 and line 12345 or 20251130\nversion."
    assert read_ids(text) == ["bld-20251130a7", "9f3c2ab1e4d0", "20251130"]
    assert ids_line(text).startswith("ids: bld-20251130a7, 9f3c2ab1e4d0")
    assert ids_line("plain words only, nothing else here") == ""


def test_rerun_note_carries_the_extras_and_stays_shorter() -> None:
    body = "\n".join(f"    line {i}: config value" for i in range(60)) + "\nbuild bld-77aa01\n"
    note = rerun_note(body, "u1")
    first, *rest = note.split("\n")
    assert first.startswith("[factrail omitted ")
    assert rest == read_extras(body) == ["build bld-77aa01"]
    assert len(note) < len(body)


def test_ids_on_short_lines_keep_their_lines_as_they_were() -> None:
    """The line names the id (a constant, a column): the agent quotes both."""
    code = "fn main() {\n" * 80 + '    const BUILD_ID: &str = "bld-90203555";\n' + "}\n" * 80
    assert id_lines(code) == ['    const BUILD_ID: &str = "bld-90203555";']
    assert read_extras(code) == id_lines(code)
    assert rerun_note(code, "u1").split("\n")[1:] == id_lines(code)


def test_ids_on_long_lines_or_too_many_lines_are_listed() -> None:
    long_line = "x = " + "word " * ID_LINE_CHARS + "bld-90203555\n"
    body = "filler line\n" * 100 + long_line
    assert id_lines(body) == []
    assert read_extras(body) == ["ids: bld-90203555"]
    many = "".join(f"row {i}: order ord-{i:08d} shipped\n" for i in range(200))
    assert id_lines(many) == []  # 200 lines would not fit the ids' room
    assert read_extras(many)[0].startswith("ids: ord-00000000, ord-00000001")


def test_edited_paths_of_editors_patches_and_shell_writes() -> None:
    assert edited_paths("Edit", {"file_path": "/repo/a.py"}) == ["/repo/a.py"]
    patch = "*** Begin Patch\n*** Update File: src/x.rs\n@@\n-a\n+b\n*** End Patch"
    assert edited_paths("apply_patch", {"input": patch}) == ["src/x.rs"]
    assert edited_paths("Bash", {"command": "sed -i 's/a/b/' src/y.py"}) == ["src/y.py"]
    assert edited_paths("Bash", {"command": "echo hi > out.txt 2>&1"}) == ["out.txt"]
    assert edited_paths("Bash", {"command": "cat a.txt 2>/dev/null"}) == []
    assert edited_paths("str_replace_editor", {"command": "view", "path": "/a.py"}) == []
    # The lower-case editors of Claude's managed agents and opencode.
    assert edited_paths("write", {"file_path": "/w/c.py", "content": "X = 1"}) == ["/w/c.py"]
    assert edited_paths("edit", {"file_path": "/w/c.py", "old_string": "1"}) == ["/w/c.py"]


def _call(i: str, tool: str, inp: dict[str, str], out: str) -> list[Message]:
    return [
        Message("assistant", "", [ToolUse(i, tool, inp)]),
        Message("user", "", tool_results=[ToolResult(i, out)]),
    ]


def test_a_read_edited_later_is_no_longer_rerunnable() -> None:
    messages = [
        Message("user", "fix it"),
        *_call("r1", "Read", {"file_path": "/repo/src/a.py"}, "x = 1\n" * 100),
        *_call("r2", "Read", {"file_path": "/repo/src/b.py"}, "y = 2\n" * 100),
        *_call("g1", "Grep", {"pattern": "x"}, "/repo/src/a.py:1: x = 1\n" * 3),
        *_call("e1", "Edit", {"file_path": "src/a.py", "old_string": "x", "new_string": "z"}, "ok"),
        *_call("r3", "Read", {"file_path": "/repo/src/a.py"}, "z = 1\n" * 100),
    ]
    assert rerunnable_ids(messages) == {"r2", "r3"}


def test_reads_of_every_agent_family_are_recognised() -> None:
    from factrail.core.classify import reproducible

    assert reproducible("exec_command", {"cmd": ["bash", "-lc", "sed -n 1,200p src/app.ts"]})
    assert reproducible("shell_command", {"command": 'bash -lc "cat src/a.ts | head -50"'})
    assert reproducible("run_shell_command", {"command": "rg -n TODO src"})
    assert reproducible("str_replace_editor", {"command": "view", "path": "/testbed/a.py"})
    assert not reproducible("str_replace_editor", {"command": "str_replace", "path": "/a.py"})
    assert reproducible("bash", {"command": 'find_file "ReflectUtils.java"'})
    assert not reproducible("shell_command", {"command": 'bash -lc "npm test"'})
    assert not reproducible("exec_command", {"cmd": ["bash", "-lc", "cat a > b"]})


def _rerunnable_by_definition(messages: list[Message]) -> set[str]:
    """`rerunnable_ids` read literally: every read's named files, its output's included,
    against every later edit."""
    edits: list[tuple[str, int]] = []
    reads: list[tuple[int, ToolUse]] = []
    for i, m in enumerate(messages):
        for u in m.tool_uses:
            edits.extend((p, i) for p in edited_paths(u.tool, u.input))
            if reproducible(u.tool, u.input):
                reads.append((i, u))
    outputs = {r.tool_use_id: r.text for m in messages for r in m.tool_results}
    out: set[str] = set()
    for i, u in reads:
        named = read_paths(u.tool, u.input)
        named += [_norm(p) for p in search_paths(outputs.get(u.tool_use_id, ""))]
        if not any(j > i and _same_file(p, q) for p in named for q, j in edits):
            out.add(u.tool_use_id)
    return out


def test_rerunnable_ids_match_their_definition_on_real_sessions(corpus_dir: Path) -> None:
    """Only an output naming a later-edited file's name is searched for paths: the same reads
    stay reproducible as when every output is searched."""
    for _, messages in load_corpus_dir(corpus_dir):
        assert rerunnable_ids(messages) == _rerunnable_by_definition(list(messages))


def test_a_listing_naming_a_later_edited_file_observes() -> None:
    listing = "src/app/main.py\nsrc/app/util.py\nREADME.md\n"
    messages = [
        Message("assistant", "", [ToolUse("r1", "Bash", {"command": "find src -name '*.py'"})]),
        Message("user", "", tool_results=[ToolResult("r1", listing)]),
        Message("assistant", "", [ToolUse("r2", "Bash", {"command": "ls docs"})]),
        Message("user", "", tool_results=[ToolResult("r2", "a.md\nb.md\n")]),
        Message("assistant", "", [ToolUse("e", "Edit", {"file_path": "/repo/src/app/util.py"})]),
        Message("user", "", tool_results=[ToolResult("e", "ok")]),
    ]
    assert rerunnable_ids(messages) == _rerunnable_by_definition(messages) == {"r2"}
