"""A session's turn log and the figures the gateway's pages and shadow mode read: the turns
`observe` counts and logs, the projected bill, the forced / cold / shadow compaction counts. On
the memory, SQLite and Redis (a real server on loopback) stores."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis

from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.redis_state import RedisStateStore
from factrail.stores.schema import STATE_SCHEMA, TURN_SCHEMA
from factrail.stores.sqlite_state import SqliteStateStore
from factrail.stores.state import (
    MAX_TURNS,
    OPERATIONS,
    Observed,
    SessionState,
    StateStore,
    decode_state,
    encode_state,
)
from tests.redis_server import RedisServer

DAY = 24 * 60 * 60
KINDS = ("memory", "sqlite", "redis")


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


Opener = Callable[..., StateStore]


@pytest.fixture(params=KINDS)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens a store of the parametrised kind (`max_turns`, `clock` passed through); Redis
    stores get a key prefix of their own on the shared server."""
    opened: list[StateStore] = []

    def open_store(**options: Any) -> StateStore:
        store: StateStore
        if request.param == "memory":
            store = MemoryStateStore(**options)
        elif request.param == "sqlite":
            store = SqliteStateStore(tmp_path / f"{len(opened)}.db", **options)
        else:
            server: RedisServer = request.getfixturevalue("redis_server")
            url = f"{server.url}?prefix=t{uuid.uuid4().hex[:8]}:"
            store = RedisStateStore(url, **options)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


def turn(n: int) -> dict[str, Any]:
    """A turn record as the gateway might write one."""
    return {"at_ms": 1_000 + n, "n": n, "outcome": "passthrough", "tokens": 900 * n, "ok": True}


def test_turns_are_logged_in_order_and_counted(opener: Opener) -> None:
    store = opener()
    assert store.turns("s") == []
    for n in range(3):
        store.observe("s", Observed(turn=turn(n)))
    store.observe("s", Observed(ratio=1.5))  # no turn: neither logged nor counted
    assert store.turns("s") == [turn(0), turn(1), turn(2)]
    assert store.turns("s", limit=2) == [turn(1), turn(2)]
    assert store.turns("s", limit=0) == []
    assert store.turns("other") == []
    loaded = store.load("s")
    assert loaded is not None and loaded.turns == 3
    assert loaded.calibration == pytest.approx(1.5)


def test_a_turn_alone_creates_the_session(opener: Opener) -> None:
    store = opener()
    store.observe("s", Observed(turn=turn(1)))
    loaded = store.load("s")
    assert loaded is not None and loaded.turns == 1 and loaded.plan == {}
    assert store.turns("s") == [turn(1)]


def test_the_log_keeps_the_newest_max_turns(opener: Opener) -> None:
    assert opener().max_turns == MAX_TURNS == 1000  # type: ignore[attr-defined]
    store = opener(max_turns=5)
    for n in range(12):
        store.observe("s", Observed(turn=turn(n)))
    assert store.turns("s") == [turn(n) for n in range(7, 12)]
    assert store.turns("s", limit=100) == [turn(n) for n in range(7, 12)]
    loaded = store.load("s")
    assert loaded is not None and loaded.turns == 12  # every answered turn is counted


def test_a_save_never_undoes_the_turns_or_the_projected_bill(opener: Opener) -> None:
    """A turn that loaded before other answers landed saves its state: the count, the
    projected bill and the log those answers wrote stay."""
    store = opener()
    store.save("s", SessionState(plan={}))
    stale = store.load("s")
    assert stale is not None and stale.turns == 0 and stale.projected_billed is None
    store.observe("s", Observed(projected_billed=1000.0, projected_spared=250.0, turn=turn(1)))
    store.observe("s", Observed(projected_billed=500.5, projected_spared=-50.0, turn=turn(2)))
    store.observe("s", Observed(projected_billed=float("nan"), projected_spared=float("inf")))
    stale.compactions, stale.shadow = 1, 1
    store.save("s", stale)
    saved = store.load("s")
    assert saved is not None and (saved.compactions, saved.shadow) == (1, 1)
    assert saved.turns == 2
    assert saved.projected_billed == pytest.approx(1500.5)
    assert saved.projected_spared == pytest.approx(200.0)
    assert saved.billed is None and saved.spared is None  # the real bill is apart
    assert store.turns("s") == [turn(1), turn(2)]
    store.save("s", SessionState(plan={}, turns=99, projected_billed=1.0))  # not the step's
    again = store.load("s")
    assert again is not None and again.turns == 2
    assert again.projected_billed == pytest.approx(1500.5)


def test_the_compaction_counts_round_trip(opener: Opener) -> None:
    store = opener()
    state = SessionState(plan={}, compactions=7, bets=2, forced=3, cold=1, shadow=4)
    store.save("s", state)
    loaded = store.load("s")
    assert loaded is not None
    assert (loaded.compactions, loaded.bets, loaded.forced, loaded.cold, loaded.shadow) == (
        7, 2, 3, 1, 4
    )  # fmt: skip
    store.observe("s", Observed(ratio=1.2, turn=turn(1)))  # observe leaves them as they are
    observed = store.load("s")
    assert observed is not None and (observed.forced, observed.cold, observed.shadow) == (3, 1, 4)


def test_an_unserialisable_turn_is_counted_not_logged(opener: Opener) -> None:
    store = opener()
    store.observe("s", Observed(turn=turn(1)))
    store.observe("s", Observed(billed=10.0, turn={"at": object()}))
    loaded = store.load("s")
    assert loaded is not None and loaded.turns == 2 and loaded.billed == 10.0
    assert store.turns("s") == [turn(1)]


