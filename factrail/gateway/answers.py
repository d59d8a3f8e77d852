"""What an answer teaches: the usage the upstream reported, counted for the fleet and left for
its session (calibration, cache reach, cache read, where its marker went, its share of the
session's bill, in shadow mode the bill it would have had) with one record of the turn for the
session's turn log."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, Protocol

from factrail.gateway.engine import Compactor, Engine
from factrail.gateway.metrics import Metrics
from factrail.gateway.prepared import Prepared
from factrail.gateway.sessions import SessionMemory, TurnBill, bill, cache_broke, reach_share
from factrail.gateway.usage import Usage, UsageReader
from factrail.policy.cost import billed_input, spared
from factrail.session import TurnResult
from factrail.stores.state import NOTHING, Observed

log = logging.getLogger("factrail.proxy")

MEASURED = frozenset({"pays", "forced"})
"""Compactions whose cache read says how far the provider's cache reaches (a compaction on a
cold cache reads nothing whatever the cache could)."""


class Links(Protocol):
    """Where answer ids (Responses, Anthropic threads) are remembered across processes (a
    `StateStore`)."""

    def link(self, response_id: str, session: str) -> None: ...
    def linked(self, response_id: str) -> str | None: ...


class Answers:
    """Reads what each answer teaches and leaves it for `Prepared.observe`."""

    def __init__(
        self,
        metrics: Metrics,
        sessions: SessionMemory,
        engine: Engine | None,
        links: Links | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.metrics = metrics
        self.sessions = sessions
        self.engine = engine
        self.links = links
        self.clock = clock

    def answered(self, prepared: Prepared, reader: UsageReader) -> None:
        """Count the usage the upstream reported; for a session, remember which session an id
        a later request may continue answered, and leave what the answer taught the session
        for `serve` to store (`Prepared.observe`)."""
        usage = reader.usage
        removed = 0
        if usage is not None:
            removed = round(usage.prompt * prepared.removed_share)
            self.metrics.record_usage(usage, 0 if prepared.shadow else removed, prepared.outcome)
        session = prepared.session
        if session is None:
            return
        if reader.response_id is not None and prepared.chained:
            self.sessions.remember(reader.response_id, session)
            if self.links is not None:  # for the other workers and replicas, off the loop
                loop = asyncio.get_running_loop()
                loop.run_in_executor(None, self.links.link, reader.response_id, session)
        if self.engine is None:
            return
        result = prepared.result
        compacted = prepared.outcome == "compacted"
        mark = prepared.moved.record() if prepared.moved is not None else None
        taught, prompt, estimated = Observed(mark=mark), 0, 0
        turn_bill: TurnBill | None = None
        projected: TurnBill | None = None
        if usage is not None and not usage.compacted:  # the provider's compaction: none is ours
            reach = self._reach(compacted, result, usage)
            if prepared.shadow:
                turn_bill = bill(usage, 0, result) if result is not None else None
                projected = projected_bill(usage, removed, result)
                if projected is not None:
                    self.metrics.record_projected(projected)
            else:
                turn_bill = bill(usage, removed, result) if result is not None else None
            if turn_bill is not None:
                self.metrics.record_bill(turn_bill)
            taught = Observed(
                reach=reach,
                cached=usage.read,
                mark=mark,
                billed=turn_bill.billed if turn_bill else None,
                spared=turn_bill.spared if turn_bill else None,
                projected_billed=projected.billed if projected else None,
                projected_spared=projected.spared if projected else None,
            )
            prompt = usage.prompt
            if result is not None:  # what was sent: the whole body in shadow mode
                estimated = prepared_estimate(prepared, result)
        if result is not None:
            record = turn_record(prepared, result, usage, turn_bill, projected, self.clock())
            taught = _with_turn(taught, record)
        if taught != NOTHING:
            compactor = self.engine.compactor
            prepared.observe = partial(
                self.observe, compactor, session, prompt, estimated, taught, compacted
            )

    def _reach(self, compacted: bool, result: TurnResult | None, usage: Usage) -> float | None:
        """How far the provider's cache reached on a compaction turn that can tell."""
        if not compacted or result is None or result.decision not in MEASURED:
            return None
        if not usage.reports_cache:
            return None
        reach = reach_share(usage.read, result.tokens_after - result.invalidated_tokens)
        if reach is not None:
            self.metrics.cache_reach.observe(reach)
        return reach

    def observe(
        self,
        compactor: Compactor,
        session: str,
        prompt: int,
        estimated: int,
        taught: Observed,
        compacted: bool,
    ) -> None:
        """Store what an answer taught its session (in a thread, once the answer is out) and
        count a cache break against the session's previous turn, wherever that one ran."""
        previous = compactor.observe_usage(session, prompt, estimated, taught)
        if taught.cached is not None and cache_broke(previous, taught.cached, compacted):
            self.metrics.cache_breaks.inc()


def prepared_estimate(prepared: Prepared, result: TurnResult) -> int:
    """The (uncalibrated) estimate of what went upstream, which the provider's prompt tokens
    calibrate: the step's own, or in shadow mode the whole transcript's."""
    if not prepared.shadow or result.estimated_sent <= 0 or result.tokens_after <= 0:
        return result.estimated_sent
    return round(result.estimated_sent * prepared.whole_tokens / result.tokens_after)


def projected_bill(usage: Usage, removed: int, result: TurnResult | None) -> TurnBill | None:
    """In shadow mode, the bill a turn the client sent whole would have had through factrail:
    its own bill (the whole, as sent) less the `removed` tokens the step would have kept out
    (cache reads), plus re-writing what a compaction that was not free would have changed
    (its estimate of the tokens from the first change on). None without prices or a cache
    report, as `sessions.bill`."""
    price = result.prices if result is not None else None
    if result is None or price is None or not usage.reports_cache:
        return None
    whole = billed_input(usage.uncached, usage.cached, usage.cache_write, price)
    paid = result.outcome == "compacted" and result.decision != "cold"
    rebilled = result.invalidated_tokens if paid else 0
    kept_out, rewritten = spared(removed, rebilled, price)
    return TurnBill(whole - kept_out + rewritten, kept_out, rewritten)


def turn_record(
    prepared: Prepared,
    result: TurnResult,
    usage: Usage | None,
    turn_bill: TurnBill | None,
    projected: TurnBill | None,
    now_s: float,
) -> dict[str, Any]:
    """One answered turn as the session's turn log keeps it (figures only, no content):
    tokens as sent and as whole (calibrated estimates; in shadow mode, as factrail would have
    sent them), the provider's prompt tokens, and the turn's bill against sending it whole."""
    compacted = result.outcome == "compacted"
    billed = projected if prepared.shadow else turn_bill
    record: dict[str, Any] = {
        "at_ms": int(now_s * 1000),
        "outcome": result.outcome,
        "decision": result.decision if compacted else None,
        "shadow": prepared.shadow,
        "tokens_whole": max(prepared.whole_tokens, result.tokens_after),
        "tokens_sent": result.tokens_after,
        "prompt": usage.prompt if usage is not None else None,
        "billed": round(billed.billed, 1) if billed is not None else None,
        "whole_billed": round(billed.billed + billed.spared, 1) if billed is not None else None,
        "client": prepared.client,
        "model": prepared.model,
    }
    return record


def _with_turn(taught: Observed, record: dict[str, Any]) -> Observed:
    """`taught` carrying the turn's record for the session's turn log."""
    return replace(taught, turn=record)
