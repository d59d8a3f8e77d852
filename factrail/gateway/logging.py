"""Structured logs: one JSON line per request, never with bodies or credentials.

A line's message and its string fields are redacted (`factrail.core.redact`) as it is
formatted: a credential quoted in an error (an upstream's message, a path, an exception text
passed as an argument) never reaches the log."""

from __future__ import annotations

import logging
import sys
from typing import Any

import orjson

from factrail.core.redact import redact

REQUEST_LOGGER = "factrail.request"
_request_log = logging.getLogger(REQUEST_LOGGER)


class JsonFormatter(logging.Formatter):
    """Render a record as one JSON object; fields passed as `extra={"fields": {...}}` merge in."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        line: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redact(record.getMessage()).text,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update((k, redact(v).text if isinstance(v, str) else v) for k, v in fields.items())
        if record.exc_info and record.exc_info[0] is not None:
            line["exc"] = record.exc_info[0].__name__
        return orjson.dumps(line, default=str).decode()


def configure_logging(level: str) -> None:
    """Send `factrail.*` logs as JSON lines to stderr at `level` (INFO when unknown)."""
    root = logging.getLogger("factrail")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root.handlers[:] = [handler]
    root.propagate = False
    resolved = logging.getLevelName(level.upper())
    root.setLevel(resolved if isinstance(resolved, int) else logging.INFO)


def log_request(**fields: Any) -> None:
    """Emit the one log line of a finished request (route, outcome, status, tokens, ms)."""
    _request_log.info("request", extra={"fields": fields})
