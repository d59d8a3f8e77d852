"""The upstream pool's gauges, refreshed every few seconds by one task per gateway process.

A connection the pool lost (busy with no request in flight) is never used again; enough of them
and every request waits out the pool timeout and fails with a 504. `orphaned` makes that visible
before it happens (see `app/relay.py` for the one cause found so far, now fixed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from app.metrics import Metrics
from app.upstream import ShardedTransport

log = logging.getLogger("factrail.app")

POOL_WATCH_S = 5.0
"""How often the gauges are refreshed."""

Sleep = Callable[[float], Awaitable[None]]


async def watch_pool(
    pool: ShardedTransport,
    metrics: Metrics,
    interval_s: float = POOL_WATCH_S,
    *,
    sleep: Sleep = asyncio.sleep,
) -> None:
    """Record the pool's state now, then every `interval_s` seconds, until cancelled; log once
    when connections are first found orphaned."""
    warned = False
    while True:
        state = pool.state()
        metrics.record_pool(state)
        if state.orphaned and not warned:
            warned = True
            log.warning(
                "%d upstream connections are busy with no request in flight: the pool lost them",
                state.orphaned,
            )
        await sleep(interval_s)
