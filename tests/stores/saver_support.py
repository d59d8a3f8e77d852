"""A saver process started and ready, for the tests that need a real child."""

from __future__ import annotations

import time
from typing import TypeVar

from factrail.stores.saver import OutputSaver

S = TypeVar("S", bound=OutputSaver)


def started(saver: S, timeout: float = 60) -> S:
    """`saver` once its child has started and answered (asserted, within `timeout` s)."""
    saver.start()
    deadline = time.monotonic() + timeout
    while not saver.ready and time.monotonic() < deadline:
        time.sleep(0.05)
    assert saver.ready, "the saver process did not start"
    return saver
