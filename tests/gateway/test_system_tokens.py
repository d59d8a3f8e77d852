"""System and developer messages count toward the trigger on the chat route, as the provider
counts them: a small transcript under a large system prompt is compacted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import respx
from fastapi.testclient import TestClient

from factrail.gateway.factory import create_app, default_engine
from factrail.settings import Settings
from factrail.stores.memory_state import MemoryStateStore
from tests.gateway.support import UPSTREAM
from tests.test_session import chat

SYSTEM = " ".join(
    f"Rule {i}: keep the build green and report every failing test." for i in range(400)
)


def outcome(system: str, tmp_path: Path) -> str:
    router = respx.MockRouter(assert_all_called=False)
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json={}))
    settings = Settings(
        upstream_url=UPSTREAM,
        trigger_tokens=12000,
        outputs_dir=str(tmp_path),
        max_body_bytes=1 << 22,
        price_profile="none",
    )
    app = create_app(
        settings,
        client=httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler)),
        state=MemoryStateStore(),
        engine_factory=default_engine,
    )
    messages: list[dict[str, Any]] = chat(6)
    messages[0] = {"role": "system", "content": system}
    with TestClient(app) as client:
        got = client.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": messages})
    return got.headers["x-factrail"]


def test_the_system_prompt_counts_toward_the_trigger(tmp_path: Path) -> None:
    assert outcome("You are a coding agent.", tmp_path / "short") == "passthrough"
    assert outcome(SYSTEM, tmp_path / "long") == "compacted"
