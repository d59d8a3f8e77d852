"""Saved outputs: the original text of reduced tool results, on disk, private and expiring.

Layout: `<root>/<sanitised session>/<sanitised tool_use_id>.txt`; directories 0700, files 0600.
The output id `"<sanitised session>/<sanitised tool_use_id>"` names a saved output for the HTTP
route and the CLI; `parse_output_id` accepts only ids of exactly that shape (no traversal).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from factrail.core.redact import redact
from factrail.stores.paths import ensure_private_dir, sanitise_name

CAP_BYTES = 8 * 1024 * 1024
DAY_SECONDS = 24 * 60 * 60
RETENTION_DAYS = 30.0
EXPIRED_MARKER = ".expired"
SUFFIX = ".txt"


@dataclass(frozen=True)
class SavedOutput:
    """Where one output was saved and how much of it."""

    path: Path
    output_id: str
    bytes_written: int
    truncated: bool
    redactions: dict[str, int]  # replacements per credential family (for metrics)


def output_id(session: str, tool_use_id: str) -> str:
    """The public id of a saved output: `<sanitised session>/<sanitised tool_use_id>`."""
    return f"{sanitise_name(session)}/{sanitise_name(tool_use_id)}"


def parse_output_id(value: str) -> tuple[str, str] | None:
    """`(session, tool_use_id)` of a well-formed output id; None for anything else.

    Both components must already be in sanitised form, so `..`, `.`, hidden names, extra
    slashes and backslashes are all rejected.
    """
    parts = value.split("/")
    if len(parts) != 2:
        return None
    for part in parts:
        if part in ("", ".", "..") or sanitise_name(part) != part:
            return None
    return parts[0], parts[1]


def cap_bytes(text: str, cap: int = CAP_BYTES) -> tuple[bytes, bool]:
    """`text` as UTF-8, cut to at most `cap` bytes on a character boundary plus a note.

    Unencodable lone surrogates become `?`. Returns the bytes and whether they were cut.
    """
    data = text.encode("utf-8", "replace")
    total = len(data)
    if total <= cap:
        return data, False
    cut = cap
    while cut > 0 and data[cut] & 0xC0 == 0x80:
        cut -= 1
    note = f"\n[factrail saved the first {cut} of {total} bytes of this output]\n"
    return data[:cut] + note.encode("ascii"), True


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


def _file_name(tool_use_id: str) -> str:
    """The name of `tool_use_id`'s output file in its session's folder."""
    return sanitise_name(tool_use_id) + SUFFIX


def _file(folder: Path, tool_use_id: str) -> Path:
    """The file of `tool_use_id`'s output in a session's folder."""
    return folder / _file_name(tool_use_id)


def _saved(path: Path, size: int, truncated: bool, redactions: dict[str, int]) -> SavedOutput:
    """What was saved at `path` (its id is `<folder>/<file name without .txt>`)."""
    oid = f"{path.parent.name}/{path.name.removesuffix(SUFFIX)}"
    return SavedOutput(path, oid, size, truncated, redactions)


class OutputStore:
    """Saved full outputs under one root folder (default: `cache_root()/outputs`)."""

    def __init__(self, root: Path, known_secrets: Sequence[str] = ()) -> None:
        """`known_secrets` (e.g. the judge key) are redacted along with credential shapes."""
        self.root = root
        self._known = tuple(s for s in known_secrets if s)

    @property
    def known_secrets(self) -> tuple[str, ...]:
        """The known values redacted besides the credential shapes."""
        return self._known

    def path_for(self, session: str, tool_use_id: str) -> Path:
        """Absolute path of the file for this session and tool call."""
        return _file(self.root / sanitise_name(session), tool_use_id)

    def paths_for(self, session: str, tool_use_ids: Iterable[str]) -> dict[str, str]:
        """`str(path_for(session, i))` of each id, the session's folder made once."""
        folder = os.path.join(self.root, sanitise_name(session))
        return {i: os.path.join(folder, _file_name(i)) for i in tool_use_ids}

    def save(self, session: str, tool_use_id: str, text: str) -> SavedOutput:
        """Save the original `text` redacted for credentials, capped at 8 MiB; overwrites.

        Raises OSError when the file cannot be written (the caller then keeps its note as is).
        """
        got = self.save_all(session, [(tool_use_id, text)])[tool_use_id]
        if isinstance(got, OSError):
            raise got
        return got

    def save_all(
        self, session: str, outputs: Sequence[tuple[str, str]]
    ) -> dict[str, SavedOutput | OSError]:
        """`save` of each `(tool_use_id, text)` of one session, the folders made private once:
        what was saved, or the error that kept it from being saved, by id."""
        try:
            folder = self._private_folder(session)
        except OSError as e:
            return {tool_use_id: e for tool_use_id, _ in outputs}
        out: dict[str, SavedOutput | OSError] = {}
        for tool_use_id, text in outputs:
            data, truncated, redactions = self._redacted(text)
            path = _file(folder, tool_use_id)
            try:
                if not create_private(path, data):
                    if already_saved(path, data):
                        os.utime(path)  # saved again now: the expiry counts from here
                    else:
                        write_private(path, data)
            except OSError as e:
                out[tool_use_id] = e
                continue
            out[tool_use_id] = _saved(path, len(data), truncated, redactions)
        return out

    def _private_folder(self, session: str) -> Path:
        """The session's folder, it and the root made private (OSError when they cannot be)."""
        folder = self.root / sanitise_name(session)
        ensure_private_dir(self.root)
        ensure_private_dir(folder)
        return folder

    def _redacted(self, text: str) -> tuple[bytes, bool, dict[str, int]]:
        """What is saved of `text`: redacted, capped bytes, whether cut, redactions by family."""
        redacted = redact(text, self._known)
        data, truncated = cap_bytes(redacted.text)
        return data, truncated, dict(redacted.families)

    def get(self, output_id: str) -> str | None:
        """The saved text for a well-formed output id, or None (bad id, missing, unreadable)."""
        parts = parse_output_id(output_id)
        if parts is None:
            return None
        path = self.root / parts[0] / (parts[1] + SUFFIX)
        try:
            return path.read_bytes().decode("utf-8", "replace")
        except OSError:
            return None

    def expire(self, now: float, days: float = RETENTION_DAYS) -> int:
        """Delete files whose mtime is more than `days` old, then empty session folders.

        A missing root is fine; files or folders that cannot be removed are skipped.
        Returns the number of files deleted.
        """
        cutoff = now - days * DAY_SECONDS
        deleted = 0
        try:
            sessions = [entry for entry in os.scandir(self.root) if entry.is_dir()]
        except OSError:
            return 0
        for folder in sessions:
            try:
                files = list(os.scandir(folder.path))
            except OSError:
                continue
            for entry in files:
                try:
                    if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                        os.unlink(entry.path)
                        deleted += 1
                except OSError:
                    continue
            with contextlib.suppress(OSError):
                os.rmdir(folder.path)  # fails (and is skipped) while the folder is not empty
        return deleted

    def maybe_expire(self, now: float, days: float = RETENTION_DAYS) -> int | None:
        """Run `expire` at most once per 24 h, recorded by the mtime of `<root>/.expired`.

        A marker dated in the future also suppresses the run. Returns None when skipped.
        """
        marker = self.root / EXPIRED_MARKER
        try:
            last = marker.stat().st_mtime
        except FileNotFoundError:
            last = None
        except OSError:
            return None
        if last is not None and now - last < DAY_SECONDS:
            return None
        deleted = self.expire(now, days)
        try:
            fd = os.open(marker, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
            os.close(fd)
            os.utime(marker, (now, now))
        except OSError:
            pass
        return deleted
