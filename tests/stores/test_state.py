"""Session state: encoding, remembered answers, the memory and SQLite stores, store URLs."""

from __future__ import annotations

import logging
import sqlite3
import stat
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from factrail.core.plan import CallAnswer
from factrail.core.reapply import PlanEntry, text_hash
from factrail.stores import open_state_store, state_url
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.sqlite_state import SqliteStateStore
from factrail.stores.state import (
    MAX_ANSWERS,
    Observed,
    SessionState,
    StateStore,
    StoreConfigError,
    decode_state,
    encode_state,
    known_answers,
    remember_answers,
    smooth_calibration,
)

DAY = 24 * 60 * 60


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def sample_state() -> SessionState:
    return SessionState(
        plan={
            "call_1": PlanEntry(text_hash("original"), "[factrail omitted 8 chars]"),
            "call_2": PlanEntry(text_hash("other"), "reduced ✓", {"path": "a.py", "n": [1, 2]}),
        },
        baseline_tokens=1234,
        compactions=2,
        taint={"tainted": True, "count": 1, "sample": "Skill", "at": 5},
        calibration=1.1,
        answers={"call_1|m|v1": {"keepCall": 0.9, "keepResult": 0.25}},
    )


def test_text_hash_is_stable_and_short() -> None:
    assert text_hash("abc") == text_hash("abc")
    assert text_hash("abc") != text_hash("abd")
    assert len(text_hash("x")) == 32
    assert text_hash("lone \ud800") != text_hash("lone ")


def test_encode_decode_round_trip() -> None:
    state = sample_state()
    assert decode_state(encode_state(state)) == state


@pytest.mark.parametrize(
    "blob",
    [b"", b"not json", b"[]", b'{"plan": []}', b'{"plan": {"a": {"h": 1, "t": "x"}}}'],
)
def test_decode_rejects_invalid_blobs(blob: bytes) -> None:
    assert decode_state(blob) is None


def test_decode_drops_invalid_answers_and_fields() -> None:
    blob = (
        b'{"plan": {}, "compactions": "x", "calibration": true, "answers":'
        b' {"a": {"keepCall": 0.5, "keepResult": 1}, "b": {"keepCall": 2, "keepResult": 0},'
        b' "c": {"keepCall": 0.5}, "d": 3}}'
    )
    state = decode_state(blob)
    assert state is not None
    assert state.answers == {"a": {"keepCall": 0.5, "keepResult": 1.0}}
    assert state.compactions == 0 and state.calibration is None


def test_bets_are_kept_and_a_version_1_record_without_them_has_none_counted() -> None:
    counted = SessionState(plan={}, compactions=3, bets=2)
    assert decode_state(encode_state(counted)) == counted
    uncounted = decode_state(b'{"plan": {}, "compactions": 2}')
    assert uncounted is not None and uncounted.compactions == 2 and uncounted.bets is None
    fresh = decode_state(b'{"plan": {}}')
    assert fresh is not None and fresh.bets == 0


def test_remember_answers_orders_reappends_and_bounds() -> None:
    state = SessionState(plan={})
    remember_answers(state, "m|v1", {"b": CallAnswer(1, 0), "a": CallAnswer(0, 0)})
    remember_answers(state, "m|v1", {"a": CallAnswer(1, 1), "bad": CallAnswer(5, 0)})
    assert list(state.answers) == ["b|m|v1", "a|m|v1"]
    assert state.answers["a|m|v1"] == {"keepCall": 1.0, "keepResult": 1.0}
    many = {f"k{i:05d}": CallAnswer(0.5, 0.5) for i in range(MAX_ANSWERS)}
    remember_answers(state, "m|v1", many)
    assert len(state.answers) == MAX_ANSWERS
    assert "b|m|v1" not in state.answers and "a|m|v1" not in state.answers
    assert next(iter(state.answers)) == "k00000|m|v1"


def test_known_answers_are_those_of_the_same_judge_and_prompt() -> None:
    state = SessionState(plan={})
    remember_answers(state, "m|v1", {"a": CallAnswer(0.9, 0.25)})
    remember_answers(state, "m|v2", {"b": CallAnswer(0.1, 0.1)})
    remember_answers(state, "other|v1", {"c": CallAnswer(0.1, 0.1)})
    assert known_answers(state, "m|v1") == {"a": CallAnswer(0.9, 0.25)}
    assert known_answers(state, "m|v2") == {"b": CallAnswer(0.1, 0.1)}
    assert known_answers(state, "x|v1") == {}


