"""The decision log and the process log never hold a secret of the newer redaction families.

(Saved outputs: tests/test_saved_secrets.py; judge payloads: tests/judges/test_egress.py;
dataset export: tests/eval/test_dataset.py; every family: tests/core/test_redact_families.py.)
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import httpx

from factrail.core.formats import openai_chat
from factrail.gateway.logging import JsonFormatter
from factrail.judges.systemone import SystemOneJudge
from factrail.session import SessionCompactor
from factrail.stores.decisions import DecisionLog
from factrail.stores.memory_state import MemoryStateStore
from tests.leaks import new_family_leaks
from tests.options import engine_options
from tests.test_session import chat


async def test_the_decision_log_holds_no_secret_of_the_newer_families(tmp_path: Path) -> None:
    leaks = new_family_leaks()

    def answer(request: httpx.Request) -> httpx.Response:
        questions = json.loads(request.content)["questions"]
        return httpx.Response(200, json={"answers": {q: {"noul": 0.9} for q in questions}})

    wire = chat(30)
    wire[1]["content"] = "Fix the failing deploy; the config is:\n" + "\n".join(
        line for line, _, _ in leaks
    )
    log = DecisionLog(tmp_path / "decisions")
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        judge = SystemOneJudge(client=client, url="http://judge.test/v1/systemone", api_key="k")
        c = SessionCompactor(
            engine_options(trigger_tokens=16000, trigger_percent=0.0),
            state=MemoryStateStore(),
            outputs=None,
            judge=judge,
            decisions=log,
        )
        await c.compact("s", openai_chat.parse(wire))
    written = "".join(p.read_text() for p in (tmp_path / "decisions").glob("*.jsonl"))
    assert written  # the round was logged
    for line, secret, family in leaks:
        assert secret not in written, line
        assert f"[REDACTED:{family}]" in written, line


def test_log_lines_are_redacted_message_and_fields() -> None:
    leaks = new_family_leaks()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("factrail.test-redaction-sinks")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        for line, _, _ in leaks:
            logger.warning("upstream said: %s", line, extra={"fields": {"detail": line, "n": 3}})
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    records = [json.loads(raw) for raw in out.splitlines()]
    assert len(records) == len(leaks)
    for record, (_, secret, family) in zip(records, leaks, strict=True):
        assert secret not in record["msg"] and secret not in record["detail"]
        assert f"[REDACTED:{family}]" in record["msg"]
        assert record["n"] == 3
