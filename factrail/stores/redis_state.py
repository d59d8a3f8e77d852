"""Session state in Redis or Valkey, shared by every worker and replica (`redis://`, `rediss://`,
`unix://`).

Keys, under one prefix (`factrail:` by default, `?prefix=` in the URL):

- `<p>s:<session>`: the session record (`encode_state`, `schema.STATE_SCHEMA`), expiring after
  the TTL; a tainted session's record lives at least as long as its saved outputs
  (`taint_keep_seconds`);
- figure records (`schema.FIGURE_SCHEMA`): `<p>c:<session>` and `<p>reach:<session>`, the
  calibration ratio and the cache reach, each blended atomically in the server by a script (a
  turn's save never undoes one that landed after its load); `<p>read:<session>`, the last
  answered turn's cache read, swapped by `SET … GET` (Redis 6.2 or later, any Valkey);
  `<p>mark:<session>`, where the gateway last put the cache marker;
- `<p>bill:<session>`: a hash of the session's bill (`billed`, `spared`, shadow mode's
  `projected_billed` and `projected_spared`, each added to atomically by `HINCRBYFLOAT`; the
  answered `turns`, by `HINCRBY`; and its version `v`: `schema.BILL_SCHEMA`);
- `<p>turns:<session>`: the session's turn log, a list of turn records (`schema.TURN_SCHEMA`)
  trimmed to the newest `max_turns`, expiring with the session's other keys;
- `<p>l:<session>`: the session's lease (`SET NX PX`, released by compare-and-delete);
- `<p>r:<response id>`: the session an answer id answered (`previous_response_id` chains,
  Anthropic threads; `schema.LINK_SCHEMA`);
- `<p>recent`: a sorted set of sessions by last update (for `factrail inspect` and the
  sessions route), trimmed past the TTL and to `max_sessions`.

Every call is bounded by the client's socket timeouts and fails open like the other stores:
`load` gives None, `fetch` says the store did not answer (so the fence treats the session as
unproven), `save` and `observe` log; `lease` gives `""` (go on without one); `turns` gives
`[]`. An `observe` is one `MULTI`/`EXEC` transaction.
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson
import redis

from factrail.policy.taint import holds_taint
from factrail.stores.schema import (
    BILL_SCHEMA,
    FIGURE_SCHEMA,
    LINK_SCHEMA,
    VERSION,
    version_of,
)
from factrail.stores.state import (
    CALIBRATION_RANGE,
    CALIBRATION_WEIGHT,
    MAX_TURNS,
    REACH_RANGE,
    REACH_WEIGHT,
    Failures,
    Observed,
    Operation,
    SessionState,
    decode_state,
    decode_turn,
    encode_state,
    turn_blob,
    with_observed,
    without_observed,
)

log = logging.getLogger("factrail.stores.redis")

T = TypeVar("T")
PREFIX = "factrail:"
TTL_SECONDS = 30 * 24 * 60 * 60
MAX_SESSIONS = 10_000
SOCKET_TIMEOUT_S = 0.5
"""A store slower than this is a failing store: the turn goes on without it."""
TRIM_EVERY = 64
BILL_SUMS = ("billed", "spared", "projected_billed", "projected_spared")
"""The bill hash's sums, each added to by `HINCRBYFLOAT` (the fields of `SessionState`)."""

