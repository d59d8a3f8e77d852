"""The recent sessions' bills for the dashboard: of the sessions the state store saw last, how
many are settled, how many of those cost more than sent whole, and all of them against sending
them whole (`factrail.session.inspect.summary`).

One task per gateway process, started by the app's lifespan, reads the store every
`BILLS_INTERVAL_S` in a worker thread; every worker and replica reads the same shared store, so
their gauges agree (exported as the largest of the live workers').
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial

from factrail.gateway.metrics import Metrics
from factrail.session.inspect import recent_bills, summary
from factrail.stores.state import StateStore

log = logging.getLogger("factrail.app")

BILLS_INTERVAL_S = 60.0
BILLS_SESSIONS = 200
"""How many of the most recently updated records each reading looks at."""

Sleep = Callable[[float], Awaitable[None]]


async def watch_bills(
    store: StateStore,
    metrics: Metrics,
    *,
    live_s: float,
    interval_s: float = BILLS_INTERVAL_S,
    limit: int = BILLS_SESSIONS,
    clock: Callable[[], float] = time.time,
    sleep: Sleep = asyncio.sleep,
) -> None:
    """Read the recent sessions' bills now, then every `interval_s` seconds, until cancelled (a
    session seen within `live_s` is live: its last compaction may yet pay back); a failed
    reading is logged and the next one runs on time."""
    while True:
        try:
            read = partial(recent_bills, live_s=live_s, now=clock(), last_turn=False)
            rows = await asyncio.to_thread(read, store, limit)
        except Exception:
            log.warning("reading the recent sessions' bills failed", exc_info=True)
        else:
            metrics.record_bills(summary(rows))
        await sleep(interval_s)
