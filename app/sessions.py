"""What the gateway remembers of recent sessions, in memory and bounded: which session each
answer id a later request may continue answered (a Responses `previous_response_id`, an Anthropic
thread's `previous_message_id`) and each session's last cache read; and how a compaction
turn's cache read measures how far the provider's cache reached (`reach_share`).

Both memories are per process; the chain is also kept in the state store (`StateStore.link`),
so a chain continued on another worker or replica finds its session there, and so is the reach
(`StateStore.observe`). Cache reads are compared within each process only.
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

    def answered_by(self, response_id: str) -> str | None:
        """The session whose request the answer `response_id` answered."""
        return self.responses.get(response_id)

    def remember(self, response_id: str, session: str) -> None:
        """`response_id` answered a request of `session`."""
        self.responses.put(response_id, session)

    def cache_broke(self, session: str, cached: int, compacted: bool) -> bool:
        """Record a turn's cache read; True when a turn factrail did not compact read less of
        the cache than the session's previous turn (a session seen first counts nothing)."""
        previous = self.cached.get(session)
        self.cached.put(session, cached)
        return previous is not None and not compacted and cached < previous


def reach_share(cached: int, unchanged: int) -> float | None:
    """A compaction turn left `unchanged` tokens before its first change (system, tools and
    messages) and the provider read `cached` of the prompt from its cache: the share of the
    unchanged prefix it read (less than all: a cache that keeps entries only at breakpoints,
    none of which could be put at the end of the unchanged part, so the next compaction will
    re-bill that much more). None when the prefix was too short to tell."""
    if unchanged < MIN_REACH_PREFIX:
        return None
    return max(0.0, min(1.0, cached / unchanged))
