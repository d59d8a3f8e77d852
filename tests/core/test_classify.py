"""Reproducible reads vs observations (engine spec §2.1)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factrail.core.classify import (
    _BARE_PATH,
    _GREP_LINE,
    _READ_FAILED,
    code_commands,
    edited_paths,
    read_is_observation,
    read_paths,
    reproducible,
    search_paths,
)


@pytest.mark.parametrize(
    "command",
    [
        "cat src/lib.rs | head -50",
        "git log --oneline -5 && git status",
        "FOO=1 timeout 5 rg foo src 2>/dev/null",
        "cat a 2>&1",
        ["cat", "README.md"],
    ],
)
def test_shell_reads_are_reproducible(command: object) -> None:
    assert reproducible("Bash", {"command": command})


@pytest.mark.parametrize(
    "command",
    [
        "cat out > copy.txt",
        "wc -l f",
        "tail -n 20 server.log",
        "sed -i s/a/b/ f",
        "ls -la dir",
        "cat card; ls -la dir",
        "curl https://example.invalid",
        "echo hi | bash",
        "cat a | tee b",
        "cat a >> b",
        "",
    ],
)
def test_shell_observations(command: str) -> None:
    assert not reproducible("Bash", {"command": command})


def test_the_hosted_shell_tools_are_read_by_their_commands() -> None:
    """A Responses `shell_call` runs its `commands` one after the other; a `local_shell_call`
    runs an argv (both reach the engine as their `action`)."""
    assert reproducible("shell", {"commands": ["cat a.py", "git log -3"], "timeout_ms": 9})
    assert not reproducible("shell", {"commands": ["cat a.py", "rm -rf build"]})
    assert reproducible("local_shell", {"type": "exec", "command": ["bash", "-lc", "cat a"]})
    assert edited_paths("shell", {"commands": ["ls", "echo x > out.txt"]}) == ["out.txt"]
    patch = {"type": "update_file", "path": "./src/a.py", "diff": "@@"}
    assert edited_paths("apply_patch", patch) == ["src/a.py"]


def code(source: str) -> dict[str, str]:
    """A Codex code-mode call's input: JavaScript for the custom `exec` tool."""
    return {"input": source}


def test_code_mode_reads_are_read_by_the_commands_they_run() -> None:
    """On GPT-6 Codex calls its tools from JavaScript. A script that only runs read commands
    given as string literals is a read: re-running the same source gives the same output."""
    one = 'const r = await tools.exec_command({cmd: "cat src/a.py"});\ntext(r.output);'
    assert code_commands(code(one)) == ["cat src/a.py"]
    assert reproducible("exec", code(one))
    two = (
        '// @exec: {"yield_time_ms": 1000}\n'
        "const a = await tools.exec_command({cmd: 'git log -3', yield_time_ms: 500});\n"
        'const b = await tools.exec_command("rg -n handler src");\n'
        "text(a.output + b.output);"
    )
    assert code_commands(code(two)) == ["git log -3", "rg -n handler src"]
    quoted = 'const r = await tools.exec_command({"workdir": "/w", "cmd": "cat \\"a b.py\\""});'
    assert code_commands(code(quoted)) == ['cat "a b.py"']
    assert reproducible("exec", code(two))
    assert read_paths("exec", code(one)) == ["src/a.py"]


@pytest.mark.parametrize(
    "source",
    [
        'await tools.exec_command({cmd: "rm -rf build"});',  # not a read
        'await tools.exec_command({cmd: "cat a"}); await tools.apply_patch("*** Begin Patch");',
        'const f = "a.py"; await tools.exec_command({cmd: `cat ${f}`});',  # built at run time
        'const c = "cat a"; await tools.exec_command({cmd: c});',
        'store("k", 1); await tools.exec_command({cmd: "cat a"});',  # state between calls
        'await tools["exec_command"]({cmd: "cat a"});',
        "text('no tool at all');",
        'await tools.exec_command({cmd: "tail -f var/log/app.log"});',
    ],
)
def test_code_mode_scripts_that_do_more_than_read_are_observations(source: str) -> None:
    assert not reproducible("exec", code(source))


def test_code_mode_edits_name_their_files() -> None:
    patch = "*** Begin Patch\n*** Update File: src/x.py\n@@\n-a\n+b\n*** End Patch"
    source = (
        f'await tools.apply_patch(`{patch}`);\nawait tools.exec_command({{cmd: "echo 1 > o.txt"}});'
    )
    assert edited_paths("exec", code(source)) == ["src/x.py", "o.txt"]


def test_stream_duplication_is_not_a_write() -> None:
    assert reproducible("Bash", {"command": "cat a >&2"})
    assert reproducible("bash", {"cmd": "grep -r x src 2>err.txt"})


def test_read_tools_and_mutable_sources() -> None:
    assert reproducible("Read", {"file_path": "src/app.py"})
    assert not reproducible("Read", {"file_path": "var/logs/server.txt"})
    assert not reproducible("Read", {"file_path": "build.log"})
    assert not reproducible("WebFetch", {"url": "https://example.invalid"})
    assert not reproducible("Edit", {"file_path": "a.py"})
    assert not reproducible("Bash", {"command": "docker logs web"})


def test_read_overridden_by_its_output() -> None:
    assert read_is_observation("cat: x: No such file or directory")
    assert read_is_observation("Command timed out after 120s")
    assert read_is_observation("exit code 2")
    assert not read_is_observation("def main():\n    return 0\n")
    assert not read_is_observation("exit code 0")


_FAILURE_PIECES = st.sampled_from(
    ["ERRNO", "os Error", "timed out", "Time Out", "TIMEOUT", "permission DENIED",
     "access is denied", "No such file", "cannot FIND", "not found", "Running in background",
     "background with id", "exit code 3", "exit code 0", "KILLED", "killedx", "x", "_", " ",
     "\n", "é", "K", "ſ", "1"]
)  # fmt: skip


@given(st.lists(_FAILURE_PIECES, max_size=12).map("".join))
def test_read_failure_prefilter_agrees_with_the_pattern(text: str) -> None:
    assert read_is_observation(text) == (_READ_FAILED.search(text) is not None)


def _search_paths_definition(text: str) -> list[str]:
    """`search_paths` without its early exit."""
    found: dict[str, None] = {}
    lines = hits = 0
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        lines += 1
        m = _GREP_LINE.match(line)
        if m:
            found.setdefault(m.group(1))
            hits += 1
        elif ("/" in line or "\\" in line or "." in line) and _BARE_PATH.match(line):
            found.setdefault(line.rstrip("/\\"))
            hits += 1
    return [] if lines == 0 or hits * 5 < lines * 3 else list(found)


_LISTING_LINES = st.sampled_from(
    ["src/a.py:3:x = 1", "lib/b.rs-10-fn f()", "docs/readme.md", "./tests/", "C:\\w\\x.txt",
     "just some words", "", "   ", "error: boom", "a.b", "x/y:12:z"]
)  # fmt: skip


@given(st.lists(_LISTING_LINES, max_size=30).map("\n".join))
def test_search_paths_stops_early_only_when_the_answer_is_settled(text: str) -> None:
    assert search_paths(text) == _search_paths_definition(text)