def test_smooth_calibration() -> None:
    assert smooth_calibration(None, 1.5) == 1.5
    assert smooth_calibration(1.0, 2.0) == pytest.approx(1.3)
    assert smooth_calibration(1.0, float("nan")) == 1.0
    assert smooth_calibration(None, -1.0) is None
    assert smooth_calibration(None, 100.0) == 4.0


StoreFactory = Callable[[Path, Clock], StateStore]
FACTORIES: dict[str, StoreFactory] = {
    "memory": lambda _path, clock: MemoryStateStore(clock=clock),
    "sqlite": lambda path, clock: SqliteStateStore(path / "state.db", clock=clock),
}


@pytest.mark.parametrize("kind", sorted(FACTORIES))
def test_store_contract(kind: str, tmp_path: Path) -> None:
    clock = Clock()
    store = FACTORIES[kind](tmp_path, clock)
    assert store.ping()
    assert store.load("s") is None
    state = sample_state()
    store.save("s", state)
    loaded = store.load("s")
    assert loaded is not None
    assert loaded.updated_ms == int(clock.now * 1000)
    assert loaded.plan == state.plan and loaded.answers == state.answers
    assert loaded is not state
    loaded.plan.clear()  # the caller's copy is its own
    reloaded = store.load("s")
    assert reloaded is not None and reloaded.plan == state.plan
    store.observe("s", Observed(ratio=2.0))
    store.observe("fresh", Observed(ratio=0.8))
    calibrated = store.load("s")
    assert calibrated is not None and calibrated.calibration == pytest.approx(1.37)
    assert calibrated.plan == state.plan
    fresh = store.load("fresh")
    assert fresh is not None and fresh.calibration == 0.8 and fresh.plan == {}
    store.close()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_sqlite_file_is_private_and_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "new" / "state.db"
    store = SqliteStateStore(path)
    store.save("s", sample_state())
    wal = path.with_name("state.db-wal")
    assert wal.exists() and mode(wal) == 0o600  # WAL mode, sidecar as private as the file
    store.close()
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    reopened = SqliteStateStore(path)
    assert reopened.load("s") is not None
    reopened.close()


def test_sqlite_ttl_hides_and_prunes_old_sessions(tmp_path: Path) -> None:
    clock = Clock()
    store = SqliteStateStore(tmp_path / "s.db", ttl_seconds=30 * DAY, prune_every=1, clock=clock)
    store.save("old", sample_state())
    clock.now += 31 * DAY
    assert store.load("old") is None
    store.save("new", sample_state())
    assert store.load("new") is not None
    clock.now -= 31 * DAY  # even seen from the past, "old" is gone: it was pruned
    assert store.load("old") is None
    store.close()


def test_sqlite_keeps_at_most_max_sessions(tmp_path: Path) -> None:
    clock = Clock()
    store = SqliteStateStore(tmp_path / "s.db", max_sessions=5, prune_every=1, clock=clock)
    for i in range(12):
        clock.now += 1
        store.save(f"s{i}", SessionState(plan={}))
    present = [i for i in range(12) if store.load(f"s{i}") is not None]
    assert present == [7, 8, 9, 10, 11]
    store.close()


def test_sqlite_prunes_only_every_nth_save(tmp_path: Path) -> None:
    clock = Clock()
    store = SqliteStateStore(tmp_path / "s.db", max_sessions=2, prune_every=4, clock=clock)
    for i in range(4):
        clock.now += 1
        store.save(f"s{i}", SessionState(plan={}))
    assert [store.load(f"s{i}") is not None for i in range(4)] == [True] * 4
    clock.now += 1
    store.save("s4", SessionState(plan={}))  # the 5th save prunes
    assert [store.load(f"s{i}") is not None for i in range(5)] == [False] * 3 + [True] * 2
    store.close()


