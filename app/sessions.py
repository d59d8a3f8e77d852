"""What the gateway remembers of recent sessions, in memory and bounded: which session each
answer id a later request may continue answered (a Responses `previous_response_id`, an Anthropic
thread's `previous_message_id`), each session's last cache read, and
how much of the prefix its last compaction left the provider read (its *reach*).

Both are per process; the chain is also kept in the state store (`StateStore.link`), so a
chain continued on another worker or replica finds its session there. Cache reads are compared
within each process only.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")
RECENT_SESSIONS = 10_000
RECENT_RESPONSES = 10_000
MIN_REACH_PREFIX = 4096
"""A compaction's reach is measured only when it left at least this many tokens to be read
from the cache (below, a provider's minimum cacheable prefix alone could read nothing)."""


class Lru(Generic[V]):
    """A mapping that keeps its `size` most recently used keys."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> V | None:
        """The value of `key` (now the most recent), or None."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: str, value: V) -> None:
        """Set `key`, dropping the least recently used key past the size."""
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self.size:
            self._items.popitem(last=False)


class SessionMemory:
    """The gateway's recollection of recent sessions."""

    def __init__(self, sessions: int = RECENT_SESSIONS, responses: int = RECENT_RESPONSES) -> None:
        self.responses: Lru[str] = Lru(responses)
        """Answer id (Responses, Anthropic thread) → the session key of the request it answered."""
        self.cached: Lru[int] = Lru(sessions)
        """Session key → the cached input tokens its last answered turn read."""
        self.reach: Lru[float] = Lru(sessions)
        """Session key → the share of the unchanged prefix its last measured compaction read
        from the provider's cache."""

    def answered_by(self, response_id: str) -> str | None:
        """The session whose request the answer `response_id` answered."""
        return self.responses.get(response_id)

    def remember(self, response_id: str, session: str) -> None:
        """`response_id` answered a request of `session`."""
        self.responses.put(response_id, session)

    def measure_reach(self, session: str, cached: int, unchanged: int) -> float | None:
        """A compaction turn left `unchanged` tokens before its first change (system, tools
        and messages) and the provider read `cached` of the prompt from its cache: where it read
        less than that (a cache that keeps entries only at breakpoints, and none could be put at
        the end of the unchanged part), the next compaction will re-bill that much more (the
        share measured is returned; None: the prefix was too short to tell). Each
        measurement is averaged with the one before, so one miss of a best-effort cache (a
        request routed to another machine) does not price the session as if it had none."""
        if unchanged < MIN_REACH_PREFIX:
            return None
        measured = max(0.0, min(1.0, cached / unchanged))
        previous = self.reach.get(session)
        self.reach.put(session, measured if previous is None else (previous + measured) / 2)
        return measured

    def reach_of(self, session: str) -> float | None:
        """The session's last measured reach (None: none measured in this process)."""
        return self.reach.get(session)

    def cache_broke(self, session: str, cached: int, compacted: bool) -> bool:
        """Record a turn's cache read; True when a turn factrail did not compact read less of
        the cache than the session's previous turn (a session seen first counts nothing)."""
        previous = self.cached.get(session)
        self.cached.put(session, cached)
        return previous is not None and not compacted and cached < previous
