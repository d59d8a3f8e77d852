"""The Redis state store against a real server on loopback (no mock): round trips, atomic
calibration, TTLs that keep taint as long as outputs, leases, faults; and two compactors on one
server acting as two replicas."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from factrail.core.formats import openai_chat
from factrail.core.reapply import PlanEntry, text_hash
from factrail.judges.rules import RulesJudge
from factrail.session import SessionCompactor, step
from factrail.stores import open_state_store
from factrail.stores.outputs import OutputStore
from factrail.stores.redis_state import RedisStateStore, redact_url, split_prefix
from factrail.stores.state import Observed, SessionState, smooth_calibration
from tests.options import engine_options
from tests.redis_server import RedisServer
from tests.test_session import OUTPUTS_SECRET, chat

DAY = 24 * 60 * 60


@pytest.fixture
def store(redis_server: RedisServer) -> RedisStateStore:
    """A store under its own key prefix (tests share the server)."""
    url = f"{redis_server.url}?prefix=t{uuid.uuid4().hex[:8]}:"
    opened = open_state_store(url, taint_keep_seconds=60 * DAY)
    assert isinstance(opened, RedisStateStore)
    return opened


def dead_store(errors: list[str]) -> RedisStateStore:
    """A store whose server is not there (a closed loopback port)."""
    return RedisStateStore("redis://127.0.0.1:9/0", on_error=errors.append)


def test_round_trip_and_absence(store: RedisStateStore) -> None:
    assert store.fetch("none") == (None, True)
    state = SessionState(
        plan={"c1": PlanEntry(text_hash("x"), "[reduced]", {"path": "a.py"})},
        baseline_tokens=900,
        compactions=2,
        settled=["c1"],
        origin="start",
    )
    store.save("s", state)
    loaded, answered = store.fetch("s")
    assert answered and loaded is not None
    assert loaded.plan == state.plan
    assert (loaded.baseline_tokens, loaded.compactions, loaded.settled) == (900, 2, ["c1"])
    assert loaded.origin == "start"
    assert loaded.updated_ms > 0
    assert store.recent(10)[0][0] == "s"
    assert store.ping()


def test_an_unreadable_record_is_not_an_answer(
    store: RedisStateStore, redis_server: RedisServer
) -> None:
    """A corrupt record could have held a taint: the store says it did not answer."""
    client = redis.Redis.from_url(redis_server.url)
    client.set(f"{store.prefix}s:bad", b"{not json")
    assert store.fetch("bad") == (None, False)


def test_calibration_is_blended_in_the_server_and_a_save_keeps_it(store: RedisStateStore) -> None:
    store.save("s", SessionState(plan={}, calibration=1.0))
    store.observe("s", Observed(ratio=2.0))
    expected = smooth_calibration(1.0, 2.0)
    loaded = store.load("s")
    assert loaded is not None and loaded.calibration == pytest.approx(expected)
    store.save("s", SessionState(plan={}, calibration=0.5))  # a turn that loaded earlier
    loaded = store.load("s")
    assert loaded is not None and loaded.calibration == pytest.approx(expected)
    store.observe("s", Observed(ratio=float("nan")))
    store.observe("s", Observed(ratio=-1.0))
    assert store.load("s") is not None
    assert store.load("s").calibration == pytest.approx(expected)  # type: ignore[union-attr]


def test_a_session_s_bill_is_added_to_in_the_server_and_a_save_keeps_it(
    store: RedisStateStore,
) -> None:
    turn = SessionState(plan={})
    store.save("s", turn)
    store.observe("s", Observed(billed=1000.0, spared=250.0))
    store.observe("s", Observed(ratio=1.5, billed=500.5, spared=-1200.0))
    store.observe("s", Observed(billed=float("nan")))  # ignored
    store.save("s", turn)  # a turn that loaded earlier
    loaded = store.load("s")
    assert loaded is not None
    assert loaded.billed == pytest.approx(1500.5) and loaded.spared == pytest.approx(-950.0)
    store.observe("fresh", Observed(spared=-5.0))  # a session whose first answer comes first
    fresh = store.load("fresh")
    assert fresh is not None and fresh.spared == -5.0 and fresh.billed is None


def test_the_cache_reach_is_blended_in_the_server_and_a_save_keeps_it(
    store: RedisStateStore,
) -> None:
    turn = SessionState(plan={}, reach=0.9)  # a first reach is stored by the save that has it
    store.save("s", turn)
    store.observe("s", Observed(ratio=2.0, reach=0.1))
    store.save("s", turn)  # a turn that loaded earlier
    loaded = store.load("s")
    assert loaded is not None and loaded.reach == pytest.approx(0.5)
    assert loaded.calibration == pytest.approx(2.0)
    store.observe("s", Observed(reach=-2.0))  # clamped: none of it
    assert store.load("s").reach == pytest.approx(0.25)  # type: ignore[union-attr]
    store.observe("fresh", Observed(reach=0.0))
    fresh = store.load("fresh")
    assert fresh is not None and fresh.reach == 0.0 and fresh.plan == {}


def test_a_turn_s_cache_read_is_swapped_in_the_server(store: RedisStateStore) -> None:
    assert store.observe("s", Observed(cached=1000)) is None
    turn = store.load("s")
    assert turn is not None and turn.cached == 1000
    assert store.observe("s", Observed(ratio=1.5, reach=0.5, cached=300)) == 1000
    store.save("s", turn)  # a turn that loaded before
    loaded = store.load("s")
    assert loaded is not None and loaded.cached == 300 and loaded.reach == 0.5
    assert store.observe("s", Observed(ratio=1.5)) is None  # no read: nothing swapped
    assert store.observe("s", Observed(cached=0)) == 300


def test_where_the_cache_marker_went_is_kept_apart_and_a_save_keeps_it(
    store: RedisStateStore,
) -> None:
    turn = SessionState(plan={}, mark={"m": 1, "b": 0, "f": "00"})
    store.save("s", turn)
    assert store.load("s").mark is None  # type: ignore[union-attr]  # only observe writes it
    mark = {"m": 6, "b": 0, "f": "ab" * 16}
    store.observe("s", Observed(mark=mark))
    store.save("s", turn)
    loaded = store.load("s")
    assert loaded is not None and loaded.mark == mark
    store.observe("fresh", Observed(mark=mark))
    assert store.load("fresh") == SessionState(plan={}, mark=mark)


def test_concurrent_calibrations_all_land(store: RedisStateStore) -> None:
    """Forty concurrent updates of the same ratio from eight threads: every one is blended."""
    store.observe("s", Observed(ratio=2.0))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: store.observe("s", Observed(ratio=4.0)), range(40)))
    value: float | None = 2.0
    for _ in range(40):
        value = smooth_calibration(value, 4.0)
    loaded = store.load("s")
    assert loaded is not None and loaded.calibration == pytest.approx(value)


def test_a_tainted_record_lives_as_long_as_the_outputs(
    store: RedisStateStore, redis_server: RedisServer
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    store.save("clean", SessionState(plan={}))
    store.save("tainted", SessionState(plan={}, taint={"tainted": True, "count": 1}))
    clean = client.pttl(f"{store.prefix}s:clean")
    tainted = client.pttl(f"{store.prefix}s:tainted")
    assert 0 < clean <= 30 * DAY * 1000
    assert tainted > 59 * DAY * 1000


def test_leases_exclude_and_expire(store: RedisStateStore) -> None:
    token = store.lease("s", 60_000)
    assert token
    assert store.lease("s", 60_000) is None
    store.release("s", "not-the-token")
    assert store.lease("s", 60_000) is None
    store.release("s", token)
    again = store.lease("s", 50)
    assert again
    for _ in range(100):
        if store.lease("s", 60_000):
            break
        asyncio.run(asyncio.sleep(0.02))
    else:
        pytest.fail("an expired lease was never taken again")


def test_a_dead_server_fails_open_and_is_counted() -> None:
    errors: list[str] = []
    store = dead_store(errors)
    assert store.fetch("s") == (None, False)
    store.save("s", SessionState(plan={}))
    store.observe("s", Observed(ratio=1.5))
    assert store.lease("s", 1000) == ""
    assert store.recent(5) == []
    assert not store.ping()
    assert errors == ["load", "save", "observe", "lease", "recent", "ping"]


def test_a_stuck_server_is_a_failing_one(store: RedisStateStore, redis_server: RedisServer) -> None:
    """A server that stops answering (CLIENT PAUSE) costs a socket timeout, not a hang."""
    store.save("s", SessionState(plan={}))
    redis_server.pause(1.5)
    try:
        assert store.fetch("s") == (None, False)
    finally:
        asyncio.run(asyncio.sleep(1.6))
    assert store.fetch("s")[1]


def test_urls() -> None:
    assert split_prefix("redis://h:6379/0?prefix=x:&ssl_cert_reqs=none") == (
        "redis://h:6379/0?ssl_cert_reqs=none",
        "x:",
    )
    assert split_prefix("redis://h/0") == ("redis://h/0", "factrail:")
    secret = "pw-" + uuid.uuid4().hex
    assert secret not in redact_url(f"redis://user:{secret}@h:6379/0")
    assert secret not in redact_url(f"redis://:{secret}@h:6379/0")


# -- two replicas on one server ----------------------------------------------------------------


def replica(url: str, outputs: Path) -> SessionCompactor:
    options = engine_options(
        trigger_tokens=16000, trigger_percent=0.0, rearm_tokens=0, price_profile="none"
    )
    return SessionCompactor(
        options,
        state=open_state_store(url),
        outputs=OutputStore(outputs, secret=OUTPUTS_SECRET),
        judge=RulesJudge(),
    )


async def test_a_turn_on_another_replica_reapplies_the_same_plan(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Turn N compacts on replica A; turn N+1 lands on replica B and sends the same bytes."""
    url = f"{redis_server.url}?prefix=r{uuid.uuid4().hex[:8]}:"
    a, b = replica(url, tmp_path / "out"), replica(url, tmp_path / "out")
    wire = chat(30)
    first = await a.compact("s", openai_chat.parse(wire))
    assert first.outcome == "compacted"
    later = [*wire, {"role": "assistant", "content": "Reading."}, {"role": "user", "content": "ok"}]
    second = await b.compact("s", openai_chat.parse(later))
    assert second.outcome == "reapplied"
    assert second.document[: len(wire)] == first.document