def test_sqlite_under_concurrent_threads(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.db"
    stores = [SqliteStateStore(path), SqliteStateStore(path)]  # two "processes", shared threads
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        store = stores[n % 2]
        session = f"s{n % 7}"
        try:
            for i in range(15):
                state = SessionState(plan={f"c{n}-{i}": PlanEntry(text_hash(str(i)), "r")})
                store.save(session, state)
                loaded = store.load(session)
                assert loaded is not None and len(loaded.plan) == 1
                store.observe(session, Observed(ratio=1.0))
        except BaseException as error:
            with lock:
                errors.append(error)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(32)))
    assert errors == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    for i in range(7):
        final = stores[0].load(f"s{i}")
        assert final is not None and final.calibration == pytest.approx(1.0)
    for store in stores:
        store.close()


def test_sqlite_corrupt_file_fails_open(tmp_path: Path) -> None:
    path = tmp_path / "bad.db"
    path.write_bytes(b"this is not a database" * 100)
    store = SqliteStateStore(path)
    assert store.load("s") is None
    store.save("s", sample_state())  # logged and swallowed
    store.observe("s", Observed(ratio=1.2))
    assert not store.ping()
    store.close()


def test_sqlite_unusable_path_fails_open(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    store = SqliteStateStore(blocker / "state.db")
    store.save("s", sample_state())
    assert store.load("s") is None
    assert not store.ping()


def test_sqlite_unserialisable_state_is_swallowed(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "s.db")
    store.save("s", SessionState(plan={}, taint={"at": object()}))
    assert store.load("s") is None
    assert store.ping()
    store.close()


def test_sqlite_in_memory(tmp_path: Path) -> None:
    store = open_state_store("sqlite://:memory:")
    assert isinstance(store, SqliteStateStore)
    store.save("s", sample_state())
    assert store.load("s") is not None


def test_open_state_store_urls(tmp_path: Path) -> None:
    assert isinstance(open_state_store("memory://"), MemoryStateStore)
    store = open_state_store(f"sqlite://{tmp_path}/x.db")
    assert isinstance(store, SqliteStateStore) and store.path == f"{tmp_path}/x.db"


@pytest.mark.parametrize("url", ["sqlite://relative.db", "nope", "ftp://x", "sqlite:///a.db?x=1"])
def test_open_state_store_rejects_bad_urls(url: str) -> None:
    with pytest.raises(StoreConfigError):
        open_state_store(url)


def test_open_state_store_opens_redis_urls_lazily() -> None:
    """A Redis URL names the shared store; nothing connects until the first call."""
    from factrail.stores.redis_state import RedisStateStore

    for url in ("redis://localhost:6379/0", "rediss://h:6380/1", "unix:///run/redis.sock"):
        store = open_state_store(url)
        assert isinstance(store, RedisStateStore)
        store.close()
    with pytest.raises(StoreConfigError, match="redis://"):
        open_state_store("mongodb://h/0")


def test_state_url() -> None:
    assert state_url("memory://", {"XDG_DATA_HOME": "/d"}) == "memory://"
    assert state_url("", {"XDG_DATA_HOME": "/d"}) == "sqlite:///d/factrail/state.db"
    assert state_url("", {}) == "memory://"


def test_sqlite_tries_a_locked_database_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process setting the database up at the same moment can answer "locked" at once;
    the store tries again on a new connection instead of losing the save."""

    class Contended(SqliteStateStore):
        refusals = 2

        def _connect(self) -> sqlite3.Connection:
            if self.refusals:
                self.refusals -= 1
                raise sqlite3.OperationalError("database is locked")
            return super()._connect()

    store = Contended(tmp_path / "s.db")
    store.save("s", sample_state())
    assert store.load("s") is not None
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    store.refusals = 3  # past the retries: logged, not raised
    store.close()
    store.save("t", sample_state())
    assert any("locked" in r.getMessage() for r in caplog.records)
    store.close()


@pytest.mark.parametrize("kind", sorted(FACTORIES))
def test_a_turn_never_undoes_a_calibration_that_landed_after_its_load(
    kind: str, tmp_path: Path
) -> None:
    store = FACTORIES[kind](tmp_path, Clock())
    store.save("s", SessionState(plan={}, calibration=1.0))
    turn = store.load("s")  # a turn starts
    assert turn is not None
    store.observe("s", Observed(ratio=2.0))  # the previous answer's usage arrives meanwhile
    turn.compactions = 3
    store.save("s", turn)  # the turn ends with the calibration it loaded
    saved = store.load("s")
    assert saved is not None and saved.compactions == 3
    assert saved.calibration == pytest.approx(1.3)


@pytest.mark.parametrize("kind", sorted(FACTORIES))
def test_a_turn_s_cache_read_replaces_the_last_and_is_returned(kind: str, tmp_path: Path) -> None:
    """`observe` swaps in the turn's cache read and returns the one before (what a cache
    break is judged against, whichever worker served that turn); a save keeps it."""
    store = FACTORIES[kind](tmp_path, Clock())
    assert store.observe("s", Observed(cached=1000)) is None
    turn = store.load("s")
    assert turn is not None and turn.cached == 1000
    assert store.observe("s", Observed(ratio=1.5, cached=300)) == 1000
    store.save("s", turn)  # a turn that loaded before
    assert store.observe("s", Observed(ratio=1.5)) is None  # no read: nothing replaced
    assert store.observe("s", Observed(cached=0)) == 300
    assert store.load("s").cached == 0  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", sorted(FACTORIES))
def test_where_the_cache_marker_went_is_kept_and_a_save_keeps_it(kind: str, tmp_path: Path) -> None:
    store = FACTORIES[kind](tmp_path, Clock())
    store.save("s", SessionState(plan={}))
    turn = store.load("s")
    mark = {"m": 6, "b": 0, "f": "ab" * 16}
    assert store.observe("s", Observed(mark=mark)) is None
    assert turn is not None
    store.save("s", turn)  # a turn that loaded before
    loaded = store.load("s")
    assert loaded is not None and loaded.mark == mark


@pytest.mark.parametrize("kind", sorted(FACTORIES))
def test_a_session_s_cache_reach_is_blended_and_kept_by_saves(kind: str, tmp_path: Path) -> None:
    """The reach a compaction turn measured prices the session's next compactions on every
    worker: the store averages each measurement with the last, and a turn's save (which
    loaded before the measurement landed) never undoes it."""
    store = FACTORIES[kind](tmp_path, Clock())
    store.save("s", SessionState(plan={}))
    turn = store.load("s")
    assert turn is not None and turn.reach is None
    store.observe("s", Observed(reach=0.2))
    store.observe("s", Observed(ratio=2.0, reach=1.0))  # both in one answer
    store.observe("s", Observed(reach=float("nan")))  # ignored
    store.save("s", turn)
    saved = store.load("s")
    assert saved is not None and saved.reach == pytest.approx(0.6)
    assert saved.calibration == pytest.approx(2.0)
    store.observe("s", Observed(reach=3.0))  # clamped to all of it
    assert store.load("s").reach == pytest.approx(0.8)  # type: ignore[union-attr]
    store.observe("fresh", Observed(reach=0.0))
    fresh = store.load("fresh")
    assert fresh is not None and fresh.reach == 0.0 and fresh.calibration is None


@pytest.mark.parametrize("kind", sorted(FACTORIES))
def test_a_session_s_bill_adds_up_its_answers_and_a_save_keeps_it(
    kind: str, tmp_path: Path
) -> None:
    """Each answer adds its billed tokens and what it spared to the session's bill, whichever
    worker stored it; a turn's save (loaded before those answers landed) never undoes them."""
    store = FACTORIES[kind](tmp_path, Clock())
    store.save("s", SessionState(plan={}))
    turn = store.load("s")
    assert turn is not None and turn.billed is None and turn.spared is None
    store.observe("s", Observed(billed=1000.0, spared=250.0))
    store.observe("s", Observed(billed=500.5, spared=-1200.0))  # a compaction that re-wrote
    store.observe("s", Observed(billed=float("nan"), spared=float("inf")))  # ignored
    store.save("s", turn)
    saved = store.load("s")
    assert saved is not None
    assert saved.billed == pytest.approx(1500.5) and saved.spared == pytest.approx(-950.0)
    store.observe("fresh", Observed(billed=10.0))
    fresh = store.load("fresh")
    assert fresh is not None and fresh.billed == 10.0 and fresh.spared is None


