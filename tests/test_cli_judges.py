"""`factrail compact --judge ...`: Tev is asked with its own prompt; the rules send nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from factrail.cli import main
from factrail.core.tev import SYSTEM

TEV = "http://tev.invalid/v1"
TRIGGER = 1500


def write_transcript(path: Path, calls: int = 10) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find the slow query."},
    ]
    for i in range(calls):
        cid = f"call_{i}"
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {i}.",
                "tool_calls": [{"id": cid, "type": "function", "function": {
                    "name": "Bash", "arguments": json.dumps({"command": f"psql -f q{i}.sql"})}}],
            }
        )  # fmt: skip
        rows = "\n".join(f"row {i}.{j} | cost {i * 37 + j} | seq scan" for j in range(35))
        messages.append({"role": "tool", "tool_call_id": cid, "content": rows})
    messages.append({"role": "user", "content": "Which one is slow?"})
    path.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    return messages


def letter(request: httpx.Request) -> httpx.Response:
    """B (reduce) for questions about full outputs, A (keep) for the calls themselves."""
    question = json.loads(request.content)["messages"][-1]["content"]
    answer = "B" if "The full output" in question else "A"
    return httpx.Response(200, json={"choices": [{"message": {"content": answer}}]})


def test_compact_with_tev_sends_the_tev_prompt(
    respx_mock: respx.MockRouter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    route = respx_mock.post(f"{TEV}/chat/completions").mock(side_effect=letter)
    src, out = tmp_path / "t.json", tmp_path / "out.json"
    original = write_transcript(src)
    argv = ["compact", str(src), "--out", str(out), "--trigger-tokens", str(TRIGGER),
            "--judge", "tev", "--judge-url", TEV, "--deadline-ms", "5000"]  # fmt: skip
    assert main(argv) == 0
    assert route.call_count > 0
    for call in route.calls:
        body = json.loads(call.request.content)
        assert body["messages"][0] == {"role": "system", "content": SYSTEM}
        assert body["logprobs"] is True
        assert "authorization" not in call.request.headers
    assert "judge tev (ok)" in capsys.readouterr().out
    written = json.loads(out.read_text(encoding="utf-8"))["messages"]
    assert len(written) == len(original) and written != original


def test_compact_with_the_rules_sends_nothing(
    respx_mock: respx.MockRouter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    anything = respx_mock.route().mock(return_value=httpx.Response(500))
    src, out = tmp_path / "t.json", tmp_path / "out.json"
    original = write_transcript(src)
    argv = ["compact", str(src), "--out", str(out), "--trigger-tokens", str(TRIGGER),
            "--judge", "rules", "--judge-url", TEV]  # fmt: skip
    assert main(argv) == 0
    assert not anything.called
    assert "judge rules (rules)" in capsys.readouterr().out
    written = json.loads(out.read_text(encoding="utf-8"))["messages"]
    assert len(written) == len(original) and written != original
