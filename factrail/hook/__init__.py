"""`factrail hook compact | turn | taint | status`: the Claude Code plugin's protocol, version 1.

One JSON object on stdin, one on stdout (`docs/protocol.md`). The plugin under `plugin/` holds no
policy: every rule is here, over the same engine and policy as the gateway. Credentials come
from this process's environment (`FACTRAIL_*`), never from the pipe. Whenever an answer was
written the exit status is 0, `"ok": false` included; a malformed request (any bytes: numbers of
any size, any nesting, invalid UTF-8, nothing at all), a wrong protocol version, an oversize
request, settings that may not be used (`factrail settings --check` says why) or an internal
error is an `"ok": false` answer, never a traceback, so the client's own behaviour runs.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

from factrail.hook.protocol import (
    EVENTS,
    PROTOCOL,
    HookError,
    answer,
    encode,
    read_request,
    refusal,
)
from factrail.settings_check import SettingsError

__all__ = ["EVENTS", "PROTOCOL", "main", "run_hook"]

log = logging.getLogger("factrail.hook")
DEFAULT_LIMIT = 32 * 1024 * 1024
"""How much of the request is read when the settings (`FACTRAIL_MAX_BODY_BYTES`) are unusable."""
Handler = Callable[[Mapping[str, Any]], dict[str, Any]]


def _handler(event: str) -> Handler:
    if event == "compact":
        from factrail.hook.compact import compact

        return compact
    if event == "turn":
        from factrail.hook.turn import turn

        return turn
    if event == "taint":
        from factrail.hook.fence import taint

        return taint
    from factrail.hook.status import status

    return status


def run_hook(event: str, data: bytes, *, limit: int | None = None) -> dict[str, Any]:
    """The answer to one request (never raises)."""
    try:
        if event not in EVENTS:
            raise HookError(f"unknown hook event {event!r}; expected one of {', '.join(EVENTS)}")
        if limit is None:
            from factrail.settings import Settings

            limit = Settings().max_body_bytes
        return answer(_handler(event)(read_request(data, limit)))
    except HookError as err:
        return refusal(str(err))
    except SettingsError as err:
        return refusal(f"settings: {err}")
    except Exception as err:  # the answer is the failure: the plugin falls back on it
        from factrail.core.redact import redact

        log.debug("hook %s failed", event, exc_info=True)
        return refusal(redact(f"internal error: {type(err).__name__}: {err}", ()).text)


def main(event: str, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """`factrail hook EVENT`: read stdin whole, write one answer line; 0 once it is written."""
    source = stdin if stdin is not None else sys.stdin.buffer
    sink = stdout if stdout is not None else sys.stdout.buffer
    try:
        body = _answer(event, source)
    except Exception as err:  # the one answer is written whatever happened
        body = refusal(f"internal error: {type(err).__name__}")
    sink.write(encode(body))
    sink.flush()
    return 0


def _answer(event: str, source: BinaryIO) -> dict[str, Any]:
    from factrail.settings import Settings

    try:
        limit = Settings().max_body_bytes
    except SettingsError as err:
        source.read(DEFAULT_LIMIT + 1)  # drained, so the writer never sees a broken pipe
        return refusal(f"settings: {err}")
    try:
        data = source.read(limit + 1)
    except Exception as err:
        return refusal(f"could not read the request: {type(err).__name__}")
    return run_hook(event, data, limit=limit)