def test_a_bill_survives_encoding_and_a_bad_one_is_dropped() -> None:
    state = SessionState(plan={}, billed=12.5, spared=-3.0)
    assert decode_state(encode_state(state)) == state
    blob = encode_state(state).replace(b'"billed":12.5', b'"billed":"lots"')
    decoded = decode_state(blob)
    assert decoded is not None and decoded.billed is None and decoded.spared == -3.0


def stored_keys(path: Path) -> set[str]:
    """The keys in the database file, whatever their age (what pruning left)."""
    conn = sqlite3.connect(path)
    try:
        return {k for (k,) in conn.execute("SELECT key FROM sessions")}
    finally:
        conn.close()


def tainted() -> SessionState:
    return SessionState(plan={}, taint={"tainted": True, "count": 1, "sample": "x", "at": 1})


def test_sqlite_keeps_states_within_max_bytes_oldest_first(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "s.db"
    size = len(encode_state(SessionState(plan={}, answers={"k": {"keepCall": 0.5}})))
    store = SqliteStateStore(path, max_bytes=3 * size + size // 2, prune_every=1, clock=clock)
    for i in range(6):
        clock.now += 1
        store.save(f"s{i}", SessionState(plan={}, answers={"k": {"keepCall": 0.5}}))
    assert stored_keys(path) == {"s3", "s4", "s5"}
    store.close()


def test_sqlite_never_prunes_a_tainted_record_before_the_outputs_retention(
    tmp_path: Path,
) -> None:
    clock = Clock()
    path = tmp_path / "s.db"
    store = SqliteStateStore(
        path,
        max_sessions=2,
        ttl_seconds=10 * DAY,
        taint_keep_seconds=30 * DAY,
        prune_every=1,
        clock=clock,
    )
    store.save("fenced", tainted())
    for i in range(5):
        clock.now += 1
        store.save(f"s{i}", SessionState(plan={}))
    # the tainted record counts towards the bound, but the bound takes clean records only
    assert stored_keys(path) == {"fenced", "s4"}
    clock.now += 20 * DAY  # past the TTL, within the outputs retention
    store.save("later", SessionState(plan={}))
    assert stored_keys(path) == {"fenced", "later"}
    clock.now += 11 * DAY  # past the outputs retention: now it may go
    store.save("last", SessionState(plan={}))
    assert stored_keys(path) == {"last"}
    store.close()


def test_open_state_store_passes_the_bounds(tmp_path: Path) -> None:
    store = open_state_store(
        f"sqlite://{tmp_path / 's.db'}", max_bytes=1234, taint_keep_seconds=5 * DAY
    )
    assert isinstance(store, SqliteStateStore)
    assert store.max_bytes == 1234 and store.taint_keep_ms == 5 * DAY * 1000
    store.close()


def test_a_tainted_record_is_read_past_the_ttl_while_its_outputs_are_kept(tmp_path: Path) -> None:
    """Outputs kept longer than the state TTL: the taint is still loaded until they expire;
    a clean record past the TTL is not."""
    clock = Clock()
    store = SqliteStateStore(
        tmp_path / "s.db", ttl_seconds=DAY, taint_keep_seconds=10 * DAY, clock=clock
    )
    store.save("tainted", SessionState(plan={}, taint={"tainted": True, "count": 1}))
    store.save("clean", SessionState(plan={}))
    clock.now += 5 * DAY
    loaded, answered = store.fetch("tainted")
    assert answered and loaded is not None and loaded.taint is not None
    assert store.fetch("clean") == (None, True)
    clock.now += 6 * DAY
    assert store.fetch("tainted") == (None, True)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_response_links(kind: str, tmp_path: Path) -> None:
    """Which session a Responses id answered, for every process on the store."""
    clock = Clock()
    store: StateStore = (
        MemoryStateStore(clock)
        if kind == "memory"
        else SqliteStateStore(tmp_path / "s.db", ttl_seconds=DAY, clock=clock)
    )
    assert store.linked("resp_1") is None
    store.link("resp_1", "c-abc")
    assert store.linked("resp_1") == "c-abc"
    if kind == "sqlite":
        other = SqliteStateStore(tmp_path / "s.db", ttl_seconds=DAY, clock=clock)
        assert other.linked("resp_1") == "c-abc"
        clock.now += 2 * DAY
        assert other.linked("resp_1") is None