_BLEND = """
local version = tonumber(ARGV[8])
local stored = redis.call('GET', KEYS[1])
local previous = nil
if stored then
  previous = tonumber(stored)
  if not previous then
    local ok, record = pcall(cjson.decode, stored)
    if ok and type(record) == 'table' and record['v'] == version then
      previous = tonumber(record['x'])
    end
  end
end
local ratio = math.min(math.max(tonumber(ARGV[1]), tonumber(ARGV[3])), tonumber(ARGV[4]))
local value = ratio
if previous then value = previous + tonumber(ARGV[5]) * (ratio - previous) end
redis.call('SET', KEYS[1], string.format('{"v":%d,"x":%.17g}', version, value), 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[7])
return string.format('%.17g', value)
"""
"""Blend a value into a stored figure (`state.blend`, in the server): the value, its TTL, its
bounds, its weight, then the session and the time to stamp it with in the recent set, and the
figure version to write (`schema.FIGURE_SCHEMA`). The stored figure is read at version 1 (the
bare number) or at the one written; of any other it is absent, and the value replaces it."""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisStateStore:
    """The state store on a Redis-protocol server (thread-safe: one connection pool)."""

    def __init__(
        self,
        url: str,
        *,
        ttl_seconds: float = TTL_SECONDS,
        taint_keep_seconds: float = TTL_SECONDS,
        max_sessions: int = MAX_SESSIONS,
        client: redis.Redis | None = None,
        clock: Callable[[], float] = time.time,
        on_error: Callable[[str], None] | None = None,
        max_turns: int = MAX_TURNS,
    ) -> None:
        """`on_error(operation)` hears of every failed call (for a metric); `max_turns`: the
        turn records each session's turn log keeps."""
        address, self.prefix = split_prefix(url)
        self.url = redact_url(address)
        self.ttl_ms = int(ttl_seconds * 1000)
        self.taint_keep_ms = int(max(taint_keep_seconds, ttl_seconds) * 1000)
        self.max_sessions = max_sessions
        self.max_turns = max_turns
        self._client = client or redis.Redis.from_url(
            address,
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=SOCKET_TIMEOUT_S,
            health_check_interval=30,
        )
        self._blend = self._client.register_script(_BLEND)
        self._release = self._client.register_script(_RELEASE)
        self._clock = clock
        self._failures = Failures(log, self.url, on_error)
        self._saves = 0
        self._lock = threading.Lock()

    # -- keys --------------------------------------------------------------------------------

    def _state_key(self, session: str) -> str:
        return f"{self.prefix}s:{session}"

    def _calibration_key(self, session: str) -> str:
        return f"{self.prefix}c:{session}"

    def _reach_key(self, session: str) -> str:
        return f"{self.prefix}reach:{session}"

    def _read_key(self, session: str) -> str:
        return f"{self.prefix}read:{session}"

    def _mark_key(self, session: str) -> str:
        return f"{self.prefix}mark:{session}"

    def _bill_key(self, session: str) -> str:
        return f"{self.prefix}bill:{session}"

    def _turns_key(self, session: str) -> str:
        return f"{self.prefix}turns:{session}"

    def _lease_key(self, session: str) -> str:
        return f"{self.prefix}l:{session}"

    @property
    def _recent_key(self) -> str:
        return f"{self.prefix}recent"

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # -- the store ---------------------------------------------------------------------------

    def load(self, session: str) -> SessionState | None:
        """The state of `session`, or None if absent, expired, invalid or on any error."""
        return self.fetch(session)[0]

    def fetch(self, session: str) -> tuple[SessionState | None, bool]:
        """The state of `session` (None if absent) and whether the store answered: False on
        any error and for a record it cannot decode."""

        def run() -> tuple[SessionState | None, bool]:
            pipe = self._client.pipeline(transaction=False)
            pipe.mget(
                [
                    self._state_key(session),
                    self._calibration_key(session),
                    self._reach_key(session),
                    self._read_key(session),
                    self._mark_key(session),
                ]
            )
            pipe.hmget(self._bill_key(session), [*BILL_SUMS, "turns", VERSION])
            (blob, ratio, share, read, placed), bill = pipe.execute()
            stored = SessionState(
                {},
                calibration=_number(_figure(ratio), CALIBRATION_RANGE),
                reach=_number(_figure(share), REACH_RANGE),
                cached=_read(_figure(read)),
                mark=_mark(_figure(placed)),
                **_bill(bill),
            )
            if blob is None:
                return (None if stored == SessionState({}) else stored), True
            state = decode_state(blob)
            if state is None:
                return None, False
            return with_observed(state, stored), True

        failed: tuple[SessionState | None, bool] = (None, False)
        return self._run("load", run, failed)

    def save(self, session: str, state: SessionState) -> None:
        """Replace the state of `session`, stamping `updated_ms`; the stored calibration and
        reach stay (a first one is stored only when there is none). A tainted record outlives
        the TTL until its session's saved outputs expire."""

        def run() -> None:
            now = self._now_ms()
            blob = encode_state(replace(without_observed(state), updated_ms=now))
            keep = self.taint_keep_ms if holds_taint(state.taint) else self.ttl_ms
            pipe = self._client.pipeline(transaction=True)
            pipe.set(self._state_key(session), blob, px=keep)
            for key, value in (
                (self._calibration_key(session), state.calibration),
                (self._reach_key(session), state.reach),
            ):
                if value is not None and math.isfinite(value):
                    pipe.set(key, _figure_blob(value), px=keep, nx=True)
                pipe.pexpire(key, keep)
            pipe.pexpire(self._read_key(session), keep)
            pipe.pexpire(self._mark_key(session), keep)
            pipe.pexpire(self._bill_key(session), keep)
            pipe.pexpire(self._turns_key(session), keep)
            pipe.zadd(self._recent_key, {session: now})
            pipe.execute()
            with self._lock:
                self._saves += 1
                trim = self._saves % TRIM_EVERY == 1
            if trim:
                self._trim(now)

        self._run("save", run, None)

    def observe(self, session: str, observed: Observed) -> int | None:
        """Blend what an answer's usage taught into the session and append its turn record to
        the session's turn log, in one transaction; the cache read it replaced."""
        blends: list[tuple[str, float, tuple[float, float], float]] = []
        ratio, reach = observed.ratio, observed.reach
        if ratio is not None and math.isfinite(ratio) and ratio > 0:
            key = self._calibration_key(session)
            blends.append((key, ratio, CALIBRATION_RANGE, CALIBRATION_WEIGHT))
        if reach is not None and math.isfinite(reach):
            blends.append((self._reach_key(session), reach, REACH_RANGE, REACH_WEIGHT))
        cached = observed.cached if observed.cached is not None and observed.cached >= 0 else None
        bill = [
            (name, value)
            for name in BILL_SUMS
            if (value := getattr(observed, name)) is not None and math.isfinite(value)
        ]
        turn = observed.turn is not None
        record = turn_blob(observed.turn) if observed.turn is not None else None
        if not blends and cached is None and observed.mark is None and not bill and not turn:
            return None

        def run() -> int | None:
            now = self._now_ms()
            pipe = self._client.pipeline(transaction=True)
            for key, value, (low, high), weight in blends:
                args: list[str | int | float] = [
                    repr(value), self.ttl_ms, low, high, weight, now, session, FIGURE_SCHEMA
                ]  # fmt: skip
                self._blend(keys=[key, self._recent_key], args=args, client=pipe)
            if observed.mark is not None:
                placed = _figure_blob(observed.mark)
                pipe.set(self._mark_key(session), placed, px=self.ttl_ms)
            for name, value in bill:
                pipe.hincrbyfloat(self._bill_key(session), name, value)
            if turn:
                pipe.hincrby(self._bill_key(session), "turns", 1)
            if bill or turn:
                pipe.hsetnx(self._bill_key(session), VERSION, BILL_SCHEMA)
                pipe.pexpire(self._bill_key(session), self.ttl_ms)
            if record is not None:
                log = self._turns_key(session)
                pipe.rpush(log, record)
                pipe.ltrim(log, -self.max_turns, -1)
                pipe.pexpire(log, self.ttl_ms)
            if cached is not None:
                read = _figure_blob(cached)
                pipe.set(self._read_key(session), read, px=self.ttl_ms, get=True)
            replies = pipe.execute()
            return _read(_figure(replies[-1])) if cached is not None else None

        return self._run("observe", run, None)

    def turns(self, session: str, limit: int = MAX_TURNS) -> list[dict[str, Any]]:
        """The newest `limit` records of the session's turn log, oldest first; `[]` on any
        error."""
        if limit <= 0:
            return []

        def run() -> list[dict[str, Any]]:
            blobs = self._client.lrange(self._turns_key(session), -limit, -1)
            return [record for blob in blobs if (record := decode_turn(blob)) is not None]

        return self._run("turns", run, [])

    def lease(self, session: str, ttl_ms: int) -> str | None:
        """The session's lease for `ttl_ms`, shared by every replica: its token; None while
        another holder's runs; `""` when the store failed (the turn goes on without)."""
        token = secrets.token_hex(8)

        def run() -> str | None:
            taken = self._client.set(self._lease_key(session), token, nx=True, px=ttl_ms)
            return token if taken else None

        unknown: str | None = ""
        return self._run("lease", run, unknown)

    def release(self, session: str, token: str) -> None:
        """Give the lease back, if it is still the one `token` took."""
        self._run(
            "release", lambda: self._release(keys=[self._lease_key(session)], args=[token]), 0
        )

    def link(self, response_id: str, session: str) -> None:
        """Remember which session an answer id answered, for every replica (TTL'd)."""
        key = f"{self.prefix}r:{response_id}"
        record = orjson.dumps({VERSION: LINK_SCHEMA, "session": session})
        self._run("link", lambda: self._client.set(key, record, px=self.ttl_ms), None)

    def linked(self, response_id: str) -> str | None:
        """The session an answer id answered, if remembered (`_linked`)."""

        def run() -> str | None:
            return _linked(self._client.get(f"{self.prefix}r:{response_id}"))

        return self._run("linked", run, None)

    def recent(self, limit: int) -> list[tuple[str, int]]:
        """The most recently updated live sessions, newest first: `(key, updated_ms)`."""

        def run() -> list[tuple[str, int]]:
            low = self._now_ms() - self.taint_keep_ms
            rows = self._client.zrevrangebyscore(
                self._recent_key, "+inf", low, start=0, num=max(limit, 0), withscores=True
            )
            return [(_text(row[0]), int(row[1])) for row in rows]

        return self._run("recent", run, [])

    def ping(self) -> bool:
        """Whether the server answers."""
        return self._run("ping", lambda: bool(self._client.ping()), False)

    def close(self) -> None:
        """Close the connection pool."""
        with contextlib.suppress(redis.RedisError):
            self._client.close()

    # -- internals ---------------------------------------------------------------------------

    def _trim(self, now_ms: int) -> None:
        """Keep the recency index to live sessions and its bound (records expire by TTL)."""
        pipe = self._client.pipeline(transaction=False)
        pipe.zremrangebyscore(self._recent_key, "-inf", now_ms - self.taint_keep_ms)
        pipe.zremrangebyrank(self._recent_key, 0, -self.max_sessions - 1)
        pipe.execute()

    def _run(self, operation: Operation, run: Callable[[], T], default: T) -> T:
        """`run`; a server, network or timeout error gives `default` (logged once per run of
        failures, counted every time)."""
        try:
            result = run()
        except (redis.RedisError, OSError) as error:
            self._failures.failed(operation, error)
            return default
        self._failures.succeeded()
        return result


