"""HTTP calls under one compaction deadline, with retries of transient failures inside it.

Every call's timeout is the time left. Connect/transport errors, 429 and 5xx are retried with
exponential backoff and jitter, or after the server's `Retry-After` when that fits in the time
left. Nothing ever runs past the deadline.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import anyio
import httpx

from factrail.judges.base import JudgeError, JudgeFailure, JudgeRound


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry within the deadline."""

    attempts: int = 4
    base_delay: float = 0.1
    max_delay: float = 2.0


DEFAULT_POLICY = RetryPolicy()


def is_transient(status: int) -> bool:
    """Statuses worth another try: rate limiting and server errors."""
    return status == 429 or 500 <= status <= 599


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """A `Retry-After` header (delta seconds or an HTTP date) as seconds from `now` (epoch)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, float(when.timestamp()) - now)


def backoff_delay(attempt: int, policy: RetryPolicy, rng: Callable[[], float]) -> float:
    """Exponential backoff capped at `max_delay`, with equal jitter (half fixed, half random)."""
    step = min(policy.max_delay, policy.base_delay * 2.0**attempt)
    return step * (0.5 + 0.5 * rng())


class DeadlineCaller:
    """Posts JSON bodies for one judge round, all under the same absolute deadline."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        deadline: float,
        known: Sequence[str] = (),
        policy: RetryPolicy = DEFAULT_POLICY,
        rng: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.deadline = deadline
        self.known = known
        self.policy = policy
        self.rng = rng
        self.clock = clock
        self.wall = wall
        self.budget_ms = max(0, math.ceil((deadline - clock()) * 1000))
        self.sent = 0
        """HTTP calls sent so far, retries included."""
        self.outcomes: dict[str, int] = {}
        """Every HTTP call by outcome: `ok` (a 2xx), `status`, `transport` or `deadline`."""

    def count(self, outcome: str) -> None:
        """Record one HTTP call's outcome."""
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def reclassify(self, outcome: str) -> None:
        """A 2xx whose body turned out unusable (`malformed`, `missing-answer`)."""
        if self.outcomes.get("ok", 0) > 0:
            self.outcomes["ok"] -= 1
        self.count(outcome)

    def finish(self, result: JudgeRound) -> JudgeRound:
        """`result` with this round's call count and outcomes filled in."""
        result.requests = self.sent
        result.outcomes = dict(self.outcomes)
        return result

    def deadline_error(self) -> JudgeError:
        return JudgeError.deadline(self.budget_ms)

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> httpx.Response:
        """POST `body` to exactly `url`; a 2xx response, or `JudgeFailure` with the last error."""
        last = self.deadline_error()
        for attempt in range(max(1, self.policy.attempts)):
            left = self.deadline - self.clock()
            if left <= 0:
                raise JudgeFailure(self.deadline_error())
            self.sent += 1
            try:
                # A scope, not `asyncio.timeout`: its cancellation respects the shield httpcore
                # hands a connection back under (a native one cut short would leak it).
                with anyio.fail_after(left):
                    response = await self.client.post(
                        url,
                        content=body,
                        headers=dict(headers),
                        timeout=left,
                        follow_redirects=False,
                    )
            except (TimeoutError, httpx.TimeoutException):
                self.count("deadline")
                raise JudgeFailure(self.deadline_error()) from None
            except httpx.TransportError as exc:
                self.count("transport")
                last = JudgeError.transport(exc, self.known)
                delay = backoff_delay(attempt, self.policy, self.rng)
            else:
                if response.is_success:
                    self.count("ok")
                    return response
                self.count("status")
                last = JudgeError.status(response.status_code, response.text, self.known)
                if not is_transient(response.status_code):
                    raise JudgeFailure(last)
                hinted = retry_after_seconds(response.headers.get("retry-after"), self.wall())
                delay = (
                    hinted if hinted is not None else backoff_delay(attempt, self.policy, self.rng)
                )
            if attempt + 1 >= self.policy.attempts or self.clock() + delay >= self.deadline:
                break
            await asyncio.sleep(delay)
        raise JudgeFailure(last)
