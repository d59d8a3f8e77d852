"""Shadow mode and the per-request bypass, through a gateway with the real engine: the
upstream receives the client's exact bytes, and the session's JSON, turn log and `/metrics`
carry what factrail would have sent and billed."""

from __future__ import annotations

import gzip
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from factrail.gateway.factory import create_app, default_engine
from factrail.session.keys import header_key
from factrail.settings import Settings
from factrail.stores import open_state_store
from tests.test_session import chat


@dataclass
class Upstream:
    """A fake OpenAI upstream that keeps every body it receives and reports a cache read of
    half the prompt."""

    bodies: list[bytes] = field(default_factory=list)
    headers: list[httpx.Headers] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(request.content)
        self.headers.append(request.headers)
        raw = request.content
        if request.headers.get("content-encoding") == "gzip":
            raw = gzip.decompress(raw)
        prompt = max(len(raw) // 4, 1)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": 5,
            "total_tokens": prompt + 5,
            "prompt_tokens_details": {"cached_tokens": prompt // 2},
        }
        return httpx.Response(200, json={"id": "c", "choices": [], "usage": usage})


@dataclass
class Gateway:
    client: TestClient
    upstream: Upstream
    key: str


def gateway(tmp_path: Path, mode: str) -> Iterator[Gateway]:
    key = secrets.token_urlsafe(24)
    settings = Settings(
        state_url=f"sqlite://{tmp_path / 'state.db'}",
        trigger_tokens=6000,
        trigger_percent=0.0,
        outputs_dir=str(tmp_path / "outputs"),
        admin_key=SecretStr(key),
        mode=mode,  # type: ignore[arg-type]
    )
    upstream = Upstream()
    app = create_app(
        settings,
        client=httpx.AsyncClient(transport=httpx.MockTransport(upstream)),
        state=open_state_store(settings.state_url),
        engine_factory=default_engine,
    )
    with TestClient(app) as client:
        yield Gateway(client, upstream, key)


@pytest.fixture
def shadow(tmp_path: Path) -> Iterator[Gateway]:
    yield from gateway(tmp_path, "shadow")


@pytest.fixture
def compact(tmp_path: Path) -> Iterator[Gateway]:
    yield from gateway(tmp_path, "compact")


def admin(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def body(turns: int) -> bytes:
    """A chat body past the trigger, spelled with spacing orjson would not keep."""
    return json.dumps({"model": "gpt-4o", "messages": chat(turns)}, indent=1).encode()


def post(g: Gateway, raw: bytes, name: str, **headers: str) -> httpx.Response:
    return g.client.post(
        "/v1/chat/completions",
        content=raw,
        headers={"content-type": "application/json", "x-factrail-session": name, **headers},
    )


def counter(g: Gateway, name: str, **labels: str) -> float:
    text = g.client.get("/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    raise AssertionError(f"{name} {labels} not exported")


def test_shadow_mode_sends_the_clients_bytes_and_projects_the_compaction(shadow: Gateway) -> None:
    sent = [body(30), body(32)]
    for raw in sent:
        r = post(shadow, raw, "shadowed")
        assert r.status_code == 200
        assert r.headers["x-factrail"] == "shadow"
    assert shadow.upstream.bodies == sent  # byte for byte, every turn
    session = header_key("shadowed")
    data = shadow.client.get(f"/v1/factrail/sessions/{session}", headers=admin(shadow.key)).json()
    projected = data["projected"]
    assert projected is not None and projected["compactions"] >= 1
    assert data["compactions"] == 0  # nothing was compacted on the wire
    assert (data["bets"], data["forced"], data["cold"]) == (0, 0, 0)  # of those sent
    assert 0 < projected["billed"] < projected["whole"]
    assert projected["ratio"] == round(projected["billed"] / projected["whole"], 4)
    turns = data["turns"]
    assert [t["n"] for t in turns] == [1, 2]
    assert all(t["shadow"] for t in turns)
    assert turns[0]["outcome"] == "compacted" and turns[0]["tokens_sent"] < turns[0]["tokens_whole"]
    assert data["model"] == "gpt-4o"
    assert data["lines"]["trigger"] == 6000
    assert data["lines"]["soft"] < 6000 < data["lines"]["danger"]
    listing = shadow.client.get("/v1/factrail/sessions", headers=admin(shadow.key)).json()
    assert listing["mode"] == "shadow"
    assert listing["summary"]["projected"]["compactions"] == projected["compactions"]
    assert counter(shadow, "factrail_projected_compactions_total") >= 1
    assert counter(shadow, "factrail_projected_spared_input_tokens_total", part="kept_out") > 0
    assert counter(shadow, "factrail_compactions_total", judge="rules", reason="rules") == 0


def test_compact_mode_keeps_a_turn_log_and_no_projection(compact: Gateway) -> None:
    r = post(compact, body(30), "live", **{"user-agent": "claude-cli/2.1.332 (external, cli)"})
    assert r.headers["x-factrail"] == "compacted"
    assert compact.upstream.bodies[0] != body(30)
    session = header_key("live")
    data = compact.client.get(f"/v1/factrail/sessions/{session}", headers=admin(compact.key)).json()
    assert data["projected"] is None and data["compactions"] == 1
    assert data["client"] == "claude-code"
    (turn,) = data["turns"]
    assert turn["outcome"] == "compacted" and not turn["shadow"]
    assert turn["decision"] in ("pays", "forced", "cold")
    assert turn["billed"] is not None and turn["whole_billed"] is not None
    listing = compact.client.get("/v1/factrail/sessions", headers=admin(compact.key)).json()
    (row,) = listing["sessions"]
    assert row["client"] == "claude-code" and row["turns"] == 1 and row["compactions"] == 1
    assert row["forced"] + row["cold"] + (row["bets"] or 0) == 1


@pytest.mark.parametrize("mode", ["compact", "shadow"])
def test_the_bypass_header_forwards_one_request_untouched(tmp_path: Path, mode: str) -> None:
    for g in gateway(tmp_path, mode):
        raw = body(30)
        r = post(g, raw, "bypassed", **{"x-factrail-bypass": "1"})
        assert r.headers["x-factrail"] == "bypass"
        assert g.upstream.bodies == [raw]
        assert "x-factrail-bypass" not in g.upstream.headers[0]  # factrail's own header
        r = post(g, raw, "bypassed")  # the next request is stepped again
        assert r.headers["x-factrail"] == ("compacted" if mode == "compact" else "shadow")
        assert counter(g, "factrail_requests_total", route="chat_completions", outcome="bypass",
                       status_class="2xx") == 1  # fmt: skip


def test_a_bypassed_request_still_taints_its_session(tmp_path: Path) -> None:
    for g in gateway(tmp_path, "compact"):
        messages: list[dict[str, Any]] = chat(3)
        messages.insert(1, {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": "t-mail", "type": "function",
                            "function": {"name": "email-search", "arguments": "{}"}}],
        })  # fmt: skip
        messages.insert(2, {"role": "tool", "tool_call_id": "t-mail", "content": "inbox"})
        raw = json.dumps({"model": "gpt-4o", "messages": messages}).encode()
        packed = gzip.compress(raw)
        r = post(g, packed, "fenced", **{"x-factrail-bypass": "1", "content-encoding": "gzip"})
        assert r.headers["x-factrail"] == "bypass"
        assert g.upstream.bodies == [packed]
        session = header_key("fenced")
        data = g.client.get(f"/v1/factrail/sessions/{session}", headers=admin(g.key)).json()
        assert data["tainted"] and data["taint_tool"] == "email-search"
