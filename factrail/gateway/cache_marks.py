"""One prompt-cache breakpoint at the end of the frozen zone, on Anthropic Messages requests.

Claude Code marks only its system prompt and its last message. A compaction changes the
transcript in the middle, after the last frozen message (`TurnResult.frozen_through`), so the
provider finds nothing cached past the system prompt and writes nearly everything again at the
cache-write price. With one more breakpoint on the last frozen message, that prefix is cached
turn after turn, and the next compaction (which leaves the frozen zone as it is) reads it.
Before the first compaction the frozen zone is the head no compaction changes (the messages
before the first result), reported once the session is past half its trigger.

Anthropic's rules, which the placing keeps:

- At most 4 `cache_control` markers per request ("A maximum of 4 blocks with cache_control may
  be provided"), counted over `tools`, `system` blocks, message content blocks (and the blocks
  inside a tool result) and a top-level `cache_control` (automatic caching). One is added only
  while a slot is free; the client's markers are never moved or removed.
- Thinking and redacted thinking blocks reject a marker ("...thinking.cache_control: Extra
  inputs are not permitted") and empty text blocks cannot be cached: the marker goes on the last
  block of the message of a type that carries one (`CACHEABLE_BLOCKS`).
- In the order `tools`, `system`, `messages`, a marker's TTL may not be longer than one before
  it ("a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block"). The
  marker takes the longest TTL among the client's markers after it (5 minutes when none), and
  none is placed when a marker before it is shorter than that.
- A breakpoint finds a cached prefix only at itself or up to about 20 blocks before it. A
  compaction moves the frozen zone's end by many more, so on a compaction turn the marker stays
  where the previous turn put it (the prefix the provider holds), when that message is unchanged;
  from the next turn on it marks the new end. Where it went is kept in the state store (the
  gateway passes it in as `stored`), since the previous turn may have run on another worker.

The marker is a pure function of the request and the frozen zone, so it is byte-stable from turn
to turn while the zone does not move. It is added to copies of the message, its content list and
the block: the client's parsed objects are never changed.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from factrail.gateway.sessions import RECENT_SESSIONS, Lru

log = logging.getLogger("factrail.cache_marks")

MAX_MARKS = 4
CACHEABLE_BLOCKS = frozenset({"text", "image", "document", "tool_use", "tool_result"})
"""Message content blocks that may carry `cache_control` (never `thinking`/`redacted_thinking`)."""
TTL_SECONDS: Mapping[str | None, int] = {None: 300, "5m": 300, "1h": 3600}
"""Anthropic's cache lifetimes; a marker without `ttl` lives 5 minutes."""
DEFAULT_TTL = 300


@dataclass(frozen=True, slots=True)
class Placed:
    """A wire message list with one marker added, and where."""

    messages: list[Any]
    message: int
    block: int


def _block_marks(block: Any) -> list[Any]:
    """The markers on a block (a message content block, a system block or a tool definition),
    those of the blocks nested in it (a tool result's content) first."""
    if not isinstance(block, dict):
        return []
    marks: list[Any] = []
    nested = block.get("content")
    if isinstance(nested, list):
        marks.extend(
            b["cache_control"]
            for b in nested
            if isinstance(b, dict) and b.get("cache_control") is not None
        )
    if block.get("cache_control") is not None:
        marks.append(block["cache_control"])
    return marks


