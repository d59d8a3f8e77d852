"""Exit status 0 after a graceful shutdown on SIGTERM.

uvicorn catches SIGTERM, shuts down gracefully (in-flight requests and streams get
`FACTRAIL_SHUTDOWN_TIMEOUT_S`, then the streams still open end with an error event), puts back
the handler it found and raises the signal again, so the process would end as if killed by it
(status -15, which supervisors report as a failure). The handler set here is the one uvicorn
finds and puts back: the raised signal then ends the process with status 0. A SIGTERM that comes
before uvicorn takes over exits 0 at once.
"""

from __future__ import annotations

import signal
from types import FrameType


def exit_zero_on_sigterm() -> None:
    """End the process with status 0 on SIGTERM, unless something (uvicorn) handles it first."""
    signal.signal(signal.SIGTERM, _exit_zero)


def _exit_zero(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)
