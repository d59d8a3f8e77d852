"""Two runs of an agent that names no session (no id, no header; mini-swe-agent, the Agents SDK,
a script) with the same system prompt and task are two sessions once they answer differently:
run at once (a pass@k evaluation), each keeps its own plan instead of dropping the other's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import respx
from fastapi.testclient import TestClient

from factrail.gateway.factory import create_app, default_engine
from factrail.settings import Settings
from factrail.stores.memory_state import MemoryStateStore
from tests.gateway.support import UPSTREAM


def transcript(run: str, steps: int) -> list[dict[str, Any]]:
    """A run's transcript: the same system prompt, task and commands; the run's own call ids
    (the API's are random) and words."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a software engineer with a shell."},
        {"role": "user", "content": "Find out why the build fails."},
    ]
    for i in range(steps):
        output = [f"tests/test_mod{i}.py::test_case_{j} PASSED [{j}%]" for j in range(40)]
        output.insert(20, f"ERROR: assertion failed in module {i}: expected 4{i}1")
        command = f'{{"command": "pytest tests/test_mod{i}.py -x"}}'
        call = {"id": f"call_{run}{i:03d}", "type": "function",
                "function": {"name": "bash", "arguments": command}}  # fmt: skip
        messages.append({"role": "assistant", "content": f"Run {run}, step {i}.",
                         "tool_calls": [call]})  # fmt: skip
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "\n".join(output)})
    return messages


def test_two_runs_that_name_no_session_keep_their_own_plans(tmp_path: Path) -> None:
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json={"id": "c", "object": "chat.completion", "choices": [],
                                         "usage": {"prompt_tokens": 10}})  # fmt: skip

    router = respx.MockRouter(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(side_effect=answer)
    settings = Settings(
        upstream_url=UPSTREAM, trigger_tokens=1500, preserve_recent=2, outputs_dir=str(tmp_path),
        record_decisions=False, price_profile="none",
    )  # fmt: skip
    upstream = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    app = create_app(settings, client=upstream, state=MemoryStateStore(),
                     engine_factory=default_engine)  # fmt: skip

    def turn(c: TestClient, run: str, steps: int) -> str:
        r = c.post(
            "/v1/chat/completions", json={"model": "gpt-4o", "messages": transcript(run, steps)}
        )
        assert r.status_code == 200
        return r.headers["x-factrail"]

    with TestClient(app) as c:
        assert turn(c, "a", 12) == "compacted"
        first_a = sent[-1]["messages"]
        assert turn(c, "b", 12) == "compacted"
        assert turn(c, "a", 13) == "reapplied"
        # Run a's reductions come back byte for byte: its prefix is what it was.
        assert sent[-1]["messages"][: len(first_a)] == first_a
        assert turn(c, "b", 13) == "reapplied"