async def test_a_turn_elsewhere_holds_the_session(
    redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another replica holds the session's lease, a turn neither compacts nor writes;
    once released, the next turn compacts."""
    monkeypatch.setattr(step, "LEASE_WAIT_S", 0.2)
    url = f"{redis_server.url}?prefix=l{uuid.uuid4().hex[:8]}:"
    a = replica(url, tmp_path / "out")
    other = open_state_store(url)
    token = other.lease("s", 60_000)
    assert token
    held = await a.compact("s", openai_chat.parse(chat(30)))
    assert held.outcome == "passthrough" and held.document is None
    assert other.load("s") is None
    other.release("s", token)
    free = await a.compact("s", openai_chat.parse(chat(30)))
    assert free.outcome == "compacted"


async def test_a_dead_store_compacts_by_the_rules_and_fences(tmp_path: Path) -> None:
    """The store down: compaction fails open (it still runs), the fence fails closed
    (the session is unproven, so a model judge would not be asked)."""
    errors: list[str] = []
    options = engine_options(
        trigger_tokens=16000, trigger_percent=0.0, rearm_tokens=0, price_profile="none"
    )
    compactor = SessionCompactor(
        options, state=dead_store(errors), outputs=None, judge=RulesJudge()
    )
    result = await compactor.compact("s", openai_chat.parse(chat(30)))
    assert result.outcome == "compacted"
    assert "load" in errors and "lease" in errors


def test_response_links_are_shared(store: RedisStateStore) -> None:
    assert store.linked("resp_1") is None
    store.link("resp_1", "c-abc")
    assert store.linked("resp_1") == "c-abc"
