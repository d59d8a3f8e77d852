"""Health, readiness, metrics and the saved-output route."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from factrail.gateway.metrics import Metrics
from factrail.settings import Settings
from factrail.stores.outputs import OutputStore
from tests.gateway.support import UPSTREAM, ScriptedCompactor, make_client
from tests.gateway.test_proxy import chat_body


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "checks": {"upstream": True, "state": True, "outputs": True},
    }


def test_metrics_show_a_compaction(client: TestClient, router: respx.MockRouter) -> None:
    router.post(f"{UPSTREAM}/chat/completions").mock(return_value=httpx.Response(200, json={}))
    client.post("/v1/chat/completions", content=chat_body())
    text = client.get("/metrics").text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("factrail_compactions_total", (("judge", "rules"), ("reason", "rules")))] == 1
    assert samples[("factrail_compaction_tokens_remaining_ratio_count", ())] == 1
    assert samples[("factrail_compaction_tokens_remaining_ratio_sum", ())] == 0.25
    assert samples[("factrail_tokens_saved_total", ())] == 750
    labels = (("outcome", "compacted"), ("route", "chat_completions"), ("status_class", "2xx"))
    assert samples[("factrail_requests_total", labels)] == 1
    assert samples[("factrail_session_compactions_count", ())] == 1


def test_metrics_show_preparations() -> None:
    metrics = Metrics()
    metrics.record_preparation("done", 0.2)
    metrics.record_preparation("skipped", 0.0)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
    }
    assert samples[("factrail_preparations_total", (("outcome", "done"),))] == 1
    assert samples[("factrail_preparations_total", (("outcome", "skipped"),))] == 1
    assert samples[("factrail_preparation_seconds_count", ())] == 1  # only those that ran
    assert samples[("factrail_preparation_seconds_sum", ())] == 0.2


def admin_client(router: respx.MockRouter, outputs: OutputStore, admin_key: str) -> TestClient:
    settings = Settings(upstream_url=UPSTREAM, admin_key=SecretStr(admin_key))
    return make_client(settings, router, ScriptedCompactor(), outputs)


def test_saved_outputs_need_their_capability_and_no_admin_key(
    router: respx.MockRouter, outputs: OutputStore
) -> None:
    """An agent reads its outputs back through its own session's notes, which name the
    capability and no key: the route serves by the capability alone, with a key set or not."""
    saved = outputs.save("sess", "call_1", "the full output")
    key = "adm-" + "Z9y8" * 6
    with admin_client(router, outputs, key) as c:
        url = f"/v1/factrail/outputs/{saved.output_id}"
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": f"Bearer {key}"}):
            r = c.get(url, headers=headers)
            assert r.status_code == 200
            assert r.text == "the full output"
            assert r.headers["content-type"].startswith("text/plain")
        assert c.get("/v1/factrail/outputs/sess/missing").status_code == 404
        assert c.get("/v1/factrail/outputs/..%2F..%2Fetc/passwd").status_code in (400, 404)
        assert c.get("/v1/factrail/outputs/a/b/c").status_code == 400
        assert c.get("/v1/factrail/outputs/.hidden/x").status_code == 400


def test_saved_outputs_need_only_their_capability_without_an_admin_key(
    client: TestClient, outputs: OutputStore
) -> None:
    saved = outputs.save("sess", "call_2", "text")
    assert client.get(f"/v1/factrail/outputs/{saved.output_id}").text == "text"


def test_an_output_is_served_only_under_its_own_sessions_capability(
    client: TestClient, outputs: OutputStore
) -> None:
    mine = outputs.save("s-mine", "call_1", "my output")
    outputs.save("s-other", "call_9", "their output")
    assert mine.output_id.startswith(outputs.capability("s-mine") + "/")
    assert client.get(f"/v1/factrail/outputs/{mine.output_id}").text == "my output"
    other_cap = outputs.capability("s-other")
    assert client.get(f"/v1/factrail/outputs/{other_cap}/call_1").status_code == 404
    mine_cap = outputs.capability("s-mine")
    assert client.get(f"/v1/factrail/outputs/{mine_cap}/call_9").status_code == 404
    # the session key (guessable from what a session starts with) opens nothing
    assert client.get("/v1/factrail/outputs/s-mine/call_1").status_code == 404


def test_outputs_saved_by_an_older_version_are_not_served_over_http(
    client: TestClient, outputs: OutputStore
) -> None:
    legacy = outputs.root / "s-0123456789abcdef01234567"
    legacy.mkdir(parents=True, mode=0o700)
    (legacy / "call_1.txt").write_text("old layout")
    assert client.get(f"/v1/factrail/outputs/{legacy.name}/call_1").status_code == 404
    assert outputs.get(f"{legacy.name}/call_1") == "old layout"  # `factrail outputs get`


def test_a_symlink_planted_among_the_outputs_is_not_served(
    client: TestClient, outputs: OutputStore, tmp_path: Path
) -> None:
    saved = outputs.save("s", "call_1", "ours")
    secret = tmp_path / "host-secret.txt"
    secret.write_text("not an output")
    (saved.path.parent / "planted.txt").symlink_to(secret)
    cap = outputs.capability("s")
    assert client.get(f"/v1/factrail/outputs/{cap}/planted").status_code == 404
    assert client.get(f"/v1/factrail/outputs/{saved.output_id}").text == "ours"


def one_round(
    task: Callable[[Callable[[float], Awaitable[None]]], Coroutine[Any, Any, None]],
) -> list[float]:
    """Run a periodic task (given its `sleep`) for one round: the waits it asked for."""
    import asyncio

    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        raise asyncio.CancelledError  # stop after one round

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(task(sleep))
    return waits


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample the registry exports, by name and sorted labels."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
    }


def test_the_sweep_task_runs_then_waits_for_its_interval(tmp_path: Path) -> None:
    from factrail.gateway.sweeper import sweep_outputs
    from factrail.stores.outputs import DAY_SECONDS

    store = OutputStore(tmp_path / "outputs")
    old = store.save("s", "old", "x").path
    os.utime(old, (1_000_000.0, 1_000_000.0))
    metrics = Metrics()
    later = 1_000_000 + 31 * DAY_SECONDS
    waits = one_round(
        lambda sleep: sweep_outputs(store, 123.0, metrics, clock=lambda: later, sleep=sleep)
    )
    assert waits == [123.0] and not old.exists()
    exported = samples(metrics)
    assert exported[("factrail_outputs_removed_total", (("reason", "expired"),))] == 1
    assert exported[("factrail_outputs_bytes", ())] == 0


def test_the_lifespan_starts_the_sweep_and_stops_it(
    router: respx.MockRouter, tmp_path: Path
) -> None:
    store = OutputStore(tmp_path / "outputs")
    old = store.save("s", "old", "x").path
    os.utime(old, (1_000_000.0, 1_000_000.0))
    settings = Settings(upstream_url=UPSTREAM, outputs_sweep_interval_s=3600.0)
    with make_client(settings, router, ScriptedCompactor(), store) as c:
        assert c.get("/healthz").status_code == 200
        c.portal.call(asyncio_sleep_until, lambda: not old.exists())
    assert not old.exists()


def test_dashboard_and_compose_parse() -> None:
    yaml = pytest.importorskip("yaml")
    root = Path(__file__).resolve().parents[2] / "deploy"
    for path in root.rglob("*.json"):
        orjson.loads(path.read_bytes())
    for path in [*root.rglob("*.yaml"), *root.rglob("*.yml")]:
        assert all(doc is not None for doc in yaml.safe_load_all(path.read_text()))


def test_startup_logs_which_engine_path_runs(
    settings: Settings,
    router: respx.MockRouter,
    compactor: ScriptedCompactor,
    outputs: OutputStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from factrail.core import kernels

    with (
        caplog.at_level("INFO", logger="factrail.app"),
        make_client(settings, router, compactor, outputs),
    ):
        pass
    assert any(kernels.describe() in r.getMessage() for r in caplog.records)


async def asyncio_sleep_until(done: Callable[[], bool]) -> None:
    """Yield to the event loop until `done()` (the sweep runs in a worker thread); a guard of
    a few thousand rounds keeps a broken sweep from hanging the suite."""
    import asyncio

    for _ in range(3000):
        if done():
            return
        await asyncio.sleep(0.01)


def test_compose_publishes_on_loopback_and_requires_the_admin_key() -> None:
    yaml = pytest.importorskip("yaml")
    compose = Path(__file__).resolve().parents[2] / "deploy" / "compose.yaml"
    services = yaml.safe_load(compose.read_text())["services"]
    for name, service in services.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)
    admin = services["factrail"]["environment"]["FACTRAIL_ADMIN_KEY"]
    assert admin.startswith("${FACTRAIL_ADMIN_KEY:?")  # compose refuses to start without it


def test_the_recent_sessions_bills_are_read_then_wait_for_their_interval() -> None:
    """Every minute the gateway reads the store's recent sessions' bills into gauges: a session
    seen within the cache's lifetime is live, the others settled, and those of them that cost
    more than sent whole are counted, apart those never compacted on a bet."""

    from factrail.gateway.bills import watch_bills
    from factrail.stores.memory_state import MemoryStateStore
    from factrail.stores.state import SessionState

    now = [1_800_000_000.0]
    store = MemoryStateStore(clock=lambda: now[0])
    store.save("s-cheaper", SessionState(plan={}, billed=800.0, spared=200.0))
    store.save(
        "s-dearer", SessionState(plan={}, compactions=2, bets=1, billed=1050.0, spared=-50.0)
    )
    store.save(
        "s-forced", SessionState(plan={}, compactions=1, bets=0, billed=1020.0, spared=-20.0)
    )
    now[0] += 600  # both settled: ten minutes past the five of the cache
    store.save("s-live", SessionState(plan={}, billed=1050.0, spared=-50.0))
    metrics = Metrics()
    waits = one_round(
        lambda sleep: watch_bills(
            store, metrics, live_s=300.0, interval_s=60.0, clock=lambda: now[0], sleep=sleep
        )
    )
    assert waits == [60.0]
    exported = samples(metrics)
    assert exported[("factrail_recent_sessions", (("state", "settled"),))] == 3
    assert exported[("factrail_recent_sessions", (("state", "above_whole"),))] == 2
    assert exported[("factrail_recent_sessions", (("state", "above_whole_unbet"),))] == 1
    assert exported[("factrail_recent_sessions", (("state", "live"),))] == 1
    ratio = exported[("factrail_recent_sessions_bill_ratio", ())]
    assert ratio == pytest.approx(3920 / 4000, 1e-3)
    metrics.record_bills(
        {"sessions": 0, "live": 0, "above_whole": 0, "above_unbet": 0, "ratio": None}
    )
    text = metrics.render().decode()
    assert "factrail_recent_sessions_bill_ratio NaN" in text  # no bill: no ratio, not 0
