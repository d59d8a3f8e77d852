"""Session state in SQLite: one JSON blob per session, WAL mode, bounded by count and age; each
session's turn log in a table of its own, deleted with the session.

One connection guarded by a lock serves every thread of the process; WAL and `busy_timeout`
let several processes share the file. Any database error is logged and swallowed: `load`
returns None, `save` does nothing, `ping` reports False; the next call reconnects.
"""

from __future__ import annotations

import logging
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import orjson

from factrail.policy.taint import holds_taint
from factrail.stores.paths import ensure_private_dir
from factrail.stores.schema import LINK_SCHEMA
from factrail.stores.state import (
    MAX_TURNS,
    Failures,
    Observed,
    Operation,
    SessionState,
    decode_state,
    decode_turn,
    encode_state,
    keep_observed,
    kept_as_tainted,
    take_observed,
    turn_blob,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

MEMORY = ":memory:"
MAX_SESSIONS = 10_000
TTL_SECONDS = 30 * 24 * 60 * 60
PRUNE_EVERY = 64
MAX_BYTES = 1024**3

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS sessions ("
    " key TEXT PRIMARY KEY, updated_ms INTEGER NOT NULL, state BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS sessions_updated ON sessions (updated_ms)",
    "CREATE TABLE IF NOT EXISTS leases ("
    " key TEXT PRIMARY KEY, token TEXT NOT NULL, expires_ms INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS links ("
    " key TEXT PRIMARY KEY, session TEXT NOT NULL, updated_ms INTEGER NOT NULL,"
    " v INTEGER NOT NULL DEFAULT 1)",
    "CREATE INDEX IF NOT EXISTS links_updated ON links (updated_ms)",
    "CREATE TABLE IF NOT EXISTS turns ("
    " key TEXT NOT NULL, seq INTEGER NOT NULL, record BLOB NOT NULL,"
    " PRIMARY KEY (key, seq)) WITHOUT ROWID",
)
_LINK_VERSION = "ALTER TABLE links ADD COLUMN v INTEGER NOT NULL DEFAULT 1"
"""The link rows' version column (`schema.LINK_SCHEMA`), added to a table made without it:
its rows, and those a writer that does not name it adds, are version 1."""
_UPSERT = (
    "INSERT INTO sessions (key, updated_ms, state) VALUES (?, ?, ?) ON CONFLICT (key)"
    " DO UPDATE SET updated_ms = excluded.updated_ms, state = excluded.state"
)


class SqliteStateStore:
    """Session states in one SQLite file (or `:memory:`).

    Size is bounded: every `prune_every` saves (and on the first), sessions not updated for
    `ttl_seconds` are deleted and the most recently updated are kept within `max_sessions`
    records and `max_bytes` bytes of state; tainted records younger than `taint_keep_seconds`
    are exempt from all three (see `_prune`). A session's turn log (`turns`, at most
    `max_turns` records) is deleted with it and is not counted in `max_bytes`. Deleted pages
    are reused, not returned to the file system, so the file stays near its largest size. The
    file is created 0600; a missing parent folder is created 0700.
    """

    def __init__(
        self,
        path: Path | str,
        max_sessions: int = MAX_SESSIONS,
        ttl_seconds: float = TTL_SECONDS,
        *,
        prune_every: int = PRUNE_EVERY,
        busy_timeout_ms: int = 2000,
        clock: Callable[[], float] = time.time,
        max_bytes: int = MAX_BYTES,
        taint_keep_seconds: float = TTL_SECONDS,
        on_error: Callable[[str], None] | None = None,
        max_turns: int = MAX_TURNS,
    ) -> None:
        """`max_bytes`: bound of the stored states' bytes (0: none); `taint_keep_seconds`: how
        long a tainted record is kept whatever the bounds (the saved outputs' retention);
        `on_error(operation)` hears of every failed call (a metric); `max_turns`: the turn
        records each session's turn log keeps."""
        self.path = str(path)
        self.max_turns = max_turns
        self._failures = Failures(log, self.path, on_error)
        self.max_sessions = max_sessions
        self.ttl_ms = int(ttl_seconds * 1000)
        self.max_bytes = max_bytes
        self.taint_keep_ms = int(taint_keep_seconds * 1000)
        self._prune_every = max(1, prune_every)
        self._busy_timeout_ms = busy_timeout_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._saves = 0

    def load(self, session: str) -> SessionState | None:
        """The state of `session`, or None if absent, expired, invalid or on any error."""
        return self.fetch(session)[0]

    def fetch(self, session: str) -> tuple[SessionState | None, bool]:
        """The state of `session` (None if absent or expired) and whether the store answered:
        False on any error and for a record it cannot decode."""

        def run(conn: sqlite3.Connection) -> tuple[SessionState | None, bool]:
            row = conn.execute(
                "SELECT updated_ms, state FROM sessions WHERE key = ?", (session,)
            ).fetchone()
            now = self._now_ms()
            if row is None or row[0] < now - max(self.ttl_ms, self.taint_keep_ms):
                return None, True
            state = decode_state(row[1])
            if state is None:
                return None, False
            if row[0] < now - self.ttl_ms and not holds_taint(state.taint):
                return None, True  # past the TTL: only a tainted record outlives it
            return state, True

        failed: tuple[SessionState | None, bool] = (None, False)
        return self._run("load", run, failed)

    def save(self, session: str, state: SessionState) -> None:
        """Replace the state of `session`, stamping `updated_ms`; the stored calibration and
        reach stay (`keep_observed`). Errors are logged only."""

        def run(conn: sqlite3.Connection) -> None:
            now = self._now_ms()
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT state FROM sessions WHERE key = ?", (session,)
                ).fetchone()
                previous = decode_state(row[0]) if row is not None else None
                new = replace(keep_observed(state, previous), updated_ms=now)
                conn.execute(_UPSERT, (session, now, encode_state(new)))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            if self._saves % self._prune_every == 0:
                self._prune(conn, now)
            self._saves += 1

        self._run("save", run, None)

    def observe(self, session: str, observed: Observed) -> int | None:
        """Blend what an answer's usage taught into the session and append its turn record to
        the session's turn log, in one transaction (creating the session if needed; a session
        past the TTL starts over, its turn log too); the cache read it replaced."""
        record = turn_blob(observed.turn) if observed.turn is not None else None

        def run(conn: sqlite3.Connection) -> int | None:
            now = self._now_ms()
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT updated_ms, state FROM sessions WHERE key = ?", (session,)
                ).fetchone()
                state = None
                if row is not None and row[0] >= now - self.ttl_ms:
                    state = decode_state(row[1])
                else:
                    conn.execute("DELETE FROM turns WHERE key = ?", (session,))
                state = state or SessionState(plan={})
                previous = take_observed(state, observed)
                state.updated_ms = now
                conn.execute(_UPSERT, (session, now, encode_state(state)))
                if record is not None:
                    self._append_turn(conn, session, record)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return previous

        return self._run("observe", run, None)

    def _append_turn(self, conn: sqlite3.Connection, session: str, record: bytes) -> None:
        """Append a turn record to the session's log and drop those past `max_turns`."""
        (seq,) = conn.execute(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM turns WHERE key = ?", (session,)
        ).fetchone()
        conn.execute("INSERT INTO turns VALUES (?, ?, ?)", (session, seq, record))
        conn.execute(
            "DELETE FROM turns WHERE key = ? AND seq <= ?", (session, seq - self.max_turns)
        )

    def turns(self, session: str, limit: int = MAX_TURNS) -> list[dict[str, Any]]:
        """The newest `limit` records of the session's turn log, oldest first (none once the
        session is past the TTL); `[]` on any error."""

        def run(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            row = conn.execute(
                "SELECT updated_ms FROM sessions WHERE key = ?", (session,)
            ).fetchone()
            if row is None or row[0] < self._now_ms() - self.ttl_ms or limit <= 0:
                return []
            rows = conn.execute(
                "SELECT record FROM turns WHERE key = ? ORDER BY seq DESC LIMIT ?",
                (session, limit),
            ).fetchall()
            decoded = (decode_turn(blob) for (blob,) in reversed(rows))
            return [record for record in decoded if record is not None]

        return self._run("turns", run, [])

    def recent(self, limit: int) -> list[tuple[str, int]]:
        """The most recently updated live sessions, newest first: `(key, updated_ms)`."""

        def run(conn: sqlite3.Connection) -> list[tuple[str, int]]:
            rows = conn.execute(
                "SELECT key, updated_ms FROM sessions WHERE updated_ms >= ?"
                " ORDER BY updated_ms DESC, key LIMIT ?",
                (self._now_ms() - self.ttl_ms, max(limit, 0)),
            ).fetchall()
            return [(str(k), int(u)) for k, u in rows]

        return self._run("recent", run, [])

    def lease(self, session: str, ttl_ms: int) -> str | None:
        """Take the session's lease for `ttl_ms` (for every process on this file): its token;
        None while another holder's lease runs; `""` when the store failed (go on without)."""
        token = secrets.token_hex(8)

        def run(conn: sqlite3.Connection) -> str | None:
            now = self._now_ms()
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT expires_ms FROM leases WHERE key = ?", (session,)
                ).fetchone()
                if row is not None and row[0] > now:
                    conn.execute("ROLLBACK")
                    return None
                conn.execute(
                    "INSERT OR REPLACE INTO leases (key, token, expires_ms) VALUES (?, ?, ?)",
                    (session, token, now + ttl_ms),
                )
                conn.execute("DELETE FROM leases WHERE expires_ms <= ?", (now,))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return token

        unknown: str | None = ""
        return self._run("lease", run, unknown)

    def release(self, session: str, token: str) -> None:
        """Give the lease back, if it is still the one `token` took."""

        def run(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM leases WHERE key = ? AND token = ?", (session, token))

        self._run("release", run, None)

    def link(self, response_id: str, session: str) -> None:
        """Remember which session an answer id answered (pruned with the sessions)."""

        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO links (key, session, updated_ms, v) VALUES (?, ?, ?, ?)",
                (response_id, session, self._now_ms(), LINK_SCHEMA),
            )

        self._run("link", run, None)

    def linked(self, response_id: str) -> str | None:
        """The session an answer id answered, if remembered, not past the TTL and of a link
        version this reader knows (1 or 2: the same row)."""

        def run(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT session, v FROM links WHERE key = ? AND updated_ms >= ?",
                (response_id, self._now_ms() - self.ttl_ms),
            ).fetchone()
            return None if row is None or row[1] not in (1, LINK_SCHEMA) else str(row[0])

        return self._run("linked", run, None)

    def ping(self) -> bool:
        """Whether the database answers a query."""

        def run(conn: sqlite3.Connection) -> bool:
            conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchall()
            return True

        return self._run("ping", run, False)

    def close(self) -> None:
        """Close the connection (a later call reopens it)."""
        with self._lock:
            self._disconnect()

    def _prune(self, conn: sqlite3.Connection, now_ms: int) -> None:
        """Delete what is past the TTL, then the least recently updated records while there are
        more than `max_sessions` of them or their states hold more than `max_bytes`; a deleted
        session's turn log goes with it. A tainted record is never pruned while younger than
        `taint_keep_ms` (its session's saved outputs may still be there), so it outlives both
        bounds and the TTL until then."""
        keep_from = now_ms - max(self.ttl_ms, self.taint_keep_ms)
        stale = conn.execute(
            "SELECT key FROM sessions WHERE updated_ms < ? AND updated_ms >= ?",
            (now_ms - self.ttl_ms, keep_from),
        ).fetchall()
        doomed = [key for (key,) in stale if not self._tainted(conn, key)]
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "DELETE FROM turns WHERE key IN (SELECT key FROM sessions WHERE updated_ms < ?)",
                (keep_from,),
            )
            conn.execute("DELETE FROM sessions WHERE updated_ms < ?", (keep_from,))
            self._delete(conn, [(k,) for k in doomed])
            conn.execute("DELETE FROM links WHERE updated_ms < ?", (now_ms - self.ttl_ms,))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        count, size = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(state)), 0) FROM sessions"
        ).fetchone()
        excess = count - self.max_sessions
        extra = size - self.max_bytes if self.max_bytes > 0 else 0
        if excess <= 0 and extra <= 0:
            return
        evicted: list[tuple[str]] = []
        protect_from = now_ms - self.taint_keep_ms
        rows = conn.execute(
            "SELECT key, updated_ms, LENGTH(state) FROM sessions ORDER BY updated_ms, key"
        ).fetchall()
        for key, updated_ms, length in rows:
            if excess <= 0 and extra <= 0:
                break
            if updated_ms >= protect_from and self._tainted(conn, key):
                continue
            evicted.append((key,))
            excess -= 1
            extra -= length
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._delete(conn, evicted)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @staticmethod
    def _delete(conn: sqlite3.Connection, keys: list[tuple[str]]) -> None:
        """Delete the sessions of `keys` and their turn logs."""
        conn.executemany("DELETE FROM sessions WHERE key = ?", keys)
        conn.executemany("DELETE FROM turns WHERE key = ?", keys)

    @staticmethod
    def _tainted(conn: sqlite3.Connection, key: str) -> bool:
        """Whether the record of `key` is kept as tainted (`state.kept_as_tainted`)."""
        row = conn.execute("SELECT state FROM sessions WHERE key = ?", (key,)).fetchone()
        return row is not None and kept_as_tainted(row[0])

    def _run(self, operation: Operation, run: Callable[[sqlite3.Connection], T], default: T) -> T:
        """`run` on the connection under the lock; database and OS errors give `default`.

        "database is locked" past the busy timeout is tried again, twice, on a new connection:
        it comes when another process's connection sets the database up at the same moment
        (journal mode, schema), where SQLite does not always wait. Every `run` is safe to repeat.
        """
        with self._lock:
            for attempt in range(LOCKED_RETRIES + 1):
                try:
                    result = run(self._connect())
                except (sqlite3.Error, OSError, orjson.JSONEncodeError) as error:
                    self._disconnect()
                    if attempt < LOCKED_RETRIES and _locked(error):
                        time.sleep(LOCKED_PAUSE_S * (attempt + 1))
                        continue
                    self._failures.failed(operation, error)
                    return default
                self._failures.succeeded()
                return result
            raise AssertionError("unreachable")

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        if self.path != MEMORY:
            _create_private_file(Path(self.path))
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            conn.execute("PRAGMA journal_mode = WAL").fetchall()
            conn.execute("PRAGMA synchronous = NORMAL")
            for statement in _SCHEMA:
                conn.execute(statement)
            _add_link_version(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._saves = 0
        return conn

    def _disconnect(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            with suppress(sqlite3.Error):
                conn.close()

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)


LOCKED_RETRIES = 2
LOCKED_PAUSE_S = 0.05


def _add_link_version(conn: sqlite3.Connection) -> None:
    """Give the links table its version column when it has none (another process may add it
    at the same moment)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(links)")}
    if "v" in columns:
        return
    try:
        conn.execute(_LINK_VERSION)
    except sqlite3.OperationalError as error:
        if "duplicate column" not in str(error):
            raise


def _locked(error: BaseException) -> bool:
    """Whether `error` is SQLite's busy answer ("database is locked")."""
    return isinstance(error, sqlite3.OperationalError) and "locked" in str(error)


def _create_private_file(path: Path) -> None:
    """Create the database file 0600 (forcing the mode); a missing parent becomes 0700."""
    if not path.parent.exists():
        ensure_private_dir(path.parent)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
