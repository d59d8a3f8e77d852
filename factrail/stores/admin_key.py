"""The admin key: configured (`FACTRAIL_ADMIN_KEY`), or made at the gateway's first start and
kept in a 0600 file beside its state, as Jupyter keeps its token.

Where the file is (one rule): `admin.key` in the folder of the SQLite state file
(`sqlite:///dir/state.db` → `dir/admin.key`); with any other state store (Redis, memory) in the
data folder where the default state file would be (`$XDG_DATA_HOME/factrail/admin.key`, beside
`outputs.key`). With neither (no usable data folder), the key is made for the process alone and
said again at each start.

Several workers may start at once: each publishes its candidate with `link()`, which fails when
the name exists, so the first one wins and every worker reads back the one file. A file that is
not a regular file of this user, or holds no usable key, is never trusted: the process then
makes a key of its own (the admin surface stays closed to anyone without it).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from factrail.stores import state_url
from factrail.stores.paths import data_root
from factrail.stores.private_files import read_own
from factrail.stores.secret import publish


class KeySettings(Protocol):
    """What the key's whereabouts depend on (the settings' `admin_key` and `state_url`)."""

    @property
    def admin_key(self) -> SecretLike: ...

    @property
    def state_url(self) -> str: ...


class SecretLike(Protocol):
    """A secret value (pydantic's `SecretStr`)."""

    def get_secret_value(self) -> str: ...


KEY_FILE = "admin.key"
READ_LIMIT = 1024
MIN_CHARS = 16
"""A key file holding fewer characters is not trusted (a generated key has 43)."""
log = logging.getLogger("factrail.app")

Announce = Callable[[Path | None, str], None]
"""Told once, by the process that made the key: where it is kept (None: nowhere) and the key."""


class KeyFileError(OSError):
    """The key file exists but cannot be trusted (not ours, not regular, malformed)."""


def key_file(url: str, env: Mapping[str, str] | None = None) -> Path | None:
    """Where the generated key of a gateway on the state store `url` is kept (see the module)."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() == "sqlite" and rest.startswith("/"):
        return Path(rest).parent / KEY_FILE
    root = data_root(env)
    return None if root is None else root / KEY_FILE


def path_for(settings: KeySettings, env: Mapping[str, str] | None = None) -> Path | None:
    """The key file of a gateway run with `settings`."""
    return key_file(state_url(settings.state_url, env), env)


def read(settings: KeySettings, env: Mapping[str, str] | None = None) -> str | None:
    """The configured key, else the one in the key file; None when neither is there or the file
    cannot be trusted."""
    configured = settings.admin_key.get_secret_value()
    if configured.strip():
        return configured
    path = path_for(settings, env)
    if path is None:
        return None
    try:
        return _read(path)
    except OSError:
        return None


def load_or_create(
    settings: KeySettings,
    *,
    announce: Announce | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """The admin key: the configured one, else the key file's, made (and `announce`d) when
    absent. Never empty: when no file can be used, a key for this process alone."""
    configured = settings.admin_key.get_secret_value()
    if configured.strip():
        return configured
    path = path_for(settings, env)
    if path is not None:
        try:
            return _read(path)
        except FileNotFoundError:
            pass
        except OSError as err:
            log.warning("the admin key file is not used (%s); a key for this process alone", err)
            path = None
    if path is not None:
        try:
            key, made = _create(path)
        except OSError as err:
            log.warning("could not keep the admin key (%s); a key for this process alone", err)
        else:
            if made and announce is not None:
                announce(path, key)
            return key
    key = secrets.token_urlsafe(32)
    if announce is not None:
        announce(None, key)
    return key


def login_line(path: Path | None, key: str, base_url: str) -> str:
    """The line a first start prints: where the key is and the link that signs a browser in."""
    where = f"in {path}" if path is not None else "for this process only (no data folder)"
    return f"factrail: admin key {where}; pages at {base_url.rstrip('/')}/factrail/login?key={key}"


def _read(path: Path) -> str:
    """The key in `path` (FileNotFoundError when absent, KeyFileError when untrusted)."""
    data = read_own(path, READ_LIMIT, KeyFileError)
    key = data.strip().decode("ascii", "replace")
    if len(key) < MIN_CHARS or not key.isprintable() or any(c.isspace() for c in key):
        raise KeyFileError(f"{path} does not hold a usable key; remove it to make a new one")
    return key


def _create(path: Path) -> tuple[str, bool]:
    """The key in `path` once one is published there: ours (True) or another process's."""
    if not path.parent.is_dir():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = secrets.token_urlsafe(32)
    if publish(path, key.encode("ascii") + b"\n"):
        return key, True
    return _read(path), False
