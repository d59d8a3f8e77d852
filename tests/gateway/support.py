"""Helpers for the gateway unit tests: a scripted engine and a test client over respx."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import respx
from fastapi.testclient import TestClient

from factrail.core.formats import anthropic, openai_chat, responses
from factrail.core.formats.base import Document
from factrail.core.model import Message
from factrail.gateway.engine import Engine
from factrail.gateway.factory import create_app
from factrail.policy.provenance import Evidence
from factrail.session import TurnResult, session_key
from factrail.settings import Settings
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.outputs import OutputStore
from factrail.stores.state import Observed

UPSTREAM = "http://upstream.test/v1"


@dataclass
class ScriptedCompactor:
    """Compacts by replacing every tool result with `REDUCED`, or raises when told to."""

    fail: bool = False
    outcome: str = "compacted"
    calls: list[tuple[str, str, int]] = field(default_factory=list)
    windows: list[int | None] = field(default_factory=list)
    """The window each call was told the client asked for."""
    cache_ttls: list[float | None] = field(default_factory=list)
    """The cache lifetime each call was told the client asked for."""
    usage: list[tuple[str, int, int]] = field(default_factory=list)
    closed: bool = False
    answered: list[tuple[str, int]] = field(default_factory=list)
    """`(session, upstream calls so far)` each time a passthrough turn's `after_answer` ran."""
    upstream_calls: Any = None
    """Something with a `call_count` (a respx route), read when `after_answer` runs."""
    after_answer_fails: bool = False
    reaches: list[float | None] = field(default_factory=list)
    """The cache reach each `observe_usage` was told a compaction turn measured."""
    threads: dict[str, int] = field(default_factory=dict)
    """The thread each of `compact` and `observe_usage` last ran on."""
    state: MemoryStateStore = field(default_factory=MemoryStateStore)
    """Where `observe_usage` keeps each session's cache read (share one between two compactors
    to play two workers of one store)."""
    lasts: list[bool] = field(default_factory=list)
    """Whether each call was told the provider is asked to summarize the transcript."""
    shadows: list[bool] = field(default_factory=list)
    """Whether each call ran in shadow mode."""
    tokens_after: int = 250
    invalidated_tokens: int = 600
    decision: str | None = None
    """What a compacted turn reports of itself."""

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
        self.calls.append((session, model, extra_tokens))
        self.shadows.append(shadow)
        self.threads["compact"] = threading.get_ident()
        self.lasts.append(last)
        self.windows.append(window)
        self.cache_ttls.append(cache_ttl_s)
        if self.fail:
            raise RuntimeError("engine bug")
        if self.outcome == "passthrough":

            def after_answer() -> None:
                if self.after_answer_fails:
                    raise RuntimeError("no thread for the preparation")
                calls = self.upstream_calls.call_count if self.upstream_calls is not None else -1
                self.answered.append((session, calls))

            return TurnResult(
                "passthrough",
                tokens_before=500,
                tokens_after=500,
                estimated_sent=500,
                after_answer=after_answer,
            )
        work = [m.copy() for m in doc.messages]
        for m in work:
            for r in m.tool_results:
                r.text = "REDUCED"
        return TurnResult(
            "compacted",
            document=doc.emit(work),
            tokens_before=1000,
            tokens_after=self.tokens_after,
            estimated_sent=250,
            judge="rules",
            reason="rules",
            compactions=1,
            invalidated_tokens=self.invalidated_tokens,
            decision=self.decision,  # type: ignore[arg-type]
        )

    def observe_usage(
        self, session: str, prompt_tokens: int, estimated_tokens: int, taught: Observed
    ) -> int | None:
        """Records the call; keeps what it taught in `state`, as the real step does."""
        if prompt_tokens > 0 and estimated_tokens > 0:
            self.usage.append((session, prompt_tokens, estimated_tokens))
        self.threads["observe_usage"] = threading.get_ident()
        self.reaches.append(taught.reach)
        return self.state.observe(session, taught)

    def transcript_tokens(self, messages: Sequence[Message]) -> int:
        """A flat 1000: what `compact` reports as the tokens before its compaction."""
        return 1000

    def close(self) -> None:
        self.closed = True


def make_client(
    settings: Settings, router: respx.MockRouter, compactor: Any, outputs: OutputStore
) -> TestClient:
    upstream = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))

    def factory(*_: Any) -> Engine:
        return Engine(
            compactor=compactor,
            session_key=session_key,
            parsers={
                "messages": openai_chat.parse,
                "input": responses.parse,
                "anthropic": anthropic.parse,
            },
        )

    app = create_app(
        settings,
        client=upstream,
        state=MemoryStateStore(),
        outputs=outputs,
        engine_factory=factory,
    )
    return TestClient(app)
