"""Through the gateway, with the real engine: a Claude request whose newest result alone is
larger than the model's window reaches the upstream cut (head, fact lines, tail, a note naming
the saved whole), the whole is one read away, and the 1M-context beta lifts the window so the
same request goes out untouched."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import orjson
import respx
from fastapi.testclient import TestClient

from factrail.gateway.factory import create_app, default_engine
from factrail.stores.memory_state import MemoryStateStore
from tests.gateway.test_anthropic import MESSAGES, body, make_settings, message, transcript

WINDOW = 20_000


def flooded() -> tuple[list[dict[str, Any]], str]:
    """Three small steps, then a `git add` whose output is about five windows long."""
    messages = transcript(steps=3)[:-2]
    lines = [f"hint: added node_modules/pkg{i:05d}/index.js to the index" for i in range(8000)]
    lines[4000] = "fatal: unable to write new index file: No space left on device"
    flood = "\n".join(lines)
    use = {"type": "tool_use", "id": "toolu_big", "name": "Bash", "input": {"command": "git add ."}}
    result = {"type": "tool_result", "tool_use_id": "toolu_big", "content": flood}
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "Stage."}, use]})
    messages.append({"role": "user", "content": [result]})
    return messages, flood


def gateway(router: respx.MockRouter, tmp_path: Path) -> TestClient:
    settings = make_settings(
        trigger_tokens=180_000,
        context_windows={"claude-sonnet-4-5": WINDOW},
        max_body_bytes=4 * 1024 * 1024,
        outputs_dir=str(tmp_path),
    )
    upstream = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    app = create_app(
        settings, client=upstream, state=MemoryStateStore(), engine_factory=default_engine
    )
    return TestClient(app)


def sent_result(route: respx.Route) -> str:
    sent = orjson.loads(route.calls.last.request.content)
    for m in sent["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b.get("type") == "tool_result" and b["tool_use_id"] == "toolu_big":
                content = b["content"]
                return content if isinstance(content, str) else content[0]["text"]
    raise AssertionError("the result did not reach the upstream")


def test_an_overflowing_recent_result_is_cut_and_one_read_away(
    router: respx.MockRouter, tmp_path: Path
) -> None:
    route = router.post(MESSAGES).mock(return_value=httpx.Response(200, json=message()))
    messages, flood = flooded()
    with gateway(router, tmp_path) as client:
        r = client.post("/v1/messages", json=body(messages))
        assert r.status_code == 200
        assert r.headers["x-factrail"] == "compacted"
        cut = sent_result(route)
        assert len(cut) < len(flood) / 4
        assert cut.startswith(flood[:120])
        assert "No space left on device" in cut
        found = re.search(r"/v1/factrail/outputs/(\S+?)[ )`\]]", cut)
        assert found is not None
        whole = client.get(f"/v1/factrail/outputs/{found[1]}")
        assert whole.status_code == 200
        assert whole.text == flood
        assert "factrail_rescued_results_total 1.0" in client.get("/metrics").text


def test_the_1m_context_beta_sends_the_same_request_untouched(
    router: respx.MockRouter, tmp_path: Path
) -> None:
    route = router.post(MESSAGES).mock(return_value=httpx.Response(200, json=message()))
    messages, flood = flooded()
    raw = orjson.dumps(body(messages))
    with gateway(router, tmp_path) as client:
        r = client.post(
            "/v1/messages",
            content=raw,
            headers={"content-type": "application/json", "anthropic-beta": "context-1m-2025-08-07"},
        )
        metrics = client.get("/metrics").text
    assert r.status_code == 200
    assert r.headers["x-factrail"] != "compacted"
    assert sent_result(route) == flood
    assert "factrail_rescued_results_total 0.0" in metrics
