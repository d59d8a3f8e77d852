"""Call classification: a reproducible read (re-run it to see it again) or an observation.

A reproducible read is a file read, search or listing whose output the agent can get back by
running the same call again. Everything else (tests, curls, logs, metadata, writes) is an
observation of one moment and keeps its fact lines when reduced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from factrail.core.model import Message, ToolUse, input_json, result_texts
from factrail.core.text import compact_json

_MUTABLE_SOURCE = re.compile(
    r"\.(?:log|jsonl|out|err)\b|[\\/]logs?[\\/]|\bjournalctl\b|\b(?:docker|kubectl)\s+logs\b"
    r"|-Tail\b|-Wait\b|\btail\s+-[a-zA-Z]*[fF]",
    re.IGNORECASE,
)
READ_TOOLS = frozenset(
    {
        "Read", "Grep", "Glob", "LS", "NotebookRead", "ToolSearch", "read_file", "search_files",
        "list_files", "list_directory", "grep", "glob", "read", "view", "view_file", "list_dir",
        "read_many_files", "grep_search", "file_search", "find_file", "search_dir",
        "search_file",
    }
)  # fmt: skip
"""Read tools of Claude Code, Codex, Gemini CLI, Cline/Roo and SWE-agent."""
SHELL_TOOLS = frozenset(
    {
        "Bash", "PowerShell", "terminal", "shell", "bash", "exec_command", "shell_command",
        "run_shell_command", "local_shell", "execute_command", "run_command",
    }
)  # fmt: skip
CODE_TOOLS = frozenset({"exec"})
"""Codex's code mode (GPT-6): one custom tool whose input is JavaScript that calls the others as
`await tools.exec_command({cmd: ...})`, `tools.apply_patch(...)`, …"""
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool"})
"""Editors whose `view` command is a read and whose other commands edit."""
_REDIRECT_NOISE = re.compile(r"2>&1|2>/dev/null|2>\$null|>\s*/dev/null|>\s*\$null")
_PIPE_TO_SHELL = re.compile(r"\btee\b|\|\s*(?:sh|bash|pwsh|iex)\b")
_SEGMENT_SPLIT = re.compile(r"\r?\n|;|&&|\|\||\|")
_ENV_PREFIX = re.compile(r"^(?:\w+=\S*\s+)+")
_TIMEOUT_PREFIX = re.compile(r"^timeout\s+\S+\s+")
_COMMAND_PREFIX = re.compile(r"^command\s+")
_GIT_READ = re.compile(
    r"^git\s+(?:log|show|diff|status|blame|ls-files|rev-parse|branch|remote|describe)\b"
)
_SED_IN_PLACE = re.compile(r"^sed\s+(?:-\w*i|--in-place)")
_LONG_LISTING = re.compile(r"^ls\s+(?:\S+\s+)*-[a-zA-Z]*l")
METADATA_VERBS = frozenset(
    {"wc", "stat", "du", "df", "dir", "get-childitem", "gci", "measure-object"}
)
READ_VERBS = frozenset(
    {
        "cd", "echo", "printf", "true", "ls", "dir", "cat", "type", "head", "tail", "wc", "find",
        "fd", "rg", "grep", "egrep", "sha256sum", "sha1sum", "md5sum", "stat", "file", "tree",
        "cut", "tr", "sort", "uniq", "sed", "awk", "jq", "basename", "dirname", "realpath", "es",
        "es.exe", "get-content", "get-childitem", "select-string", "select-object",
        "measure-object", "get-filehash", "test-path", "resolve-path", "format-table",
        "out-string", "nl", "less", "more", "open", "find_file", "search_dir", "search_file",
        "git-grep", "ag", "ack",
    }
)  # fmt: skip
_READ_FAILED = re.compile(
    r"\b(?:errno|os error|timed? ?out|timeout|permission denied|access is denied|no such file"
    r"|cannot find|not found|running in background|background with id|exit code [1-9]|killed)\b",
    re.IGNORECASE,
)


_SHELL_WRAPPER = re.compile(r"^\s*(?:\S*/)?(?:ba|z|da)?sh\s+-l?c\s+(['\"])(.*)\1\s*$", re.DOTALL)
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})


def _command(input: Mapping[str, Any]) -> str:
    """The shell command of a call, unwrapped from `bash -lc '…'` (as Codex sends it); the
    `commands` of a Responses `shell_call` one per line."""
    raw = input.get("command")
    if raw is None:
        raw = input.get("cmd")
    if raw is None and isinstance(input.get("commands"), list):
        return "\n".join(c for c in input["commands"] if isinstance(c, str))
    if isinstance(raw, list):
        parts = [x for x in raw if isinstance(x, str)]
        if len(parts) == 3 and parts[0].rsplit("/", 1)[-1] in _SHELLS and parts[1] in ("-c", "-lc"):
            return parts[2]
        return " ".join(parts)
    if isinstance(raw, str):
        wrapped = _SHELL_WRAPPER.match(raw)
        return wrapped.group(2) if wrapped else raw
    return ""


_CODE_CALL = re.compile(r"\btools\s*(?:\.\s*([A-Za-z_$][\w$]*)|\[)")
_CODE_COMMAND = re.compile(
    r"\btools\s*\.\s*exec_command\s*\(\s*(?:\{[^{}]*?\bcmd[\"']?\s*:\s*)?"
    r"(\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|`[^`\\$]*`)"
)
_CODE_STATE = re.compile(r"\b(?:store|load|notify|setTimeout|yield_control)\s*\(")


def _js_string(literal: str) -> str | None:
    """The value of a JavaScript string literal without substitutions (None: not one)."""
    quote, inner = literal[0], literal[1:-1]
    if quote == "`":
        return inner
    if quote == "'":
        inner = inner.replace('\\"', '"').replace("\\'", "'").replace('"', '\\"')
    try:
        value = json.loads(f'"{inner}"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def code_commands(input: Mapping[str, Any], *, only: bool = True) -> list[str] | None:
    """The shell commands a code-mode call runs through `tools.exec_command`, each given as a
    string literal. `only`: None unless those are all it does (no other tool, no state kept
    between calls, no command built at run time), so that re-running the same source runs
    the same commands."""
    source = input.get("input")
    if not isinstance(source, str):
        return None
    found = [_js_string(m.group(1)) for m in _CODE_COMMAND.finditer(source)]
    commands = [c for c in found if c is not None]
    if not only:
        return commands
    names = [m.group(1) for m in _CODE_CALL.finditer(source)]
    if not names or any(n != "exec_command" for n in names) or _CODE_STATE.search(source):
        return None
    return commands if len(commands) == len(names) else None


def _writes_file(command: str) -> bool:
    """A `>` that is not a stream duplication (`2>x`, `>&2`, `&>f` do not count)."""
    for i, c in enumerate(command):
        if c != ">":
            continue
        prev_ok = i == 0 or command[i - 1] not in ">2&"
        next_ok = i + 1 >= len(command) or command[i + 1] != "&"
        if prev_ok and next_ok:
            return True
    return False


def _segment_reads(segment: str) -> bool:
    s = segment.strip()
    s = _ENV_PREFIX.sub("", s, count=1)
    s = _TIMEOUT_PREFIX.sub("", s, count=1)
    s = _COMMAND_PREFIX.sub("", s, count=1)
    if not s or _GIT_READ.match(s):
        return True
    if _SED_IN_PLACE.match(s):
        return False
    verb = s.split(None, 1)[0].strip("\"'").lower()
    if verb in METADATA_VERBS or _LONG_LISTING.match(s):
        return False
    return verb in READ_VERBS


def reproducible(tool: str, input: Mapping[str, Any], *, as_json: str | None = None) -> bool:
    """Whether re-running this call gives back the same output (a read, not an observation);
    `as_json`: `compact_json(input)`, when the caller has it."""
    if tool in EDITOR_TOOLS and tool not in READ_TOOLS and input.get("command") != "view":
        return False
    if tool in CODE_TOOLS:
        commands = code_commands(input) or []
        return bool(commands) and all(reproducible("exec_command", {"cmd": c}) for c in commands)
    if tool not in READ_TOOLS and tool not in EDITOR_TOOLS and tool not in SHELL_TOOLS:
        return False  # before the input is searched: a write's input may be a whole file
    if _MUTABLE_SOURCE.search(compact_json(input) if as_json is None else as_json):
        return False
    if tool in READ_TOOLS or tool in EDITOR_TOOLS:
        return True
    command = _command(input)
    if not command:
        return False
    quiet = _REDIRECT_NOISE.sub("", command)
    if _writes_file(quiet) or _PIPE_TO_SHELL.search(quiet):
        return False
    return all(_segment_reads(seg) for seg in _SEGMENT_SPLIT.split(command))


_READ_FAILED_NEEDLES = ("errno", "os error", "time", "denied", "no such file", "cannot find",
                        "not found", "background", "exit code", "killed")  # fmt: skip
"""Every match of `_READ_FAILED` holds one of these, in ASCII lower case."""


def read_is_observation(text: str) -> bool:
    """A read whose output reports a failure or a timeout is an observation after all."""
    if text.isascii():  # else case folding may match beyond ASCII: the regex decides alone
        low = text.lower()
        if not any(n in low for n in _READ_FAILED_NEEDLES):
            return False
    return _READ_FAILED.search(text) is not None


EDIT_TOOLS = frozenset(
    {
        "Edit", "MultiEdit", "Write", "NotebookEdit", "write_file", "edit_file", "replace",
        "create_file", "str_replace_editor", "str_replace_based_edit_tool", "apply_patch",
        "write_to_file", "replace_in_file", "insert_edit_into_file", "write", "edit",
    }
)  # fmt: skip
_PATH_KEYS = ("file_path", "path", "notebook_path", "target_file", "filename", "file", "TargetFile")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.MULTILINE)
_SHELL_WRITE = re.compile(
    r"(?:^|[;&|]\s*)sed\s+(?:-\w*i\S*|--in-place)\s.*?(\S+)\s*$"
    r"|(?<![>2&])>>?\s*(['\"]?)([^\s;&|'\"]+)\2"
    r"|\btee\s+(?:-a\s+)?([^\s;&|]+)",
    re.MULTILINE,
)
_PATH_TOKEN = re.compile(r"(?:[A-Za-z]:)?[\w.~-]*[\\/][\w.@~/\\-]+|[\w@-]+\.[A-Za-z0-9]{1,8}\b")


def _norm(path: str) -> str:
    path = path.strip().strip("\"'").replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.rstrip("/")


def edited_paths(tool: str, input: Mapping[str, Any]) -> list[str]:
    """Files this call changes: editor tools by their path argument, patches, shell writes."""
    out: list[str] = []
    if tool in EDIT_TOOLS:
        if tool in EDITOR_TOOLS and input.get("command") in ("view", None):
            return []
        for key in _PATH_KEYS:
            value = input.get(key)
            if isinstance(value, str) and value:
                out.append(_norm(value))
        for value in input.values():
            if isinstance(value, str) and "*** " in value:
                out.extend(_norm(p) for p in _PATCH_FILE.findall(value))
        return out
    if tool in CODE_TOOLS:
        source = input.get("input")
        out.extend(_norm(p) for p in _PATCH_FILE.findall(source if isinstance(source, str) else ""))
        for command in code_commands(input, only=False) or ():
            out.extend(edited_paths("exec_command", {"cmd": command}))
        return out
    if tool in SHELL_TOOLS:
        command = _command(input)
        out.extend(_norm(p) for p in _PATCH_FILE.findall(command))
        for m in _SHELL_WRITE.finditer(_REDIRECT_NOISE.sub("", command)):
            target = m.group(1) or m.group(3) or m.group(4)
            if target and target not in ("/dev/null", "$null"):
                out.append(_norm(target))
    return out


def read_paths(tool: str, input: Mapping[str, Any]) -> list[str]:
    """Files a read names: its path arguments, or the path-like words of its command."""
    out = [_norm(v) for k in _PATH_KEYS if isinstance(v := input.get(k), str) and v]
    if tool in SHELL_TOOLS:
        out.extend(_norm(p) for p in _PATH_TOKEN.findall(_command(input)))
    if tool in CODE_TOOLS:
        for command in code_commands(input, only=False) or ():
            out.extend(_norm(p) for p in _PATH_TOKEN.findall(command))
    return out


def _same_file(a: str, b: str) -> bool:
    """One path ends the other on a component boundary (`src/a.py` and `/repo/src/a.py`)."""
    if a == b:
        return True
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return bool(short) and long.endswith("/" + short)


def rerunnable_ids(
    messages: Sequence[Message], input_text: Callable[[ToolUse], str] = input_json
) -> set[str]:
    """Calls whose re-run would give back the same output *now* (`input_text`: `input_json`,
    or the caller's memo of it).

    A reproducible read stops being one once a later call in the transcript edits a file it read
    (by its arguments, or, for searches and listings, a file its output names): re-running it
    would show the new content, so its output is an observation of the old one.
    """
    edits: dict[str, list[tuple[str, int]]] = {}
    reads: list[tuple[int, ToolUse]] = []
    for i, m in enumerate(messages):
        for u in m.tool_uses:
            for p in edited_paths(u.tool, u.input):
                edits.setdefault(p.rsplit("/", 1)[-1], []).append((p, i))
            if reproducible(u.tool, u.input, as_json=input_text(u)):
                reads.append((i, u))
    if not edits:
        return {u.tool_use_id for _, u in reads}
    outputs = result_texts(messages)
    last_edit = {name: max(j for _, j in found) for name, found in edits.items()}
    out: set[str] = set()
    for i, u in reads:
        # Only a file edited after the read can make it stale, and a file its output names has
        # that file's name in the output: without one, the output need not be searched.
        later = [name for name, j in last_edit.items() if j > i]
        output = outputs.get(u.tool_use_id, "")
        named = read_paths(u.tool, u.input)
        if later and any(name in output for name in later):
            named += [_norm(p) for p in search_paths(output)]
        if not any(
            j > i and _same_file(p, q)
            for p in named
            for q, j in edits.get(p.rsplit("/", 1)[-1], ())
        ):
            out.add(u.tool_use_id)
    return out


_GREP_LINE = re.compile(r"^((?:[A-Za-z]:)?[^\s:]*[\w.-]+\.\w{1,8}|[^\s:]+/[^\s:]+)[:-]\d+[:-]")
_BARE_PATH = re.compile(r"^(?:[A-Za-z]:)?\.{0,2}[\\/]?(?:[\w.@+-]+[\\/])*[\w.@+-]+[\\/]?$")


def search_paths(text: str, limit: int = 2000) -> list[str]:
    """The distinct files a search or listing output names, in order; [] if it is not one.

    An output counts as a listing when most of its non-empty lines are `path:line:` matches or
    bare paths, as grep, rg, find, fd, Glob and LS print them.
    """
    found: dict[str, None] = {}
    lines = 0
    hits = 0
    rows = [line for raw in text[: limit * 200].split("\n") if (line := raw.strip())]
    misses_allowed = len(rows) * 2 // 5  # one more and hits * 5 < lines * 3 whatever follows
    for line in rows:
        if lines - hits > misses_allowed:
            return []
        lines += 1
        m = _GREP_LINE.match(line)
        if m:
            found.setdefault(m.group(1))
            hits += 1
        elif ("/" in line or "\\" in line or "." in line) and _BARE_PATH.match(line):
            found.setdefault(line.rstrip("/\\"))
            hits += 1
    if lines == 0 or hits * 5 < lines * 3:
        return []
    return list(found)[:limit]


VERBATIM_TOOLS = frozenset({"Skill", "Task", "Agent"})
"""Results that carry instructions or prose the agent cannot re-derive: a skill's text and a
subagent's report."""
_SAVED_OUTPUT = re.compile(
    r"factrail[\\/]+outputs[\\/]|/v1/+factrail/+outputs/|factrail\s+outputs\s+get\b"
)
"""A call that reads a saved output back: by its route, by `factrail outputs get ID` (what the
notes name), or by its file (what older notes named)."""


def is_verbatim(use: ToolUse, names: AbstractSet[str]) -> bool:
    """Whether the rails never touch this call's result (`names`: `VERBATIM_TOOLS` and the
    deployment's own; see `verbatim_calls`)."""
    return use.tool in names or _SAVED_OUTPUT.search(compact_json(use.input)) is not None


def verbatim_calls(messages: Sequence[Message], extra: Iterable[str] = ()) -> set[str]:
    """Calls whose results the rails never touch: skill loads, subagent reports, the agent's
    own retrieval of a saved output (reducing that would point it at yet another saved copy),
    and the tools named in `extra`."""
    names = VERBATIM_TOOLS.union(extra)
    return {u.tool_use_id for m in messages for u in m.tool_uses if is_verbatim(u, names)}