def split_prefix(url: str) -> tuple[str, str]:
    """The server URL without factrail's own `prefix` query parameter, and the key prefix."""
    base, _, query = url.partition("?")
    pairs = parse_qsl(query, keep_blank_values=True)
    prefix = next((v for k, v in pairs if k == "prefix"), PREFIX) or PREFIX
    rest = urlencode([(k, v) for k, v in pairs if k != "prefix"])
    return (f"{base}?{rest}" if rest else base), prefix


def redact_url(url: str) -> str:
    """The URL without its password, for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=f"{user}{host}{port}"))


def _figure_blob(value: Any) -> bytes:
    """A figure record of version `FIGURE_SCHEMA` holding `value`."""
    return orjson.dumps({VERSION: FIGURE_SCHEMA, "x": value})


def _figure(stored: Any) -> Any:
    """The value a stored figure record holds (`schema.FIGURE_SCHEMA`): at version 1 the bare
    value (a number, or the marker's JSON object), at version 2 its `x`; None when absent,
    unreadable, or of a version this reader does not know."""
    if stored is None:
        return None
    try:
        value = orjson.loads(stored)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return value
    version = version_of(value)
    if version == 1:
        return value
    return value.get("x") if version == FIGURE_SCHEMA else None


def _mark(value: Any) -> dict[str, Any] | None:
    """A figure's marker (None: absent, or not one)."""
    return value if isinstance(value, dict) else None


def _read(value: Any) -> int | None:
    """A figure's cache read (None: absent, or not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if value >= 0 else None


def _number(value: Any, bounds: tuple[float, float]) -> float | None:
    """A figure's number (None: absent, not one, or out of its bounds)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    low, high = bounds
    return number if math.isfinite(number) and low <= number <= high else None


def _bill(fields: list[Any]) -> dict[str, Any]:
    """The `SessionState` fields of a stored bill (`schema.BILL_SCHEMA`): its `BILL_SUMS` and
    `turns`, read at version 1 (no `v` field) and 2; none of a version this reader does not
    know."""
    *sums, turns, version = fields
    if version is not None and _text(version) != str(BILL_SCHEMA):
        return {}
    counted = _sum(turns)
    return {name: _sum(value) for name, value in zip(BILL_SUMS, sums, strict=True)} | {
        "turns": int(counted) if counted is not None and counted >= 0 else 0
    }


def _sum(value: Any) -> float | None:
    """A stored sum (None: absent, unreadable or not finite)."""
    if value is None:
        return None
    try:
        number = float(_text(value))
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _linked(stored: Any) -> str | None:
    """The session a stored link names (`schema.LINK_SCHEMA`): at version 1 the bare session
    key, at version 2 its `session`; None when absent, unreadable, or of a version this reader
    does not know."""
    if stored is None:
        return None
    text = _text(stored)
    try:
        record = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    if not isinstance(record, dict):
        return text
    session = record.get("session")
    if version_of(record) != LINK_SCHEMA or not isinstance(session, str):
        return None
    return session


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
