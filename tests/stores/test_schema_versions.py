"""Schema versions of the persisted records (`factrail.stores.schema`): each kind is written
with its version; a version-1 record (no version, as the version-1 writers laid it out) is read;
a version no reader knows is a miss, except that a session or taint record of one keeps the
session fenced. On SQLite, Redis and the memory store."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis

from factrail.core.formats import openai_chat
from factrail.core.plan import Decisions, Plan
from factrail.core.reapply import PlanEntry, text_hash
from factrail.judges.rules import RulesJudge
from factrail.policy.taint import TAINT_SCHEMA, TaintScan, holds_taint, merge_taint, taint_write
from factrail.session import SessionCompactor
from factrail.session.inspect import report
from factrail.session.judging import decision_record
from factrail.stores.decisions import DecisionLog
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.redis_state import RedisStateStore
from factrail.stores.schema import (
    ANSWERS_SCHEMA,
    COMPACTION_SCHEMA,
    DECISION_SCHEMA,
    FIGURE_SCHEMA,
    LINK_SCHEMA,
    PLAN_SCHEMA,
    STATE_SCHEMA,
)
from factrail.stores.sqlite_state import SqliteStateStore
from factrail.stores.state import (
    Observed,
    SessionState,
    StateStore,
    decode_state,
    encode_state,
    kept_as_tainted,
)
from tests.options import engine_options, plan_options
from tests.redis_server import RedisServer
from tests.test_session import CountingJudge, chat

EMAIL = "mcp__email-gateway__ask_email"
HASH = text_hash("the original output")


def v1_history() -> dict[str, Any]:
    """A compaction record as the version-1 writer laid it out at its sparest (no `decision`,
    `turns`, `window`; a briefed result without `arguments_whole`)."""
    result = {"id": "c1", "tool": "Bash", "original_chars": 900, "kept_chars": 90}
    result |= {"note": "", "whole": None, "arguments_briefed": True}
    record = {"at_ms": 1_000, "line": "soft", "judge": "rules", "reason": "rules"}
    record |= {"trigger": 16_000, "tokens_before": 20_000, "tokens_after": 12_000}
    record |= {"first_changed_message": 3, "invalidated_tokens": 9_000}
    return record | {"saved_tokens_per_turn": 8_000, "results": [result], "results_total": 1}


def v1_record(now_ms: int) -> dict[str, Any]:
    """A session record as the version-1 writer laid it out: no version, the plan and the
    answers as maps, an unversioned taint record."""
    return {
        "plan": {"c1": {"h": HASH, "t": "[reduced]", "i": {"path": "a.py"}, "r": []}},
        "baseline_tokens": 900,
        "compactions": 2,
        "bets": 1,
        "taint": {"tainted": True, "count": 1, "sample": [EMAIL], "at": 5},
        "calibration": 1.25,
        "reach": 0.5,
        "cached": 100,
        "mark": {"m": 4, "b": 0, "f": "00ff"},
        "billed": 10.0,
        "spared": 2.5,
        "answers": {"c1|jev|7": {"keepCall": 0.5, "keepResult": 0.25}},
        "updated_ms": now_ms,
        "settled": ["c1"],
        "history": [v1_history()],
        "origin": "start",
    }


@dataclass
class Raw:
    """A store with a way to put a stored session record as it is, and to read it back."""

    store: StateStore
    put: Callable[[str, bytes], None]
    get: Callable[[str], Any]


def sql(path: Path, statement: str, args: tuple[Any, ...] = ()) -> list[Any]:
    """The rows of one statement on the database file, committed, the connection closed."""
    with closing(sqlite3.connect(path)) as conn, conn:
        return conn.execute(statement, args).fetchall()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def raw(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Raw]:
    """Each store, with its session records reached as they are stored."""
    if request.param == "memory":
        memory = MemoryStateStore()
        states: dict[str, bytes] = memory._states
        yield Raw(memory, states.__setitem__, lambda key: orjson.loads(states[key]))
    elif request.param == "sqlite":
        path = tmp_path / "state.db"
        store = SqliteStateStore(path)
        assert store.ping()  # the tables are made

        def put(key: str, blob: bytes) -> None:
            now = int(time.time() * 1000)
            sql(path, "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?)", (key, now, blob))

        def get(key: str) -> Any:
            ((blob,),) = sql(path, "SELECT state FROM sessions WHERE key = ?", (key,))
            return orjson.loads(blob)

        yield Raw(store, put, get)
        store.close()
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        prefix = f"t{uuid.uuid4().hex[:8]}:"
        client = redis.Redis.from_url(server.url)
        shared = RedisStateStore(f"{server.url}?prefix={prefix}")

        def put_shared(key: str, blob: bytes) -> None:
            client.set(f"{prefix}s:{key}", blob)

        def get_shared(key: str) -> Any:
            return orjson.loads(client.get(f"{prefix}s:{key}") or b"null")

        yield Raw(shared, put_shared, get_shared)
        shared.close()
        client.close()


# -- the session record and what it holds -------------------------------------------------------


def test_a_session_record_round_trips_with_its_versions(raw: Raw) -> None:
    state = SessionState(
        plan={"c1": PlanEntry(HASH, "[reduced]", {"path": "a.py"})},
        compactions=1,
        bets=1,
        taint=taint_write(None, TaintScan(True, 1, (EMAIL,)), 5),
        answers={"c1|jev|7": {"keepCall": 0.5, "keepResult": 0.25}},
        origin="start",
    )
    raw.store.save("s", state)
    stored = raw.get("s")
    assert stored["v"] == STATE_SCHEMA
    assert stored["plan"] == {
        "v": PLAN_SCHEMA,
        "entries": {"c1": {"h": HASH, "t": "[reduced]", "i": {"path": "a.py"}, "r": []}},
    }
    assert stored["answers"] == {"v": ANSWERS_SCHEMA, "entries": state.answers}
    assert stored["taint"]["v"] == TAINT_SCHEMA
    loaded, answered = raw.store.fetch("s")
    assert answered and loaded is not None
    assert (loaded.plan, loaded.answers, loaded.taint) == (state.plan, state.answers, state.taint)
    assert (loaded.compactions, loaded.bets, loaded.origin) == (1, 1, "start")


def test_a_version_1_session_record_is_read_and_saved_at_the_current_versions(raw: Raw) -> None:
    record = v1_record(int(time.time() * 1000))
    raw.put("s", orjson.dumps(record))
    loaded, answered = raw.store.fetch("s")
    assert answered and loaded is not None
    assert loaded.plan == {"c1": PlanEntry(HASH, "[reduced]", {"path": "a.py"})}
    assert loaded.answers == {"c1|jev|7": {"keepCall": 0.5, "keepResult": 0.25}}
    assert loaded.taint == record["taint"] and holds_taint(loaded.taint)
    assert (loaded.compactions, loaded.bets, loaded.baseline_tokens) == (2, 1, 900)
    assert (loaded.calibration, loaded.reach, loaded.cached) == (1.25, 0.5, 100)
    assert (loaded.mark, loaded.billed, loaded.spared) == (record["mark"], 10.0, 2.5)
    assert (loaded.settled, loaded.history, loaded.origin) == (["c1"], [v1_history()], "start")
    raw.store.save("s", loaded)
    stored = raw.get("s")
    assert (stored["v"], stored["plan"]["v"], stored["answers"]["v"]) == (2, 2, 2)
    assert stored["taint"] == record["taint"]  # kept as written: a version-1 taint record
    assert stored["history"] == [v1_history()]  # and a version-1 compaction record


def test_the_version_1_variants_are_read() -> None:
    """A version-1 record may lack `bets` (not counted, once it has compactions) and a plan
    entry may lack `r` (not looked for secrets: looked at when saved again)."""
    blob = orjson.dumps(
        {"plan": {"c1": {"h": HASH, "t": "[reduced]", "i": None}}, "compactions": 2}
    )
    state = decode_state(blob)
    assert state is not None and state.bets is None
    assert state.plan == {"c1": PlanEntry(HASH, "[reduced]")} and state.plan["c1"].refs is None
    again = orjson.loads(encode_state(state))
    assert again["plan"]["entries"]["c1"]["r"] == [] and again["bets"] is None
    assert decode_state(encode_state(state)) == state


def test_a_version_2_plan_entry_without_refs_is_malformed() -> None:
    entry = {"h": HASH, "t": "[reduced]", "i": None}
    blob = orjson.dumps({"v": 2, "plan": {"v": 2, "entries": {"c1": entry}}})
    assert decode_state(blob) is None
    assert decode_state(orjson.dumps({"v": 2, "plan": {"c1": entry}})) is None


@pytest.mark.parametrize("version", [3, 0, "2", None, True])
def test_a_session_record_of_an_unknown_version_is_unreadable(raw: Raw, version: Any) -> None:
    """Absent for the plan and the answers; unreadable for the fence, which cannot know the
    taint it may hold (`fetch` says the store did not answer)."""
    record = v1_record(int(time.time() * 1000)) | {"v": version}
    raw.put("s", orjson.dumps(record))
    assert raw.store.fetch("s") == (None, False)
    assert raw.store.load("s") is None


@pytest.mark.parametrize("kind", ["plan", "answers"])
def test_a_plan_or_answers_record_of_an_unknown_version_is_a_miss(raw: Raw, kind: str) -> None:
    state = SessionState(
        plan={"c1": PlanEntry(HASH, "[reduced]")},
        compactions=3,
        answers={"c1|jev|7": {"keepCall": 0.5, "keepResult": 0.25}},
    )
    record = orjson.loads(encode_state(state))
    record[kind] = {"v": 3, "entries": record[kind]["entries"], "more": 1}
    raw.put("s", orjson.dumps(record))
    loaded, answered = raw.store.fetch("s")
    assert answered and loaded is not None and loaded.compactions == 3
    assert (loaded.plan == {}) is (kind == "plan")
    assert (loaded.answers == {}) is (kind == "answers")


def test_a_taint_record_of_an_unknown_version_counts_as_tainted() -> None:
    future = {"v": 3, "tainted": False, "when": "then"}
    assert holds_taint(future) and holds_taint({"v": "3"})
    assert merge_taint(future, TaintScan()).tainted
    assert merge_taint(future, TaintScan()).sticky
    assert taint_write(future, TaintScan(True, 1, (EMAIL,)), 9) is None  # kept as written
    assert not holds_taint({"v": 2, "tainted": False}) and not holds_taint({})
    for version in (1, 2):
        record = taint_write(None, TaintScan(True, 2, (EMAIL,)), 9)
        assert record is not None and record["v"] == TAINT_SCHEMA
        if version == 1:
            del record["v"]
        assert merge_taint(record, TaintScan()) == TaintScan(True, 2, (EMAIL,), sticky=True)


def compact_once(store: StateStore) -> tuple[str, int]:
    """One compaction of session `s` with a remote (non-local) judge: why it judged as it did
    and how many times that judge was asked."""
    judge = CountingJudge()
    options = engine_options(
        trigger_tokens=16_000, trigger_percent=0.0, rearm_tokens=0, price_profile="none"
    )
    compactor = SessionCompactor(options, state=store, outputs=None, judge=judge)
    result = asyncio.run(compactor.compact("s", openai_chat.parse(chat(30))))
    assert result.outcome == "compacted"
    return result.reason or "", judge.asked


def test_the_fence_holds_for_records_of_unknown_versions(raw: Raw) -> None:
    """A session whose record, or whose taint record, is of a version this reader does not
    know never reaches a remote judge; a clean version-1 record does."""
    now = int(time.time() * 1000)
    clean = v1_record(now) | {"taint": None, "plan": {}, "history": []}
    raw.put("s", orjson.dumps(clean))
    assert compact_once(raw.store) == ("ok", 1)
    raw.put("s", orjson.dumps(clean | {"v": 3}))
    assert compact_once(raw.store) == ("unproven", 0)
    record = orjson.loads(encode_state(SessionState(plan={}, origin="start")))
    raw.put("s", orjson.dumps(record | {"taint": {"v": 3, "shape": "new"}}))
    assert compact_once(raw.store) == ("tainted", 0)


def test_sqlite_keeps_a_record_of_an_unknown_version_as_tainted() -> None:
    assert kept_as_tainted(orjson.dumps({"v": 3}))
    assert kept_as_tainted(encode_state(SessionState(plan={}, taint={"v": 9})))
    assert not kept_as_tainted(encode_state(SessionState(plan={})))
    assert not kept_as_tainted(b"garbage") and not kept_as_tainted(orjson.dumps({"v": 2}))


# -- compaction records ----------------------------------------------------------------------


def test_compaction_records_carry_their_version_and_the_report_reads_each_it_knows() -> None:
    store = MemoryStateStore()
    compact_once(store)
    state = store.load("s")
    assert state is not None and state.history[-1]["v"] == COMPACTION_SCHEMA
    future = {"v": 3, "what": "else"}
    state.history = [v1_history(), state.history[-1], future]
    shown = report("s", state)["history"]
    assert len(shown) == 2 and all("v" not in h for h in shown)
    assert shown[0]["results"][0] == {
        "id": "c1",
        "tool": "Bash",
        "original_chars": 900,
        "kept_chars": 90,
        "note": "",
        "arguments_briefed": True,
        "saved": False,
    }


# -- links ---------------------------------------------------------------------------------------


def test_sqlite_links_carry_their_version_and_a_version_1_table_is_read(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    columns = "key TEXT PRIMARY KEY, session TEXT NOT NULL, updated_ms INTEGER NOT NULL"
    sql(path, f"CREATE TABLE links ({columns})")  # the version-1 table: no version column
    sql(path, "INSERT INTO links VALUES ('resp_1', 'x-1', ?)", (int(time.time() * 1000),))
    store = SqliteStateStore(path)
    assert store.linked("resp_1") == "x-1"
    store.link("resp_2", "x-2")
    assert store.linked("resp_2") == "x-2"
    versions = dict(sql(path, "SELECT key, v FROM links"))
    sql(path, "UPDATE links SET v = 3 WHERE key = 'resp_2'")
    assert versions == {"resp_1": 1, "resp_2": LINK_SCHEMA}
    assert store.linked("resp_2") is None
    store.close()


def test_redis_links_carry_their_version(redis_server: RedisServer) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    store = RedisStateStore(f"{redis_server.url}?prefix={prefix}")
    client = redis.Redis.from_url(redis_server.url)
    store.link("resp_2", "x-2")
    assert orjson.loads(client.get(f"{prefix}r:resp_2") or b"") == {"v": 2, "session": "x-2"}
    assert store.linked("resp_2") == "x-2"
    client.set(f"{prefix}r:resp_1", "x-1")  # version 1: the bare session key
    assert store.linked("resp_1") == "x-1"
    client.set(f"{prefix}r:resp_3", orjson.dumps({"v": 3, "session": "x-3"}))
    assert store.linked("resp_3") is None
    store.close()
    client.close()


# -- figures and bills on Redis ------------------------------------------------------------------


def test_redis_figures_and_bills_carry_their_versions(redis_server: RedisServer) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    store = RedisStateStore(f"{redis_server.url}?prefix={prefix}")
    client = redis.Redis.from_url(redis_server.url)
    mark = {"m": 4, "b": 0, "f": "00ff"}
    taught = Observed(ratio=2.0, reach=0.5, cached=100, mark=mark, billed=10.0, spared=2.5)
    assert store.observe("s", taught) is None
    for name, value in (("c", 2.0), ("reach", 0.5), ("read", 100), ("mark", mark)):
        assert orjson.loads(client.get(f"{prefix}{name}:s") or b"") == {
            "v": FIGURE_SCHEMA,
            "x": value,
        }
    assert client.hget(f"{prefix}bill:s", "v") == b"2"
    loaded = store.load("s")
    assert loaded is not None
    assert (loaded.calibration, loaded.reach, loaded.cached) == (2.0, 0.5, 100)
    assert (loaded.mark, loaded.billed, loaded.spared) == (mark, 10.0, 2.5)
    store.close()
    client.close()


def test_redis_version_1_figures_and_bills_are_read_and_blended(
    redis_server: RedisServer,
) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    store = RedisStateStore(f"{redis_server.url}?prefix={prefix}")
    client = redis.Redis.from_url(redis_server.url)
    mark = {"m": 4, "b": 0, "f": "00ff"}
    client.set(f"{prefix}c:s", repr(2.0))
    client.set(f"{prefix}reach:s", "0.5")
    client.set(f"{prefix}read:s", 100)
    client.set(f"{prefix}mark:s", orjson.dumps(mark))
    client.hset(f"{prefix}bill:s", mapping={"billed": "10", "spared": "2.5"})
    loaded = store.load("s")
    assert loaded is not None
    assert (loaded.calibration, loaded.reach, loaded.cached) == (2.0, 0.5, 100)
    assert (loaded.mark, loaded.billed, loaded.spared) == (mark, 10.0, 2.5)
    assert store.observe("s", Observed(ratio=1.0, cached=50, billed=1.0)) == 100
    assert orjson.loads(client.get(f"{prefix}c:s") or b"") == {"v": 2, "x": 1.7}
    loaded = store.load("s")
    assert loaded is not None and (loaded.calibration, loaded.cached) == (1.7, 50)
    assert loaded.billed == 11.0 and client.hget(f"{prefix}bill:s", "v") == b"2"
    store.close()
    client.close()


def test_redis_figures_and_bills_of_an_unknown_version_are_a_miss(
    redis_server: RedisServer,
) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    store = RedisStateStore(f"{redis_server.url}?prefix={prefix}")
    client = redis.Redis.from_url(redis_server.url)
    for name in ("c", "reach", "read", "mark"):
        client.set(f"{prefix}{name}:s", orjson.dumps({"v": 3, "x": 1}))
    client.hset(f"{prefix}bill:s", mapping={"billed": "10", "spared": "2.5", "v": "3"})
    assert store.load("s") is None  # nothing this reader knows
    assert store.observe("s", Observed(ratio=2.0, cached=7)) is None
    assert orjson.loads(client.get(f"{prefix}c:s") or b"") == {"v": 2, "x": 2.0}  # replaced
    loaded = store.load("s")
    assert loaded is not None and (loaded.calibration, loaded.cached) == (2.0, 7)
    assert loaded.billed is None
    store.close()
    client.close()


# -- the decision log ----------------------------------------------------------------------------


S1, S2, S3 = (f"h-{i:016x}" for i in range(1, 4))
"""Sessions as the decision log keeps them (hashed keys)."""


def test_decision_lines_carry_their_version_and_unknown_ones_are_skipped(tmp_path: Path) -> None:
    options = plan_options()
    plan = Plan(calls=[], requests=[], options=options, known={}, reduced=frozenset())
    line = decision_record(S2, RulesJudge(), options, plan, {}, Decisions([], {}, {}))
    assert line["v"] == DECISION_SCHEMA
    log = DecisionLog(tmp_path / "decisions")
    now = time.time()
    assert log.append({"session": S1, "decisions": []}, now)  # a version-1 line
    assert log.append(line, now)
    assert log.append({"v": 3, "session": S3, "layout": "new"}, now)
    assert [r["session"] for r in log.read_all()] == [S1, S2]
