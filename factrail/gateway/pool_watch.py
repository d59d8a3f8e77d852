"""The upstream pool's upkeep, every few seconds, by one task per gateway process: reclaim lost
connections, then refresh the pool's gauges.

A connection the pool lost (busy with no request in flight: its close was cut short) is never
used again; once a shard has lost all of its connections every request sent to it waits out the
pool timeout and fails with a 504, though the upstream is healthy. The one cause found so far
(a client leaving as a stream ends, see `relay.py`) is fixed; httpcore has open reports of
others, so the watch replaces any shard holding lost connections while nothing is in flight on
it (`ShardedTransport.reclaim`), counts them and logs a warning.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from factrail.gateway.metrics import Metrics
from factrail.gateway.upstream import ShardedTransport

log = logging.getLogger("factrail.app")

POOL_WATCH_S = 5.0
"""How often the pool is looked after."""

Sleep = Callable[[float], Awaitable[None]]


async def watch_pool(
    pool: ShardedTransport,
    metrics: Metrics,
    interval_s: float = POOL_WATCH_S,
    *,
    sleep: Sleep = asyncio.sleep,
) -> None:
    """Reclaim lost connections and record the pool's state now, then every `interval_s`
    seconds, until cancelled."""
    while True:
        try:
            lost = await pool.reclaim()
        except Exception:
            log.warning("reclaiming lost upstream connections failed", exc_info=True)
        else:
            if lost:
                metrics.pool_reclaimed.inc(lost)
                log.warning(
                    "reclaimed %d upstream connections the pool had lost (busy with no request "
                    "in flight); please report it",
                    lost,
                )
        metrics.record_pool(pool.state())
        await sleep(interval_s)
