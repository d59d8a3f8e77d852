"""Call classification: a reproducible read (re-run it to see it again) or an observation.

A reproducible read is a file read, search or listing whose output the agent can get back by
running the same call again. Everything else (tests, curls, logs, metadata, writes) is an
observation of one moment and keeps its fact lines when reduced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from factrail.core.text import compact_json

_MUTABLE_SOURCE = re.compile(
    r"\.(?:log|jsonl|out|err)\b|[\\/]logs?[\\/]|\bjournalctl\b|\b(?:docker|kubectl)\s+logs\b"
    r"|-Tail\b|-Wait\b|\btail\s+-[a-zA-Z]*[fF]",
    re.IGNORECASE,
)
READ_TOOLS = frozenset(
    {
        "Read", "Grep", "Glob", "LS", "NotebookRead", "ToolSearch", "read_file", "search_files",
        "list_files", "list_directory", "grep", "glob",
    }
)  # fmt: skip
SHELL_TOOLS = frozenset({"Bash", "PowerShell", "terminal", "shell", "bash", "exec_command"})
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
        "out-string",
    }
)  # fmt: skip
_READ_FAILED = re.compile(
    r"\b(?:errno|os error|timed? ?out|timeout|permission denied|access is denied|no such file"
    r"|cannot find|not found|running in background|background with id|exit code [1-9]|killed)\b",
    re.IGNORECASE,
)


def _command(input: Mapping[str, Any]) -> str:
    raw = input.get("command")
    if raw is None:
        raw = input.get("cmd")
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        return " ".join(x for x in raw if isinstance(x, str))
    return ""


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


def reproducible(tool: str, input: Mapping[str, Any]) -> bool:
    """Whether re-running this call gives back the same output (a read, not an observation)."""
    if _MUTABLE_SOURCE.search(compact_json(input)):
        return False
    if tool in READ_TOOLS:
        return True
    if tool not in SHELL_TOOLS:
        return False
    command = _command(input)
    if not command:
        return False
    quiet = _REDIRECT_NOISE.sub("", command)
    if _writes_file(quiet) or _PIPE_TO_SHELL.search(quiet):
        return False
    return all(_segment_reads(seg) for seg in _SEGMENT_SPLIT.split(command))


def read_is_observation(text: str) -> bool:
    """A read whose output reports a failure or a timeout is an observation after all."""
    return _READ_FAILED.search(text) is not None
