"""An in-process state store (tests, `eval --sim`); states are copied in and out like a database."""

from __future__ import annotations

import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from factrail.stores.state import (
    MAX_TURNS,
    Observed,
    SessionState,
    decode_state,
    decode_turn,
    encode_state,
    keep_observed,
    take_observed,
    turn_blob,
)

MAX_LINKS = 100_000


class MemoryStateStore:
    """A dict of encoded states: callers never share mutable objects with the store."""

    def __init__(
        self, clock: Callable[[], float] = time.time, *, max_turns: int = MAX_TURNS
    ) -> None:
        """`max_turns`: the turn records each session's turn log keeps."""
        self._clock = clock
        self.max_turns = max_turns
        self._states: dict[str, bytes] = {}
        self._turns: dict[str, deque[bytes]] = {}
        self._lock = threading.Lock()
        self._leases: dict[str, tuple[str, int]] = {}
        self._links: dict[str, str] = {}

    def load(self, session: str) -> SessionState | None:
        """The saved state of `session`, or None."""
        return self.fetch(session)[0]

    def fetch(self, session: str) -> tuple[SessionState | None, bool]:
        """The saved state of `session` (None if absent) and whether it could be read."""
        with self._lock:
            blob = self._states.get(session)
        if blob is None:
            return None, True
        state = decode_state(blob)
        return state, state is not None

    def save(self, session: str, state: SessionState) -> None:
        """Replace the state of `session`, stamping `updated_ms`; the stored calibration and
        reach stay (`keep_observed`)."""
        with self._lock:
            stored = self._states.get(session)
            previous = decode_state(stored) if stored is not None else None
            kept = keep_observed(state, previous)
            self._states[session] = encode_state(
                replace(kept, updated_ms=int(self._clock() * 1000))
            )

    def observe(self, session: str, observed: Observed) -> int | None:
        """Blend what an answer's usage taught into the session (creating it if needed) and
        append its turn record to the session's turn log; the cache read it replaced."""
        record = turn_blob(observed.turn) if observed.turn is not None else None
        with self._lock:
            if record is not None:
                log = self._turns.setdefault(session, deque(maxlen=self.max_turns))
                log.append(record)
            blob = self._states.get(session)
            state = decode_state(blob) if blob is not None else None
            state = state or SessionState(plan={})
            previous = take_observed(state, observed)
            state.updated_ms = int(self._clock() * 1000)
            self._states[session] = encode_state(state)
            return previous

    def turns(self, session: str, limit: int = MAX_TURNS) -> list[dict[str, Any]]:
        """The newest `limit` records of the session's turn log, oldest first."""
        if limit <= 0:
            return []
        with self._lock:
            blobs = list(self._turns.get(session, ()))[-limit:]
        return [record for blob in blobs if (record := decode_turn(blob)) is not None]

    def recent(self, limit: int) -> list[tuple[str, int]]:
        """The most recently updated sessions, newest first: `(key, updated_ms)`."""
        with self._lock:
            blobs = list(self._states.items())
        stamped = [(k, s.updated_ms) for k, b in blobs if (s := decode_state(b)) is not None]
        return sorted(stamped, key=lambda x: (-x[1], x[0]))[: max(limit, 0)]

    def lease(self, session: str, ttl_ms: int) -> str | None:
        """Take the session's lease for `ttl_ms`; None while another holder's runs."""
        now = int(self._clock() * 1000)
        with self._lock:
            held = self._leases.get(session)
            if held is not None and held[1] > now:
                return None
            token = secrets.token_hex(8)
            self._leases[session] = (token, now + ttl_ms)
            return token

    def release(self, session: str, token: str) -> None:
        """Give the lease back, if it is still the one `token` took."""
        with self._lock:
            if self._leases.get(session, ("", 0))[0] == token:
                del self._leases[session]

    def link(self, response_id: str, session: str) -> None:
        """Remember which session an answer id answered (the oldest forgotten past a bound)."""
        with self._lock:
            self._links[response_id] = session
            if len(self._links) > MAX_LINKS:
                del self._links[next(iter(self._links))]

    def linked(self, response_id: str) -> str | None:
        """The session an answer id answered, if remembered."""
        with self._lock:
            return self._links.get(response_id)

    def ping(self) -> bool:
        """Always reachable."""
        return True

    def close(self) -> None:
        """Nothing to release."""
