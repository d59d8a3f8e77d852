"""What the gateway remembers of recent answers, in memory and bounded: which session each
answer id a later request may continue answered (a Responses `previous_response_id`, an Anthropic
thread's `previous_message_id`); how a compaction turn's cache read measures how far the
provider's cache reached (`reach_share`); when a turn's cache read is a cache break
(`cache_broke`); and what a turn adds to its session's bill (`bill`).

The memory is per process; the chain is also kept in the state store (`StateStore.link`), so a
chain continued on another worker or replica finds its session there. A session's reach and its
last cache read are kept in the state store alone (`StateStore.observe`): a turn is compared
with the session's previous one wherever that ran.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

from factrail.gateway.usage import Usage
from factrail.policy.cost import billed_input, spared
from factrail.session import TurnResult

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
    """Which session each recent answer id answered."""

    def __init__(self, responses: int = RECENT_RESPONSES) -> None:
        self.responses: Lru[str] = Lru(responses)
        """Answer id (Responses, Anthropic thread) → the session key of the request it answered."""

    def answered_by(self, response_id: str) -> str | None:
        """The session whose request the answer `response_id` answered."""
        return self.responses.get(response_id)

    def remember(self, response_id: str, session: str) -> None:
        """`response_id` answered a request of `session`."""
        self.responses.put(response_id, session)


def cache_broke(previous: int | None, cached: int, compacted: bool) -> bool:
    """Whether a turn factrail did not compact read less of the cache (`cached`) than the
    session's previous turn (`previous`; None: none known, nothing to compare)."""
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


@dataclass(frozen=True, slots=True)
class TurnBill:
    """What one answered turn adds to its session's bill (billed-equivalent input tokens)."""

    billed: float
    """Its input, from the provider's split at the turn's prices."""
    kept_out: float
    """What the tokens it did not send would have cost (cache reads)."""
    rewritten: float
    """What re-writing what its compaction changed cost over reading it."""

    @property
    def spared(self) -> float:
        """What it cost less than sent whole (negative: more)."""
        return self.kept_out - self.rewritten


def bill(usage: Usage, removed: int, result: TurnResult) -> TurnBill | None:
    """An answered turn's share of its session's bill: its billed-equivalent input tokens, from
    the provider's split at the turn's prices, and what it cost less than sent whole (the
    `removed` tokens it did not send; on a compaction that was not free, less re-writing every
    token the provider did not read from its cache: what follows the first change, and any of
    the prefix its cache could not reach). None when the turn has no prices or the provider
    does not report its cache (its split says nothing of what it billed)."""
    price = result.prices
    if price is None or not usage.reports_cache:
        return None
    billed = billed_input(usage.uncached, usage.cached, usage.cache_write, price)
    paid = result.outcome == "compacted" and result.decision != "cold"
    rebilled = max(usage.prompt - usage.read, 0) if paid else 0
    return TurnBill(billed, *spared(removed, rebilled, price))