def _message_marks(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [mark for block in content for mark in _block_marks(block)]


def _head_marks(body: Mapping[str, Any]) -> list[Any]:
    """The markers on tool definitions and system blocks, in the order the provider reads them."""
    marks: list[Any] = []
    for part in (body.get("tools"), body.get("system")):
        if isinstance(part, list):
            for item in part:
                marks.extend(_block_marks(item))
    return marks


def can_carry(block: Any) -> bool:
    """Whether a message content block may carry `cache_control`."""
    if not isinstance(block, dict) or block.get("type") not in CACHEABLE_BLOCKS:
        return False
    if block["type"] == "text":
        text = block.get("text")
        return isinstance(text, str) and bool(text.strip())
    return True


def target_block(message: Any) -> int | None:
    """The index of the last content block of `message` that may carry a marker."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return None
    return next((k for k in range(len(content) - 1, -1, -1) if can_carry(content[k])), None)


def _ttl(mark: Any) -> int | None:
    """A marker's lifetime in seconds; None when it is not one we know."""
    if not isinstance(mark, dict):
        return None
    ttl = mark.get("ttl")
    return TTL_SECONDS.get(ttl) if ttl is None or isinstance(ttl, str) else None


def requested_ttl(body: Mapping[str, Any]) -> int | None:
    """The longest lifetime the request's own markers ask for, in seconds (None: no marker, or
    none we know): how long what the previous turn wrote stays in the cache."""
    messages = body.get("messages")
    marks = _head_marks(body)
    if isinstance(messages, list):
        marks.extend(mark for message in messages for mark in _message_marks(message))
    return max((t for t in map(_ttl, marks) if t is not None), default=None)


def mark_between(before: Sequence[Any], after: Sequence[Any]) -> dict[str, str] | None:
    """The marker to place between the client's markers `before` and `after` (in the provider's
    order): as long-lived as the longest after it, never longer than any before it; None when
    no TTL fits or a client marker's TTL is unknown."""
    earlier = [_ttl(m) for m in before]
    later = [_ttl(m) for m in after]
    if None in earlier or None in later:
        return None
    ttl = max((t for t in later if t is not None), default=DEFAULT_TTL)
    if any(t is not None and t < ttl for t in earlier):
        return None
    return {"type": "ephemeral"} if ttl == DEFAULT_TTL else {"type": "ephemeral", "ttl": "1h"}


def place_mark(
    body: Mapping[str, Any], messages: Sequence[Any], index: int | None, block: int | None = None
) -> Placed | None:
    """`messages` (the wire list to forward; `body` holds the request's `tools`, `system` and
    top-level `cache_control`) with a marker at the end of message `index`: on `block`, or on
    its last block that may carry one. None when the rules leave no room for it: no such
    message or block, a marker already in that message, four markers in the request, or no TTL
    that keeps their order."""
    if index is None or not 0 <= index < len(messages):
        return None
    message = messages[index]
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list) or _message_marks(message):
        return None
    k = target_block(message) if block is None else block
    if k is None or not 0 <= k < len(content) or not can_carry(content[k]):
        return None
    if body.get("cache_control") is not None and index == len(messages) - 1:
        return None  # automatic caching marks the last cacheable block itself
    before = _head_marks(body)
    for m in messages[:index]:
        before.extend(_message_marks(m))
    after = [mark for m in messages[index + 1 :] for mark in _message_marks(m)]
    if body.get("cache_control") is not None:
        after.append(body["cache_control"])
    if len(before) + len(after) >= MAX_MARKS:
        return None
    mark = mark_between(before, after)
    if mark is None:
        return None
    new_content = list(content)
    new_content[k] = {**content[k], "cache_control": mark}
    new_messages = list(messages)
    new_messages[index] = {**message, "content": new_content}
    return Placed(new_messages, index, k)


def _fingerprint(message: Any) -> bytes:
    return hashlib.blake2b(orjson.dumps(message), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where the marker went in a session's last marked turn, and what that message was."""

    message: int
    block: int
    fingerprint: bytes

    def record(self) -> dict[str, Any]:
        """The anchor as the state store keeps it (`SessionState.mark`)."""
        return {"m": self.message, "b": self.block, "f": self.fingerprint.hex()}

    @staticmethod
    def from_record(record: Mapping[str, Any] | None) -> Anchor | None:
        """The anchor a `record` holds (None: none, or not one)."""
        if record is None:
            return None
        message, block, fingerprint = record.get("m"), record.get("b"), record.get("f")
        if not isinstance(message, int) or not isinstance(block, int):
            return None
        if not isinstance(fingerprint, str):
            return None
        try:
            return Anchor(message, block, bytes.fromhex(fingerprint))
        except ValueError:
            return None


class CacheMarks:
    """Places the frozen zone's marker, remembering per session where it went, so that a
    compaction turn marks the prefix the provider already holds: in memory (bounded), and
    through the caller in the state store, whose anchor (`stored`) wins, since the session's
    last turn may have run on another worker or replica."""

    def __init__(self, enabled: bool = True, sessions: int = RECENT_SESSIONS) -> None:
        self.enabled = enabled
        self._anchors: Lru[Anchor] = Lru(sessions)

    def place(
        self,
        session: str | None,
        outcome: str,
        body: Mapping[str, Any],
        messages: Any,
        frozen_through: int | None,
        stored: Anchor | None = None,
    ) -> tuple[list[Any] | None, Anchor | None]:
        """The wire messages with the marker added (None: forward `messages` as they are), and
        the anchor of the marker placed (None: none). Never raises: a marker is an
        optimisation."""
        if not self.enabled or frozen_through is None or not isinstance(messages, list):
            return None, None
        try:
            placed = self._place(session, outcome, body, messages, frozen_through, stored)
            if placed is None:
                return None, None
            anchor = Anchor(placed.message, placed.block, _fingerprint(messages[placed.message]))
            if session is not None:
                self._anchors.put(session, anchor)
        except Exception:
            log.warning("could not place the cache marker", exc_info=True)
            return None, None
        return placed.messages, anchor

    def _place(
        self,
        session: str | None,
        outcome: str,
        body: Mapping[str, Any],
        messages: list[Any],
        frozen_through: int,
        stored: Anchor | None,
    ) -> Placed | None:
        anchor = stored
        if anchor is None and session is not None:
            anchor = self._anchors.get(session)
        if (
            outcome == "compacted"
            and anchor is not None
            and anchor.message <= frozen_through
            and anchor.message < len(messages)
            and _fingerprint(messages[anchor.message]) == anchor.fingerprint
        ):
            placed = place_mark(body, messages, anchor.message, anchor.block)
            if placed is not None:
                return placed
        return place_mark(body, messages, frozen_through)
