"""The decision log: one JSON line per installed model-judged compaction, one file per UTC day.

Layout: `<root>/<YYYY-MM-DD>.jsonl` (root defaults to `data_root()/decisions`); folder 0700,
files 0600. Files older than the retention are deleted (at the first append of each day, or by
`expire`). The log feeds `eval --judge recorded` and `dataset --teacher`.

The caller decides what is logged and must not append records for tainted sessions, rules-only
compactions or failed judge rounds, must write after the final resolution (what was installed),
and must never include tool-result contents, unredacted credentials or the judge key. The log
itself makes sure of two things whatever the caller passed: the `session` is a hashed key (one
that is not, e.g. a name given to `factrail compact --session`, is hashed here), and every
`endpoint` (top level or the judge's) keeps only its scheme, host, port and path: userinfo,
query and fragment, where URLs carry credentials, are dropped.

Each line carries its schema version (`schema.DECISION_SCHEMA`); `read_all` yields the lines of
the versions it knows and skips the others.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from factrail.stores.paths import data_root, ensure_private_dir
from factrail.stores.schema import DECISION_SCHEMA, version_of

log = logging.getLogger(__name__)

RETENTION_DAYS = 30
_DAY_FILE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.jsonl")
_HASHED_KEY = re.compile(r"[a-z]{1,3}-[0-9a-f]{16,64}")
"""The shape of the session keys `factrail.session.keys` makes (a prefix, then a blake2b hex)."""


def hashed_session(session: str) -> str:
    """`session` when it already is a hashed key, else `x-` and its blake2b hash."""
    if _HASHED_KEY.fullmatch(session):
        return session
    digest = hashlib.blake2b(session.encode("utf-8", "surrogatepass"), digest_size=12)
    return "x-" + digest.hexdigest()


def safe_endpoint(url: str) -> str:
    """`url` with only its scheme, host, port and path: no userinfo, query or fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def scrubbed(record: Mapping[str, Any]) -> dict[str, Any]:
    """`record` with its session hashed and its endpoints stripped of credentials."""
    out = dict(record)
    if isinstance(out.get("session"), str):
        out["session"] = hashed_session(out["session"])
    if isinstance(out.get("endpoint"), str):
        out["endpoint"] = safe_endpoint(out["endpoint"])
    judge = out.get("judge")
    if isinstance(judge, Mapping) and isinstance(judge.get("endpoint"), str):
        out["judge"] = {**judge, "endpoint": safe_endpoint(judge["endpoint"])}
    return out


def utc_day(now: float) -> date:
    """The UTC calendar day of a Unix time (times before the epoch count as 1970-01-01)."""
    return datetime.fromtimestamp(max(now, 0.0), UTC).date()


class DecisionLog:
    """Append-only JSON lines, one file per UTC day, with retention."""

    def __init__(self, root: Path, retention_days: int = RETENTION_DAYS) -> None:
        self.root = root
        self.retention_days = retention_days
        self._expired_on: date | None = None

    def path_for(self, day: date) -> Path:
        """The file of one UTC day."""
        return self.root / f"{day.isoformat()}.jsonl"

    def append(self, record: Mapping[str, Any], now: float) -> bool:
        """Append `record` as one line to today's file; False (never raises) when it failed."""
        day = utc_day(now)
        try:
            line = orjson.dumps(scrubbed(record), option=orjson.OPT_APPEND_NEWLINE)
            ensure_private_dir(self.root)
            if self._expired_on != day:
                self.expire(now)
                self._expired_on = day
            path = self.path_for(day)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
            fd = os.open(path, flags, 0o600)
            try:
                os.fchmod(fd, 0o600)
                written = os.write(fd, line)  # one write per line: O_APPEND keeps lines whole
            finally:
                os.close(fd)
        except (OSError, TypeError) as error:
            log.debug("decision log append failed: %s", error)
            return False
        return written == len(line)

    def read_all(self) -> Iterator[dict[str, Any]]:
        """Every record of version 1 or 2 (`DECISION_SCHEMA`), files in name (date) order and
        lines in order; bad lines, and lines of a version this reader does not know, skipped."""
        try:
            names = sorted(name for name in os.listdir(self.root) if name.endswith(".jsonl"))
        except OSError:
            return
        for name in names:
            try:
                data = (self.root / name).read_bytes()
            except OSError:
                continue
            for line in data.splitlines():
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(record, dict) and version_of(record) in (1, DECISION_SCHEMA):
                    yield record

    def expire(self, now: float) -> int:
        """Delete day files older than the retention; returns how many were deleted."""
        oldest_kept = utc_day(now) - timedelta(days=self.retention_days)
        deleted = 0
        try:
            names = os.listdir(self.root)
        except OSError:
            return 0
        for name in names:
            match = _DAY_FILE.fullmatch(name)
            if match is None:
                continue
            try:
                day = date(*(int(part) for part in match.groups()))
            except ValueError:
                continue
            if day < oldest_kept:
                with contextlib.suppress(OSError):
                    os.unlink(self.root / name)
                    deleted += 1
        return deleted


def default_decision_log(env: Mapping[str, str] | None = None) -> DecisionLog | None:
    """The log under `data_root(env)/decisions`, or None when no data root is usable."""
    root = data_root(env)
    return None if root is None else DecisionLog(root / "decisions")
