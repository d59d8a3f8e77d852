"""The server secret behind saved-output capabilities: configured, or made once and kept on disk.

When `FACTRAIL_OUTPUTS_SECRET` is unset, 32 random bytes are made the first time a capability is
needed and kept (hex, one line) in a 0600 file, by default `$XDG_DATA_HOME/factrail/outputs.key`,
so a restart and every worker sharing the volume derive the same capabilities. Several processes
may start at once: each writes its candidate to a private temp file and publishes it with
`link()`, which fails when the name exists, so the first one wins and every process then reads
back the one file on disk. A file that is not a regular file of this user, or not 64 hex digits,
is refused (never silently replaced: that would orphan every saved output's URL).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path

from factrail.stores.paths import ensure_private_dir
from factrail.stores.private_files import read_own

SECRET_BYTES = 32
READ_LIMIT = 1024
READ_TRIES = 5
RETRY_PAUSE_S = 0.02


class SecretFileError(OSError):
    """The secret file exists but cannot be used (not ours, not regular, malformed)."""


def load_or_create_secret(path: Path) -> bytes:
    """The secret kept in `path`, made (and published once, race-free) when absent.

    Raises OSError (SecretFileError for an unusable file) when no secret can be had.
    """
    ensure_private_dir(path.parent)
    last: OSError | None = None
    for attempt in range(READ_TRIES):
        try:
            return _read_secret(path)
        except FileNotFoundError:
            publish(path, secrets.token_bytes(SECRET_BYTES).hex().encode("ascii") + b"\n")
            continue
        except SecretFileError as err:
            # Only a publisher without link() writes in place: give it a moment to finish.
            last = err
            time.sleep(RETRY_PAUSE_S * (attempt + 1))
    raise last or SecretFileError(f"{path}: no usable secret")


def _read_secret(path: Path) -> bytes:
    """The secret in `path` (FileNotFoundError when absent, SecretFileError when unusable)."""
    data = read_own(path, READ_LIMIT, SecretFileError)
    text = data.strip()
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != SECRET_BYTES:
        raise SecretFileError(
            f"{path} does not hold a {SECRET_BYTES}-byte hex secret; set FACTRAIL_OUTPUTS_SECRET"
            " or remove the file (saved outputs' URLs then change)"
        )
    return key


def publish(path: Path, data: bytes) -> bool:
    """Make `path` (0600) hold `data` unless another process got there first (then leave it);
    whether this call made it."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)  # atomic and exclusive: the first publisher wins
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: create in place, exclusively
            return _create_in_place(path, data)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)
    return True


def _create_in_place(path: Path, data: bytes) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return False
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return True
