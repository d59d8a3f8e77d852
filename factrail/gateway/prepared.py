"""What the compaction step prepared for one request: the body to forward and what the answer
will be measured against."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from factrail.gateway.cache_marks import Anchor
from factrail.session import TurnResult


@dataclass
class Prepared:
    """The body to forward and what the compaction step did."""

    body: bytes
    outcome: str = "passthrough"
    session: str | None = None
    result: TurnResult | None = None
    removed_share: float = 0.0
    """Tokens the compaction step kept out of the body, over the tokens forwarded (estimates);
    in shadow mode, over the tokens of the whole body (which is what is forwarded)."""
    decoded: bool = False
    """The body is the rewritten, decoded form of one sent under a content coding."""
    chained: bool = False
    """A later request may continue the answer's id on the provider's side (every Responses
    request; an Anthropic one that keeps a thread): the id is remembered for its session."""
    moved: Anchor | None = None
    """Where this request's cache marker went, when not where the state store said the
    session's last one was (stored with what the answer taught, for the session's next turn)."""
    observe: Callable[[], None] | None = None
    """What the answer taught the session, to store once the answer is out (state store I/O,
    run off the event loop)."""
    shadow: bool = False
    """Shadow mode: the step ran on a copy and `body` is the client's own bytes."""
    whole_tokens: int = 0
    """The transcript's tokens as the client sent it (calibrated estimate): the turn log's
    `tokens_whole`."""
    client: str | None = None
    """The client, as its `User-Agent` names it (`clients.client_name`)."""
    model: str | None = None
