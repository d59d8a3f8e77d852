"""What earlier turns learnt about each session's results, kept in memory and prepared ahead.

An `Analysis` (token scans, fact scores, value maps) is only ever a head start: losing it costs
time, never a different compaction. A session's analysis is held by one caller at a time
(`take` … `keep`), so a compaction and a background preparation never share one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from factrail.core.analysis import Analysis
from factrail.core.apply import prepare
from factrail.core.model import Message

log = logging.getLogger("factrail.session")

MAX_QUEUED_PREPARATIONS = 8
OUTCOMES = ("done", "failed", "skipped")
"""What became of a background preparation (`skipped`: the queue was full)."""
Observe = Callable[[str, float], None]
"""Hears of every background preparation: one of `OUTCOMES`, and its seconds."""


class _CollectorPause:
    """The cyclic garbage collector off while the rails run: they allocate tens of thousands of
    short-lived sets and tuples and no cycles, and the collections that triggers over a large heap
    cost ≈ 15% of a compaction. Concurrent pauses nest; the last one out turns the collector back
    on, if it was on before the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._was_enabled:
                    gc.enable()


collector_paused = _CollectorPause()
_yield = functools.partial(time.sleep, 0)


class Analyses:
    """The analyses of the most recently used sessions, and one thread that prepares them."""

    def __init__(self, capacity: int, head_chars: int, observe: Observe | None = None) -> None:
        self._capacity = max(capacity, 0)
        self._head_chars = head_chars
        self._observe = observe or (lambda outcome, seconds: None)
        self._kept: OrderedDict[str, Analysis] = OrderedDict()
        self._lock = threading.Lock()
        self._queued: set[asyncio.Future[None]] = set()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="factrail-prepare")
        """One thread: preparations queue behind each other, never in front of a compaction."""

    def take(self, session: str) -> Analysis:
        """The session's analysis, for this caller alone until `keep` (a new one while another
        compaction or preparation of the session holds it, or none was kept)."""
        with self._lock:
            return self._kept.pop(session, None) or Analysis()

    def keep(self, session: str, analysis: Analysis) -> None:
        """Keep the session's analysis, dropping the least recently used past the capacity."""
        dropped: list[Analysis] = []
        with self._lock:
            self._kept[session] = analysis
            while len(self._kept) > self._capacity:
                dropped.append(self._kept.popitem(last=False)[1])
        if dropped:
            # Freeing a long session's analysis (tens of thousands of objects) takes ≈ 2 ms:
            # on the preparation thread, not on the path of the request that evicted it.
            try:
                self._thread.submit(dropped.clear)
            except RuntimeError:
                dropped.clear()  # shut down: freed here instead

    def prepare_later(self, session: str, messages: Sequence[Message]) -> None:
        """Queue the analysis of the turn's new results on the preparation thread without
        waiting for it (skipped while the queue is full). Needs a running event loop."""
        if len(self._queued) >= MAX_QUEUED_PREPARATIONS:
            self._observe("skipped", 0.0)
            return
        job = asyncio.get_running_loop().run_in_executor(
            self._thread, self._prepare, session, messages
        )
        self._queued.add(job)
        job.add_done_callback(self._queued.discard)

    def _prepare(self, session: str, messages: Sequence[Message]) -> None:
        analysis = self.take(session)
        started = time.perf_counter()
        try:
            with collector_paused():
                # Sleeping 0 s after each result hands the interpreter to the threads serving
                # requests, which would otherwise wait up to the 5 ms switch interval each time.
                prepare(messages, analysis, head_chars=self._head_chars, between=_yield)
        except Exception:  # a head start only: the compaction redoes whatever is missing
            log.warning("background preparation of a session failed", exc_info=True)
            self._observe("failed", time.perf_counter() - started)
            return
        self.keep(session, analysis)
        self._observe("done", time.perf_counter() - started)

    async def settled(self) -> None:
        """Wait for the background preparations queued so far (tests, shutdown)."""
        while self._queued:
            await asyncio.gather(*self._queued, return_exceptions=True)

    def close(self) -> None:
        """Stop the preparation thread; queued preparations are dropped."""
        self._thread.shutdown(wait=False, cancel_futures=True)
