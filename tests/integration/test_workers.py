"""`factrail serve --workers 2` as a real process, on a SQLite file and on a real Redis-protocol
server: a session's later turns re-apply the same plan whichever worker answers, `/metrics`
adds up every worker's counts, and a per-process store is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from factrail.settings import Settings
from factrail.stores import admin_key
from tests.integration.fake_upstream import CHAT_USAGE
from tests.integration.processes import factrail_env, free_port, metric_total, serve_cli, stop
from tests.integration.test_gateway import transcript
from tests.redis_server import RedisServer

pytestmark = pytest.mark.integration
TURNS = 24
"""Requests of the later turn, each on a new connection (so both workers answer some)."""


def serve_workers(
    upstream: str, home: Path, state_url: str
) -> tuple[str, subprocess.Popen[bytes], str]:
    """The workers' root URL, their process and the admin key they made at start."""
    env = factrail_env(upstream, home, FACTRAIL_STATE_URL=state_url, FACTRAIL_READ_TIMEOUT_S="30")
    base, proc = serve_cli(env, "--workers", "2")
    key = admin_key.read(Settings(state_url=state_url), env)
    assert key is not None
    return base, proc, key


def fresh(base: str) -> httpx.Client:
    """A client whose every request opens a new connection (workers take turns to accept)."""
    return httpx.Client(base_url=base, limits=httpx.Limits(max_keepalive_connections=0))


def exercise(base: str, upstream: str, key: str) -> None:
    messages = transcript()
    body = {"model": "gpt-4o", "messages": messages}
    headers = {"x-factrail-session": "workers-" + base.rsplit(":", 1)[1]}
    with fresh(base) as client:
        first = client.post("/v1/chat/completions", json=body, headers=headers)
        assert first.headers["x-factrail"] == "compacted"
        later = {**body, "messages": [*messages, {"role": "assistant", "content": "On it."},
                                      {"role": "user", "content": "Go on."}]}  # fmt: skip
        outcomes = set()
        for _ in range(TURNS):
            r = client.post("/v1/chat/completions", json=later, headers=headers)
            assert r.status_code == 200
            outcomes.add(r.headers["x-factrail"])
        assert outcomes == {"reapplied"}
        records = httpx.get(upstream[: -len("/v1")] + "/_records").json()
        sent = [orjson.loads(rec["body"])["messages"] for rec in records][-TURNS:]
        assert all(m[: len(messages)] == sent[0][: len(messages)] for m in sent)
        for _ in range(8):  # every scrape, whichever worker serves it, adds up all workers
            text = client.get("/metrics").text
            assert metric_total(text, "factrail_requests_total") == TURNS + 1
            assert metric_total(text, "factrail_compactions_total") == 1
        # every answer added its share to the session's bill in the shared store, whichever
        # worker answered it (no price profile: each prompt token bills 1)
        assert client.get("/v1/factrail/sessions").status_code == 401
        for _ in range(4):  # whichever worker answers, the one key made at start opens it
            admin = {"authorization": f"Bearer {key}"}
            (row,) = client.get("/v1/factrail/sessions", headers=admin).json()["sessions"]
        assert row["bill"]["billed"] == (TURNS + 1) * CHAT_USAGE["prompt_tokens"]
        assert row["bill"]["billed"] == metric_total(text, "factrail_billed_input_tokens_total")
        kept_out = metric_total(text, "factrail_spared_input_tokens_total", part="kept_out")
        assert row["bill"]["spared"] == pytest.approx(kept_out, abs=0.5) and kept_out > 0


def test_two_workers_on_sqlite(chat_upstream: str, tmp_path: Path) -> None:
    base, proc, key = serve_workers(chat_upstream, tmp_path, f"sqlite:///{tmp_path / 'state.db'}")
    try:
        exercise(base, chat_upstream, key)
    finally:
        stop(proc)


def test_two_workers_on_redis(
    chat_upstream: str, tmp_path: Path, redis_server: RedisServer
) -> None:
    base, proc, key = serve_workers(chat_upstream, tmp_path, redis_server.url + "?prefix=w:")
    try:
        exercise(base, chat_upstream, key)
    finally:
        stop(proc)


def test_workers_refuse_a_per_process_store(tmp_path: Path) -> None:
    env = {**os.environ, "FACTRAIL_STATE_URL": "memory://", "XDG_DATA_HOME": str(tmp_path)}
    args = [sys.executable, "-m", "factrail", "serve", "--port", str(free_port()), "--workers", "2"]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "memory://" in done.stderr and "share" in done.stderr
