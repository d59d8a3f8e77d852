"""The saved outputs' timed sweep: retention, then the per-session and total byte quotas.

One task per gateway process, started by the app's lifespan; every worker on a volume sweeping
it is harmless (a sweep only removes what is past the retention or over a quota, oldest first).
A sweep runs in a worker thread so the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from factrail.gateway.metrics import Metrics
from factrail.stores.outputs import OutputStore

log = logging.getLogger("factrail.app")

Sleep = Callable[[float], Awaitable[None]]


async def sweep_outputs(
    store: OutputStore,
    interval_s: float,
    metrics: Metrics,
    *,
    clock: Callable[[], float] = time.time,
    sleep: Sleep = asyncio.sleep,
) -> None:
    """Sweep now, then every `interval_s` seconds, until cancelled; a failed sweep is logged
    and the next one runs on time."""
    while True:
        try:
            report = await asyncio.to_thread(store.sweep, clock())
        except Exception:
            log.warning("the saved-output sweep failed", exc_info=True)
        else:
            metrics.record_sweep(report)
            if report.expired or report.evicted:
                log.info(
                    "saved outputs swept: %d expired, %d evicted over quota, %d bytes left",
                    report.expired,
                    report.evicted,
                    report.bytes,
                )
        await sleep(interval_s)
