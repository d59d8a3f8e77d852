"""What the gateway needs from the engine, and how it builds the real one from its settings.

The gateway depends on the `Engine` bundle only, so tests inject fakes; the real
`factrail.session.SessionCompactor` comes from `factrail.runtime` (`build_engine`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from factrail import runtime
from factrail.core.formats import anthropic, openai_chat, responses
from factrail.core.formats.base import Document
from factrail.core.model import Message
from factrail.core.plan import JudgeRequest
from factrail.judges.base import Judge, JudgeRound
from factrail.policy.provenance import Evidence
from factrail.session import TurnResult, session_key
from factrail.session.keys import Chain
from factrail.settings import Settings
from factrail.stores.outputs import OutputStore
from factrail.stores.state import Observed, StateStore


class Compactor(Protocol):
    """The per-request compaction step (`factrail.session.SessionCompactor`)."""

    async def compact(
        self,
        session: str,
        doc: Document,
        *,
        model: str,
        extra_tokens: int = 0,
        evidence: Evidence | None = None,
        window: int | None = None,
        cache_ttl_s: float | None = None,
        last: bool = False,
        shadow: bool = False,
    ) -> TurnResult:
        """Re-apply, decide, judge, apply the rails, save, persist."""
        ...

    def observe_usage(
        self, session: str, prompt_tokens: int, estimated_tokens: int, taught: Observed
    ) -> int | None:
        """Calibrate the token estimate from the upstream's reported prompt tokens and keep the
        rest an answer taught (`taught`); the session's previous cache read."""
        ...

    def transcript_tokens(self, messages: Sequence[Message]) -> int:
        """Estimated (uncalibrated) tokens of a transcript."""
        ...

    def close(self) -> None:
        """Stop what the compactor started (its preparation thread)."""
        ...


SessionKey = Callable[[Mapping[str, str], Mapping[str, Any], Document, str, Chain | None], str]
"""`factrail.session.session_key(headers, body, doc, model, chain)`."""
Parser = Callable[[Any], Document]


@dataclass(frozen=True)
class Engine:
    """The compactor, the session-key function and a parser per body field."""

    compactor: Compactor
    session_key: SessionKey
    parsers: Mapping[str, Parser]
    """Parser key → parser: `messages` (chat completions), `input` (Responses), `anthropic`
    (Messages API; the gateway adds the top-level `system` to the system texts)."""


class TimedJudge:
    """A judge wrapper that records `factrail_judge_seconds` for every round it runs."""

    def __init__(self, judge: Judge, observe: Callable[[float], None]) -> None:
        self._judge = judge
        self._observe = observe
        self.kind = judge.kind
        self.model = judge.model
        self.local = judge.local
        self.endpoint = judge.endpoint
        self.known_secrets = judge.known_secrets

    async def ask(self, requests: Sequence[JudgeRequest], *, deadline: float) -> JudgeRound:
        """Delegate, timing the round."""
        started = time.perf_counter()
        try:
            return await self._judge.ask(requests, deadline=deadline)
        finally:
            self._observe(time.perf_counter() - started)


def build_engine(
    settings: Settings,
    *,
    state: StateStore,
    outputs: OutputStore | None,
    judge: Judge,
    observe_judge: Callable[[float], None],
    observe_preparation: Callable[[str, float], None] | None = None,
) -> Engine:
    """The real engine: the runtime's session compactor over the stores and the (timed)
    judge, with the decision log the settings call for."""
    compactor = runtime.compactor(
        settings,
        judge=TimedJudge(judge, observe_judge),
        state=state,
        outputs=outputs,
        observe_preparation=observe_preparation,
    )
    return Engine(
        compactor=compactor,
        session_key=session_key,
        parsers={
            "messages": openai_chat.parse,
            "input": responses.parse,
            "anthropic": anthropic.parse,
        },
    )
