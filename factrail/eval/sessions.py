"""A user's own sessions on disk: find them, load one at a time, name them safely.

A path is a file or a folder, searched recursively: `*.jsonl` files are Claude Code sessions
(`~/.claude/projects/<project>/<session>.jsonl`) or Codex CLI rollouts (`rollout-*.jsonl`, or
any JSON-lines file whose lines are a rollout's), `*.json` files an OpenAI chat message list,
`{"messages": [...]}` (any format the shared detector reads). Claude Code's `subagents` folders
are passed over (a subagent's transcript is its own, shorter session). A file named on the
command line with another suffix, or that cannot be read, is reported as skipped with its
reason; so is one with no assistant turn to replay.

Names shown are the file's name, redacted and shortened: never a folder, which often holds a
home directory or a project's name.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factrail.core.formats import claude_jsonl
from factrail.core.formats.detect import parse_any
from factrail.core.model import Message
from factrail.core.redact import redact
from factrail.eval.codex import is_rollout_line, parse_rollout

SUFFIXES = (".json", ".jsonl")
SKIPPED_FOLDERS = frozenset({"subagents"})
NAME_CHARS = 48
JSON_CLIENTS = {
    "openai-chat": "OpenAI chat",
    "anthropic": "Anthropic Messages",
    "responses": "Responses",
    "hook": "hook messages",
}


@dataclass(frozen=True, slots=True)
class Session:
    """One loaded session: its safe name and client, the model it names ('' when unsaid; shown
    only redacted) and its messages."""

    name: str
    client: str
    model: str
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file left out, and why."""

    name: str
    reason: str


def shown_name(path: Path, limit: int = NAME_CHARS) -> str:
    """The file's name, redacted, cut in the middle past `limit` characters."""
    name = redact(path.name).text
    if len(name) <= limit:
        return name
    half = (limit - 1) // 2
    return name[:half] + "…" + name[-(limit - 1 - half) :]


def discover(paths: Sequence[Path]) -> tuple[list[Path], list[Skipped]]:
    """The candidate session files under `paths` (in order, each once) and the named paths
    that cannot be one."""
    found: list[Path] = []
    skipped: list[Skipped] = []
    seen: set[Path] = set()

    def add(p: Path) -> None:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            found.append(p)

    for path in paths:
        if path.is_dir():
            for folder, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIPPED_FOLDERS)
                for n in sorted(names):
                    if n.endswith(SUFFIXES):
                        add(Path(folder) / n)
        elif path.is_file():
            if path.name.endswith(SUFFIXES):
                add(path)
            else:
                skipped.append(Skipped(shown_name(path), "not a .json or .jsonl file"))
        else:
            skipped.append(Skipped(shown_name(path), "no such file or folder"))
    return found, skipped


def newest(paths: Iterable[Path], limit: int) -> list[Path]:
    """The `limit` most recently modified of `paths`, in their given order."""
    items = list(paths)
    if limit <= 0 or len(items) <= limit:
        return items

    def mtime(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:
            return 0.0

    keep = set(sorted(items, key=mtime, reverse=True)[:limit])
    return [p for p in items if p in keep]


def _first_object(text: str) -> Any:
    for line in text.splitlines():
        if line.strip():
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def _claude_model(text: str) -> str:
    for line in text.splitlines():
        if '"model"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if isinstance(message, dict) and isinstance(message.get("model"), str):
            return str(message["model"])
    return ""


def _json_meta(text: str) -> tuple[str, str]:
    """`meta.agent` and the model (`model` or `meta.model`) of a JSON transcript envelope."""
    try:
        value = json.loads(text)
    except ValueError:
        return "", ""
    if not isinstance(value, dict):
        return "", ""
    meta = value["meta"] if isinstance(value.get("meta"), dict) else {}
    agent = meta.get("agent")
    model = value.get("model") or meta.get("model")
    return (agent if isinstance(agent, str) else ""), (model if isinstance(model, str) else "")


def load(path: Path) -> Session:
    """Read one session file (`OSError` or `ValueError` with the reason when it is not one)."""
    text = path.read_text(encoding="utf-8")
    name = shown_name(path)
    if path.name.endswith(".jsonl"):
        if path.name.startswith("rollout-") or is_rollout_line(_first_object(text)):
            rollout = parse_rollout(text)
            return Session(name, "Codex CLI", rollout.model, rollout.messages)
        doc = claude_jsonl.parse(text)
        return Session(name, "Claude Code", _claude_model(text), list(doc.messages))
    loaded = parse_any(text, filename=path.name)
    agent, model = _json_meta(text)
    client = redact(agent).text[:32] if agent else JSON_CLIENTS.get(loaded.format, loaded.format)
    return Session(name, client, model, list(loaded.messages))


def turns(messages: Sequence[Message]) -> int:
    """The requests a replay sends: one before every assistant message past the first two."""
    return sum(1 for i, m in enumerate(messages) if m.role == "assistant" and i >= 2)
