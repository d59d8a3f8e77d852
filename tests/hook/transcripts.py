"""Hook-shaped transcripts for the `factrail hook` tests: a coding session long enough to
compact (file reads, test runs, logs), as the plugin sends it (handles kept, results stripped)."""

from __future__ import annotations

import json
from typing import Any


def _log(step: int) -> str:
    lines = [f"tests/test_mod{step}.py::test_case_{j} PASSED [{j}%]" for j in range(160)]
    lines.insert(
        80, f"FAILED tests/test_mod{step}.py::test_edge - AssertionError: id 7f3a{step:04d}"
    )
    return "\n".join(lines)


def _source(step: int) -> str:
    return "\n".join(
        f"def helper_{step}_{j}(value: int) -> int:\n    return value * {j} + {step}"
        for j in range(120)
    )


def session(
    steps: int = 24,
    *,
    tool: str = "Bash",
    extra: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """`steps` tool calls (alternating a test run and a file read), each answered, then a last
    prompt; `extra` tool uses are added to the first assistant message."""
    msgs: list[dict[str, Any]] = [
        {"role": "user", "text": "Fix the failing edge test in the project.", "toolUses": []}
    ]
    for i in range(steps):
        uid = f"toolu_{i:03d}"
        if i % 2:
            use = {"tool_use_id": uid, "tool": "Read", "input": {"file_path": f"/w/src/m{i}.py"}}
            out = _source(i)
        else:
            use = {"tool_use_id": uid, "tool": tool, "input": {"command": f"pytest -k mod{i}"}}
            out = _log(i)
        uses = [use, *(extra or [])] if i == 0 else [use]
        msgs.append({"role": "assistant", "text": f"Step {i}.", "toolUses": uses})
        results = [{"tool_use_id": u["tool_use_id"], "text": out if u is use else "ok",
                    "isError": False} for u in uses]  # fmt: skip
        msgs.append({"role": "user", "text": "", "toolUses": [], "toolResults": results})
    msgs.append(
        {"role": "assistant", "text": "The edge test fails on id 7f3a0000.", "toolUses": []}
    )
    msgs.append({"role": "user", "text": "Go on.", "toolUses": []})
    for n, m in enumerate(msgs):
        m["handle"] = f"h{n}"
    return msgs


def size(messages: list[dict[str, Any]]) -> int:
    return len(json.dumps(messages))
