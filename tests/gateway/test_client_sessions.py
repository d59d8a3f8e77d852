"""Two Claude Code runs with the same prompt are two sessions, through the app and the real
engine: each is compacted and keeps its own plan."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import respx
from fastapi.testclient import TestClient

from factrail.gateway.factory import create_app, default_engine
from factrail.settings import Settings
from factrail.stores.memory_state import MemoryStateStore
from tests.gateway.support import UPSTREAM

ANTHROPIC = "http://anthropic.test"
SYSTEM = [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]


def transcript(run: str, steps: int) -> list[dict[str, Any]]:
    """A run's transcript: the same prompt and commands, the run's own tool ids."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find out why the build fails."}]
    for i in range(steps):
        output = [f"tests/test_mod{i}.py::test_case_{j} PASSED [{j}%]" for j in range(40)]
        output.insert(20, f"ERROR: assertion failed in module {i}: expected 4{i}1")
        tool_id = f"toolu_{run}{i}"
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Running step {i}."},
            {"type": "tool_use", "id": tool_id, "name": "Bash",
             "input": {"command": f"pytest tests/test_mod{i}.py -x"}},
        ]})  # fmt: skip
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tool_id, "content": "\n".join(output)},
        ]})  # fmt: skip
    return messages


def body(run: str, steps: int) -> dict[str, Any]:
    user_id = f"user_{'cd' * 32}_account__session_{SESSIONS[run]}"
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "system": SYSTEM,
        "metadata": {"user_id": user_id},
        "messages": transcript(run, steps),
    }


SESSIONS = {"a": str(uuid.uuid4()), "b": str(uuid.uuid4())}


def test_two_runs_with_the_same_prompt_keep_their_own_plans(tmp_path: Path) -> None:
    router = respx.MockRouter(assert_all_called=False)
    answer = {"id": "msg_1", "type": "message", "content": [], "usage": {"input_tokens": 10}}
    router.post(f"{ANTHROPIC}/v1/messages").mock(return_value=httpx.Response(200, json=answer))
    settings = Settings(
        upstream_url=UPSTREAM,
        anthropic_upstream_url=ANTHROPIC,
        trigger_tokens=1500,
        preserve_recent=2,
        outputs_dir=str(tmp_path),
        max_body_bytes=1 << 20,
        record_decisions=False,
        price_profile="none",  # compact at the soft line: this test is about sessions
    )
    upstream = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    app = create_app(
        settings, client=upstream, state=MemoryStateStore(), engine_factory=default_engine
    )

    def turn(c: TestClient, run: str, steps: int) -> tuple[str, str]:
        r = c.post("/v1/messages", json=body(run, steps))
        assert r.status_code == 200
        return r.headers["x-factrail"], r.headers["x-factrail-compactions"]

    with TestClient(app) as c:
        assert turn(c, "a", 12) == ("compacted", "1")
        # Keyed by the head alone, run b was run a's session: inside the re-arm gap a's
        # compaction left, b's transcript went upstream whole (`passthrough`, 1 compaction).
        assert turn(c, "b", 12) == ("compacted", "1")
        assert turn(c, "a", 13) == ("reapplied", "1")
        assert turn(c, "b", 13) == ("reapplied", "1")
