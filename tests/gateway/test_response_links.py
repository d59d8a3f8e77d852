"""A Responses chain continued on another worker or replica finds its session in the shared
state store: two apps over one store stand for two workers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import respx
from fastapi.testclient import TestClient

from factrail.gateway.factory import create_app, default_engine
from factrail.settings import Settings
from factrail.stores.memory_state import MemoryStateStore
from tests.gateway.support import UPSTREAM


def items(steps: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]}
    ]
    for i in range(steps):
        out.append({"type": "function_call", "call_id": f"fc{i}", "name": "shell",
                    "arguments": '{"cmd": "ls"}'})  # fmt: skip
        text = "\n".join(f"entry {i}.{j} value {i * 100 + j}" for j in range(40))
        out.append({"type": "function_call_output", "call_id": f"fc{i}", "output": text})
    return out


def test_a_chain_continued_on_another_worker_keeps_its_session(tmp_path: Path) -> None:
    answers = iter(range(10))

    def answer(request: httpx.Request) -> httpx.Response:
        body = {"id": f"resp_{next(answers)}", "object": "response", "output": [],
                "usage": {"input_tokens": 10, "output_tokens": 1}}  # fmt: skip
        return httpx.Response(200, json=body)

    router = respx.MockRouter(assert_all_called=False)
    router.post(f"{UPSTREAM}/responses").mock(side_effect=answer)
    settings = Settings(
        upstream_url=UPSTREAM, trigger_tokens=1500, outputs_dir=str(tmp_path),
        price_profile="none", record_decisions=False, min_cut_chars=0,
    )  # fmt: skip
    shared = MemoryStateStore()

    def worker() -> TestClient:
        upstream = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
        app = create_app(settings, client=upstream, state=shared, engine_factory=default_engine)
        return TestClient(app)

    with worker() as a, worker() as b:
        first = a.post("/v1/responses", json={"model": "gpt-4o", "input": items(10)})
        assert first.headers["x-factrail"] == "compacted"
        for _ in range(200):  # the link is written off the event loop, after the answer
            if shared.linked("resp_0") is not None:
                break
            time.sleep(0.01)
        assert shared.linked("resp_0") is not None
        later = {"model": "gpt-4o", "previous_response_id": "resp_0", "input": items(10)}
        on_b = b.post("/v1/responses", json=later)
        # The same session on the other worker: its plan re-applies (a new key would have
        # compacted afresh, and by the fence's rules, as a chain not seen from its start).
        assert on_b.headers["x-factrail"] == "reapplied"
        assert on_b.headers["x-factrail-compactions"] == "1"
