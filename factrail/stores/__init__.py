"""Stores: saved outputs, session state (plan, answers, calibration) and the decision log."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.outputs import OutputLimits, OutputStore
from factrail.stores.paths import cache_root, data_root
from factrail.stores.sqlite_state import MAX_BYTES, MEMORY, TTL_SECONDS, SqliteStateStore
from factrail.stores.state import StateStore, StoreConfigError

__all__ = ["StoreConfigError", "open_state_store", "output_store", "state_url"]

STATE_FILE = "state.db"
SECRET_FILE = "outputs.key"
"""The generated outputs secret, in the data root (`factrail.stores.secret`)."""


def open_state_store(
    url: str,
    *,
    max_bytes: int = MAX_BYTES,
    taint_keep_seconds: float = TTL_SECONDS,
    on_error: Callable[[str], None] | None = None,
) -> StateStore:
    """The store named by `url`: `sqlite:///abs/path.db`, `sqlite://:memory:` or `memory://`.
    `max_bytes` and `taint_keep_seconds` bound a SQLite store (`SqliteStateStore`).

    `redis://`, `rediss://` and `unix://` name a Redis or Valkey server shared by every worker
    and replica (`factrail.stores.redis_state`). `on_error(operation)` hears of every failed
    store call (a metric).

    Raises StoreConfigError for a relative SQLite path or an unknown scheme.
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise StoreConfigError(f"state URL {url!r} has no scheme; use sqlite:///abs/path.db")
    if scheme == "memory":
        return MemoryStateStore()
    if scheme == "sqlite":
        if rest == MEMORY:
            return SqliteStateStore(
                MEMORY, max_bytes=max_bytes, taint_keep_seconds=taint_keep_seconds
            )
        if not rest.startswith("/") or "?" in rest:
            raise StoreConfigError(
                f"state URL {url!r} needs an absolute path: sqlite:///abs/path.db"
            )
        return SqliteStateStore(
            rest, max_bytes=max_bytes, taint_keep_seconds=taint_keep_seconds, on_error=on_error
        )
    if scheme in ("redis", "rediss", "unix"):
        from factrail.stores.redis_state import RedisStateStore

        return RedisStateStore(url, taint_keep_seconds=taint_keep_seconds, on_error=on_error)
    raise StoreConfigError(
        f"unknown state store scheme {scheme!r}; use sqlite:///abs/path.db, redis://host:6379/0"
        " or memory://"
    )


def state_url(configured: str = "", env: Mapping[str, str] | None = None) -> str:
    """`configured` (`FACTRAIL_STATE_URL`), else `sqlite:///<data root>/state.db`, else
    `memory://` when no data root is usable."""
    if configured:
        return configured
    root = data_root(env)
    return "memory://" if root is None else f"sqlite://{root / STATE_FILE}"


def output_store(
    directory: str = "",
    known_secrets: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    *,
    secret: str = "",
    limits: OutputLimits | None = None,
) -> OutputStore | None:
    """The saved-output store under `directory` (`FACTRAIL_OUTPUTS_DIR`), else under
    `<cache root>/outputs`; None when no cache root is usable.

    Its capabilities are keyed by `secret` (`FACTRAIL_OUTPUTS_SECRET`) when given, else by the
    secret kept in `<data root>/outputs.key` (made on first use), else, with no usable data
    root, in `<outputs root>/.secret`."""
    if directory:
        root: Path | None = Path(directory)
    else:
        cache = cache_root(env)
        root = None if cache is None else cache / "outputs"
    if root is None:
        return None
    data = data_root(env)
    return OutputStore(
        root,
        known_secrets,
        secret=secret.encode("utf-8") if secret else None,
        secret_file=None if data is None else data / SECRET_FILE,
        limits=limits,
    )
