"""Private files: created 0600 without following links, written atomically, read only when
they are regular files of this user (the saved outputs' and the admin key's discipline)."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

READ_LIMIT = 16 * 1024 * 1024
"""The most `read_private` reads by default (twice the saved outputs' cap)."""


def _temp_name(path: Path) -> Path:
    """A fresh hidden name beside `path`."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically (temp file in the same folder, then rename), mode 0600."""
    temp = _temp_name(path)
    if not create_private(temp, data):
        raise FileExistsError(f"temp file {temp} exists")
    try:
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def create_private(path: Path, data: bytes) -> bool:
    """Create `path` holding `data`, mode 0600, unless it exists (then False, nothing written).

    No temp file and rename: nothing can refer to a file that did not exist before the request
    that names it leaves, so no reader can see it half-written; a failed write removes it.
    """
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return False
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    return True


def already_saved(path: Path, data: bytes) -> bool:
    """Whether `path` is a private regular file holding exactly `data` (a session that lost its
    plan compacts the same results again; renaming over a file forces a flush on ext4)."""
    try:
        info = os.lstat(path)
        if (
            not stat.S_ISREG(info.st_mode)
            or stat.S_IMODE(info.st_mode) != 0o600
            or info.st_size != len(data)
        ):
            return False
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            return f.read() == data
    except OSError:
        return False


def read_private(root: Path, folder: str, name: str, limit: int = READ_LIMIT) -> bytes | None:
    """The bytes of `<root>/<folder>/<name>` when the folder and the file are ours: neither
    followed through a symlink (`O_NOFOLLOW`, relative to the root), the folder a directory and
    the file a regular file, both owned by this user; None for anything else (missing, a link, a
    FIFO, another user's file, unreadable). At most `limit` bytes are read."""
    uid = os.getuid()
    try:
        dir_fd = os.open(
            os.path.join(root, folder),
            os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
        )
    except OSError:
        return None
    try:
        if os.fstat(dir_fd).st_uid != uid:
            return None
        # O_NONBLOCK: opening a FIFO planted under the name must not wait for a writer.
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != uid:
            return None
        chunks: list[bytes] = []
        left = min(info.st_size, limit)
        while left > 0:
            chunk = os.read(fd, min(left, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_own(path: Path, limit: int, untrusted: type[OSError]) -> bytes:
    """At most `limit` bytes of `path`, a small file of our own (a key, a secret): never followed
    through a link nor waited on (a FIFO), refused with `untrusted` unless a regular file of this
    user, tightened to 0600 when it was looser; FileNotFoundError when absent."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise untrusted(f"{path} is not a regular file owned by this user")
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, 0o600)
        return os.read(fd, limit)
    finally:
        os.close(fd)
