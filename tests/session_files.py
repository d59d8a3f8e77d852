"""Small synthetic session files in the three formats `factrail report` reads.

One abstract session (a task, then rounds of a shell call, its long output and a remark that
quotes a fact of an earlier output) written as an OpenAI chat list, a Claude Code session and a
Codex CLI rollout. `secret` is put into every output, so a test can check it never leaks.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Step:
    """One round: the command run, its output and what the agent said after it."""

    command: str
    output: str
    remark: str


def _fact(seed: str, i: int) -> str:
    return "build-" + hashlib.sha256(f"{seed}:{i}".encode()).hexdigest()[:10]


def steps(seed: str, rounds: int = 12, secret: str = "", filler: int = 60) -> list[Step]:
    """`rounds` steps whose outputs hold a fact line among `filler` lines of noise."""
    out: list[Step] = []
    for i in range(rounds):
        noise = [
            f"line {j}: worker {seed} processed record {i * 1000 + j} ok" for j in range(filler)
        ]
        noise.insert(filler // 2, f"FAILED test_{i} id={_fact(seed, i)} token={secret}")
        remark = f"Round {i}: the earlier failure was {_fact(seed, max(i - 3, 0))}."
        out.append(Step(f"make test-{i}", "\n".join(noise), remark))
    return out


def openai_chat(path: Path, rounds: list[Step], *, envelope: bool = False, **meta: Any) -> Path:
    """An OpenAI chat message list (in `{"messages": [...], "meta": meta}` when `envelope`)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing tests."},
    ]
    for i, s in enumerate(rounds):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "shell", "arguments": json.dumps({"command": s.command})},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": s.output})
        messages.append({"role": "assistant", "content": s.remark})
        messages.append({"role": "user", "content": "Go on."})
    value: Any = {"messages": messages, "meta": meta} if envelope else messages
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def claude_code(path: Path, rounds: list[Step], model: str = "claude-sonnet-4-5") -> Path:
    """A Claude Code session file (`~/.claude/projects/<project>/<id>.jsonl`)."""
    lines: list[dict[str, Any]] = []

    def entry(kind: str, message: dict[str, Any]) -> None:
        n = len(lines)
        lines.append(
            {
                "type": kind,
                "sessionId": "s-1",
                "uuid": f"u{n}",
                "parentUuid": f"u{n - 1}" if n else None,
                "message": message,
            }
        )

    entry("user", {"role": "user", "content": "Fix the failing tests."})
    for i, s in enumerate(rounds):
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash",
               "input": {"command": s.command}}  # fmt: skip
        entry("assistant", {"id": f"msg_{i}a", "role": "assistant", "model": model,
                            "content": [use]})  # fmt: skip
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": s.output}
        entry("user", {"role": "user", "content": [result]})
        entry("assistant", {"id": f"msg_{i}b", "role": "assistant", "model": model,
                            "content": [{"type": "text", "text": s.remark}]})  # fmt: skip
        entry("user", {"role": "user", "content": "Go on."})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def codex_rollout(
    path: Path, rounds: list[Step], model: str = "gpt-5-codex", wrapped: bool = True
) -> Path:
    """A Codex CLI rollout (`rollout-*.jsonl`); `wrapped=False`: the early unwrapped layout."""
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "Fix the failing tests."}]},
    ]  # fmt: skip
    for i, s in enumerate(rounds):
        items.append({"type": "reasoning", "summary": [], "encrypted_content": "gAAA" * 200})
        arguments = json.dumps({"command": ["bash", "-lc", s.command]})
        items.append({"type": "function_call", "name": "shell", "call_id": f"call_{i}",
                      "arguments": arguments})  # fmt: skip
        items.append({"type": "function_call_output", "call_id": f"call_{i}", "output": s.output})
        items.append({"type": "message", "role": "assistant",
                      "content": [{"type": "output_text", "text": s.remark}]})  # fmt: skip
        items.append({"type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": "Go on."}]})  # fmt: skip
    if wrapped:
        lines: list[dict[str, Any]] = [
            {"type": "session_meta", "payload": {"id": "r-1", "cwd": "/home/someone/project"}},
            {"type": "turn_context", "payload": {"model": model, "cwd": "/home/someone"}},
        ]
        lines += [{"type": "response_item", "payload": item} for item in items]
        lines.append({"type": "event_msg", "payload": {"type": "token_count", "info": None}})
    else:
        lines = [{"id": "r-1", "timestamp": "2025-05-01T10:00:00Z", "instructions": None}]
        lines += [item for pair in zip(items, [{"record_type": "state"}] * len(items),
                                       strict=True) for item in pair]  # fmt: skip
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path
