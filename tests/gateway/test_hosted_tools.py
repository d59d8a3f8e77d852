"""Agents that run OpenAI's hosted tool definitions themselves (the `shell` and `apply_patch`
tools of the Agents SDK, `local_shell` of codex-mini) send `shell_call_output`,
`local_shell_call_output` and `apply_patch_call_output` items: factrail reduces them as it
does function outputs, in their own shapes, saves each original first, and reproduces the
reduction byte for byte on the next turn."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import respx
from fastapi.testclient import TestClient
from openai.types.responses.response_function_shell_tool_call_output import Output

from factrail.gateway.factory import create_app, default_engine
from factrail.settings import Settings
from factrail.stores.memory_state import MemoryStateStore
from tests.gateway.support import UPSTREAM

ROUTE = re.compile(r"/v1/factrail/outputs/(\S+?) ")


def listing(i: int) -> str:
    return "\n".join(f"src/mod{i}/file{j}.py: def handler_{i}_{j}(): return {j}" for j in range(60))


METADATA = {"exit_code": 0, "duration_seconds": 0.1}


def turn(i: int) -> list[dict[str, Any]]:
    """One tool round: shell on even steps, local shell on odd ones (its output plain text, or
    every other time a JSON object string as codex sends it), a patch every third."""
    out: list[dict[str, Any]] = []
    if i % 2 == 0:
        out.append({"type": "shell_call", "call_id": f"s{i}", "status": "completed",
                    "action": {"commands": [f"grep -rn handler src/mod{i}"]}})  # fmt: skip
        out.append({"type": "shell_call_output", "call_id": f"s{i}", "output": [
            {"stdout": listing(i), "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
        ]})  # fmt: skip
    else:
        out.append({"type": "local_shell_call", "id": f"lsh{i}", "call_id": f"l{i}",
                    "status": "completed", "action": {"type": "exec", "env": {},
                    "command": ["bash", "-lc", f"cat src/mod{i}/all.py"]}})  # fmt: skip
        output = (
            json.dumps({"output": listing(i), "metadata": METADATA}) if i % 4 == 3 else listing(i)
        )
        out.append({"type": "local_shell_call_output", "id": f"l{i}", "output": output})
    if i % 3 == 0:
        out.append({"type": "apply_patch_call", "call_id": f"p{i}", "status": "completed",
                    "operation": {"type": "update_file", "path": f"src/mod{i}/a.py",
                                  "diff": "@@\n-old\n+new\n"}})  # fmt: skip
        out.append({"type": "apply_patch_call_output", "call_id": f"p{i}", "status": "completed",
                    "output": "Done"})  # fmt: skip
    return out


def transcript(steps: int) -> list[dict[str, Any]]:
    head = [{"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "Rename every handler."}]}]  # fmt: skip
    return head + [item for i in range(steps) for item in turn(i)]


def gateway(tmp_path: Path, usage: bool = True) -> tuple[TestClient, list[bytes]]:
    """A gateway with the real engine (trigger 6,000) in front of a Responses upstream that
    answers every request (with a tiny `usage`, which calibrates the session's estimate down,
    unless not); the bodies it got."""
    sent: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        body: dict[str, Any] = {"id": f"resp_{len(sent)}", "object": "response", "output": []}
        if usage:
            body["usage"] = {"input_tokens": 10, "output_tokens": 1}
        return httpx.Response(200, json=body)

    router = respx.MockRouter(assert_all_called=False)
    router.post(f"{UPSTREAM}/responses").mock(side_effect=answer)
    settings = Settings(
        upstream_url=UPSTREAM, trigger_tokens=6000, outputs_dir=str(tmp_path),
        price_profile="none", record_decisions=False, min_cut_chars=0,
    )  # fmt: skip
    upstream = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    app = create_app(settings, client=upstream, state=MemoryStateStore(),
                     engine_factory=default_engine)  # fmt: skip
    return TestClient(app), sent


def test_hosted_tool_outputs_are_reduced_in_their_own_shapes(tmp_path: Path) -> None:
    app, sent = gateway(tmp_path)
    items = transcript(12)
    with app as client:
        first = client.post("/v1/responses", json={"model": "gpt-4o", "input": items})
        assert first.status_code == 200
        assert first.headers["x-factrail"] == "compacted"
        forwarded = json.loads(sent[-1])["input"]
        assert len(forwarded) == len(items)
        assert [f.get("type") for f in forwarded] == [i.get("type") for i in items]
        reduced = [(k, f) for k, (f, i) in enumerate(zip(forwarded, items, strict=True)) if f != i]
        kinds = {f["type"] for _, f in reduced}
        assert {"shell_call_output", "local_shell_call_output"} <= kinds
        local = {
            items[k]["output"][0] for k, f in reduced if f["type"] == "local_shell_call_output"
        }
        assert local == {"{", "s"}  # JSON object strings and plain text were both reduced
        for k, f in reduced:
            original = items[k]
            assert {key: v for key, v in f.items() if key != "output"} == {
                key: v for key, v in original.items() if key != "output"
            }
            if f["type"] == "shell_call_output":
                chunks = [Output.model_validate(c) for c in f["output"]]
                assert [c.outcome.type for c in chunks] == ["exit"]
                text = chunks[0].stdout
            elif original["output"].startswith("{"):  # still a JSON object, metadata kept
                wrapped = json.loads(f["output"])
                assert list(wrapped) == ["output", "metadata"]
                assert wrapped["metadata"] == METADATA
                text = wrapped["output"]
            else:
                text = f["output"]
            assert isinstance(text, str) and len(text) < len(listing(0))
            # The note says where the whole is, and the whole is there, redacted of nothing.
            saved = ROUTE.search(text)
            assert saved is not None, text
            whole = client.get(f"/v1/factrail/outputs/{saved[1]}")
            assert whole.status_code == 200
            assert whole.text == listing(int(f.get("call_id", f.get("id", "x0"))[1:]))
        # The newest round is forwarded as the client sent it.
        assert forwarded[-2:] == items[-2:]

        # Next turn, below the re-arm gap: the same reductions, byte for byte, then the new items.
        more = items + turn(12)
        second = client.post("/v1/responses", json={"model": "gpt-4o", "input": more})
        assert second.headers["x-factrail"] == "reapplied"
        again = json.loads(sent[-1])["input"]
        assert json.dumps(again[: len(forwarded)]) == json.dumps(forwarded)
        assert again[len(forwarded) :] == turn(12)


def test_history_before_the_providers_compaction_item_goes_as_sent(tmp_path: Path) -> None:
    """The provider prunes what came before its latest `compaction` item: a stateless loop
    that keeps appending sends it anyway, and factrail neither counts it nor reduces it."""
    app, sent = gateway(tmp_path, usage=False)
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "b3BhcXVl"}
    history = transcript(12)
    with app as client:
        raw = json.dumps({"model": "gpt-4o", "input": [*history, compaction, *turn(12)]})
        r = client.post("/v1/responses", content=raw, headers={"content-type": "application/json"})
        assert r.headers["x-factrail"] == "passthrough"
        assert sent[-1] == raw.encode()
        live = [item for i in range(12, 24) for item in turn(i)]
        r = client.post(
            "/v1/responses", json={"model": "gpt-4o", "input": [*history, compaction, *live]}
        )
        assert r.headers["x-factrail"] == "compacted"
        forwarded = json.loads(sent[-1])["input"]
        assert forwarded[: len(history) + 1] == [*history, compaction]
        assert forwarded[len(history) + 1 :] != live