def test_records_are_versioned_and_unknown_versions_skipped(
    opener: Opener, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Each stored record carries `v` (`TURN_SCHEMA`); one of a version this reader does not
    know (a newer writer's) or an unreadable one is left out."""
    store = opener()
    store.observe("s", Observed(turn=turn(1)))
    newer = orjson.dumps({**turn(2), "v": TURN_SCHEMA + 1})
    if isinstance(store, SqliteStateStore):
        with sqlite3.connect(store.path) as conn:
            (record,) = conn.execute("SELECT record FROM turns WHERE key = 's'").fetchone()
            conn.execute("INSERT INTO turns VALUES ('s', 2, ?), ('s', 3, ?)", (newer, b"{bad"))
        conn.close()
    elif isinstance(store, RedisStateStore):
        server: RedisServer = request.getfixturevalue("redis_server")
        client = redis.Redis.from_url(server.url)
        record = client.lrange(f"{store.prefix}turns:s", 0, -1)[0]
        client.rpush(f"{store.prefix}turns:s", newer, b"{bad")
        client.close()
    else:
        pytest.skip("the memory store's log is not reachable from outside")
    assert orjson.loads(record) == {**turn(1), "v": TURN_SCHEMA}
    store.observe("s", Observed(turn=turn(3)))
    assert store.turns("s") == [turn(1), turn(3)]


def test_a_record_without_the_new_fields_decodes_with_their_defaults() -> None:
    """The fields are additive to version 2: a record written before them reads with the
    counts not counted (None once it has compactions, as `bets` in version 1)."""
    assert STATE_SCHEMA == 2
    state = SessionState(plan={}, compactions=2, bets=1, forced=1, cold=0, shadow=1, turns=4)
    state.projected_billed, state.projected_spared = 12.5, -3.0
    assert decode_state(encode_state(state)) == state
    raw = orjson.loads(encode_state(state))
    for name in ("forced", "cold", "shadow", "turns", "projected_billed", "projected_spared"):
        del raw[name]
    old = decode_state(orjson.dumps(raw))
    assert old is not None and (old.compactions, old.bets) == (2, 1)
    assert (old.forced, old.cold, old.shadow, old.turns) == (None, None, 0, 0)
    assert old.projected_billed is None and old.projected_spared is None
    raw["compactions"] = 0
    fresh = decode_state(orjson.dumps(raw))
    assert fresh is not None and (fresh.forced, fresh.cold) == (0, 0)
    nulls = decode_state(orjson.dumps(raw | {"compactions": 3, "forced": None, "cold": 2}))
    assert nulls is not None and (nulls.forced, nulls.cold) == (None, 2)
    bad = decode_state(orjson.dumps(raw | {"turns": -1, "shadow": "x", "projected_billed": "y"}))
    assert bad is not None and (bad.turns, bad.shadow, bad.projected_billed) == (0, 0, None)


def test_a_failing_store_gives_no_turns_and_counts_the_failure(tmp_path: Path) -> None:
    assert "turns" in OPERATIONS
    blocker = tmp_path / "file"
    blocker.write_text("x")
    errors: list[str] = []
    sqlite = SqliteStateStore(blocker / "state.db", on_error=errors.append)
    assert sqlite.turns("s") == []
    redis_store = RedisStateStore("redis://127.0.0.1:9/0", on_error=errors.append)
    redis_store.observe("s", Observed(turn=turn(1)))
    assert redis_store.turns("s") == []
    assert errors == ["turns", "observe", "turns"]


def test_sqlite_deletes_a_session_s_turns_with_it(tmp_path: Path) -> None:
    """Past the TTL, past `max_sessions`: the sessions the prune deletes take their turn logs;
    a session that starts over past the TTL starts an empty log."""
    clock = Clock()
    path = tmp_path / "s.db"
    store = SqliteStateStore(path, max_sessions=2, prune_every=1, clock=clock)
    store.observe("old", Observed(turn=turn(0)))
    store.observe("again", Observed(turn=turn(0)))
    clock.now += 31 * DAY
    assert store.turns("old") == [] and store.turns("again") == []  # hidden past the TTL
    store.observe("again", Observed(turn=turn(1)))
    assert store.turns("again") == [turn(1)]
    again = store.load("again")
    assert again is not None and again.turns == 1
    for n in range(3):
        clock.now += 1
        store.observe(f"s{n}", Observed(turn=turn(n)))
    store.save("s2", SessionState(plan={}))  # prunes: "old" past the TTL, then the oldest
    with sqlite3.connect(path) as conn:
        logged = {key for (key,) in conn.execute("SELECT DISTINCT key FROM turns")}
        sessions = {key for (key,) in conn.execute("SELECT key FROM sessions")}
    conn.close()
    assert sessions == {"s1", "s2"} and logged == sessions
    store.close()


def test_redis_turn_logs_expire_with_their_session(redis_server: RedisServer) -> None:
    """The log lives as long as the session's other keys: the TTL after an answer, as long as
    the saved outputs once a save finds the session tainted."""
    url = f"{redis_server.url}?prefix=t{uuid.uuid4().hex[:8]}:"
    store = RedisStateStore(url, taint_keep_seconds=60 * DAY)
    client = redis.Redis.from_url(redis_server.url)
    log = f"{store.prefix}turns:s"
    store.observe("s", Observed(turn=turn(1)))
    assert 29 * DAY * 1000 < client.pttl(log) <= 30 * DAY * 1000
    store.save("s", SessionState(plan={}, taint={"tainted": True, "count": 1}))
    assert client.pttl(log) > 59 * DAY * 1000
    client.close()
    short = RedisStateStore(url, ttl_seconds=0.05)
    short.observe("brief", Observed(billed=1.0, turn=turn(1)))
    assert short.turns("brief") == [turn(1)]
    time.sleep(0.2)
    assert short.turns("brief") == [] and short.load("brief") is None
    for each in (store, short):
        each.close()
