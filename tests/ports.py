"""Loopback ports for the servers the tests start.

A port found free by binding port 0 stays free only until the server binds it; under
pytest-xdist a server of another worker could take it meanwhile, and the first test would then
talk to the other worker's server. So each xdist worker hands out ports from a range of its own,
below the kernel's ephemeral ports, in turn (a port still bound is skipped); a run without
workers binds port 0 as before.
"""

from __future__ import annotations

import itertools
import os
import socket

BASE = 20_000
SPAN = 1_000
"""Worker `gwN` takes ports `BASE + N·SPAN` to `BASE + (N+1)·SPAN − 1`."""
WORKERS = 12
"""Workers with a range of their own (up to port 31,999, under Linux's ephemeral 32,768)."""

_turn = itertools.count()


def _worker() -> int | None:
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    number = name.removeprefix("gw")
    return int(number) if name.startswith("gw") and number.isdigit() else None


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A loopback port no server holds now, and none of another worker's will."""
    worker = _worker()
    if worker is not None and worker < WORKERS:
        low = BASE + worker * SPAN
        for _ in range(SPAN):
            port = low + next(_turn) % SPAN
            if _bindable(port):
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
