"""Saved outputs: the original text of reduced tool results, on disk, private, bounded, expiring.

Layout: `<root>/<capability>/<sanitised tool_use_id>.txt`; directories 0700, files 0600. The
capability is an HMAC of the session key under the server secret (`factrail.stores.secret`):
unguessable without the secret, the same for every turn of the session, and different for two
sessions that merely start alike. The output id `"<capability>/<sanitised tool_use_id>"` names a
saved output for the HTTP route and the CLI; `parse_output_id` accepts only ids of exactly that
shape (no traversal). Knowing the id is what entitles a caller to the output: only the session
it was saved under was ever told it, and no listing or report names it.

Reads open the session folder and the file with `O_NOFOLLOW` relative to the root and serve only
a regular file owned by this user. Disk use is bounded: a per-session and a total byte quota,
enforced oldest file first when a save needs room (a save that cannot fit is refused with
`QuotaExceeded`, and its note then names the call, not a saved copy), and `sweep` (run on a timer
by the gateway) deletes files past the retention and enforces both quotas again.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import os
import re
import secrets
import stat
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from factrail.core.redact import redact
from factrail.stores.paths import ensure_private_dir, sanitise_name
from factrail.stores.private_files import already_saved, create_private, read_private, write_private
from factrail.stores.secret import load_or_create_secret

CAP_BYTES = 8 * 1024 * 1024
DAY_SECONDS = 24 * 60 * 60
RETENTION_DAYS = 30.0
EXPIRED_MARKER = ".expired"
EMPTY_FOLDER_GRACE_S = 60.0
"""An empty session folder younger than this is left to the next sweep: a save may have just
made it for the file it is about to write."""
SECRET_FILE = ".secret"
"""The secret's file under the root when the store is given neither a secret nor a file."""
SUFFIX = ".txt"
MIB = 1024 * 1024
MAX_BYTES = 2048 * MIB
SESSION_MAX_BYTES = 64 * MIB
CAPABILITY_CHARS = 32
_CAPABILITY = re.compile(r"[0-9a-f]{32}")
_CAPABILITY_CONTEXT = b"factrail saved outputs v1\x00"


@dataclass(frozen=True)
class OutputLimits:
    """How much saved output may stay on disk, and for how long."""

    max_bytes: int = MAX_BYTES
    """All sessions together (0: no total quota)."""
    session_max_bytes: int = SESSION_MAX_BYTES
    """One session (0: no per-session quota)."""
    retention_days: float = RETENTION_DAYS


class QuotaExceeded(OSError):
    """A save the byte quota refused: nothing was written."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EDQUOT, message)


@dataclass(frozen=True)
class SweepReport:
    """What one sweep removed and what it left."""

    expired: int = 0
    """Files past the retention."""
    evicted: int = 0
    """Files removed, oldest first, to bring a session or the whole under its quota."""
    files: int = 0
    bytes: int = 0
    """Files and bytes left."""


def is_capability(value: str) -> bool:
    """Whether `value` has the shape of a session capability (32 lower-case hex digits)."""
    return _CAPABILITY.fullmatch(value) is not None


@dataclass(frozen=True)
class SavedOutput:
    """Where one output was saved and how much of it."""

    path: Path
    output_id: str
    bytes_written: int
    truncated: bool
    redactions: dict[str, int]  # replacements per credential family (for metrics)


def parse_output_id(value: str) -> tuple[str, str] | None:
    """`(folder, tool_use_id)` of a well-formed output id; None for anything else.

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


@dataclass(slots=True)
class _File:
    """One saved file as a sweep or a quota sees it."""

    mtime: float
    size: int
    path: str
    folder: str


def _folder_files(folder: str) -> list[_File]:
    """The regular files directly in `folder` (links and folders are not ours and not counted)."""
    out: list[_File] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            try:
                if entry.is_file(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    out.append(_File(info.st_mtime, info.st_size, entry.path, folder))
            except OSError:
                continue
    return out


def _oldest_first(files: Iterable[_File]) -> list[_File]:
    return sorted(files, key=lambda f: (f.mtime, f.path))


class OutputStore:
    """Saved full outputs under one root folder (default: `cache_root()/outputs`)."""

    def __init__(
        self,
        root: Path,
        known_secrets: Sequence[str] = (),
        *,
        secret: bytes | None = None,
        secret_file: Path | None = None,
        limits: OutputLimits | None = None,
    ) -> None:
        """`known_secrets` (e.g. the judge key) are redacted along with credential shapes.

        `secret` keys the capabilities; without it the secret is read from `secret_file`
        (default `<root>/.secret`), made there the first time it is needed.
        """
        self.root = root
        self.limits = limits or OutputLimits()
        self._known = tuple(s for s in known_secrets if s)
        self._secret = secret or None
        self._secret_file = secret_file if secret_file is not None else root / SECRET_FILE
        self._secret_lock = threading.Lock()
        self._lock = threading.Lock()
        """Serialises this process's quota accounting, evictions and sweeps."""
        self._total: int | None = None
        """Bytes under the root as last measured plus what this process wrote since."""

    @property
    def known_secrets(self) -> tuple[str, ...]:
        """The known values redacted besides the credential shapes."""
        return self._known

    def writable(self) -> bool:
        """Whether an output could be saved now: the root exists (made private if not) and a
        file can be created and removed in it (a read-only or full volume cannot)."""
        try:
            ensure_private_dir(self.root)
            probe = self.root / f".probe-{os.getpid()}-{secrets.token_hex(4)}"
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, b"x")
            finally:
                os.close(fd)
            probe.unlink()
        except OSError:
            return False
        return True

    # -- names -----------------------------------------------------------------------------------

    def capability(self, session: str) -> str:
        """The session's capability: its folder name and the first part of its output ids.

        Raises OSError when the secret cannot be had (then nothing can be saved)."""
        message = _CAPABILITY_CONTEXT + session.encode("utf-8", "surrogatepass")
        digest = hmac.new(self._key(), message, hashlib.sha256).hexdigest()
        return digest[:CAPABILITY_CHARS]

    def output_id(self, session: str, tool_use_id: str) -> str:
        """The public id of a saved output: `<capability>/<sanitised tool_use_id>`."""
        return f"{self.capability(session)}/{sanitise_name(tool_use_id)}"

    def path_for(self, session: str, tool_use_id: str) -> Path:
        """Absolute path of the file for this session and tool call."""
        return _file(self.root / self.capability(session), tool_use_id)

    def paths_for(self, session: str, tool_use_ids: Iterable[str]) -> dict[str, str]:
        """`str(path_for(session, i))` of each id, the capability derived once."""
        folder = os.path.join(self.root, self.capability(session))
        return {i: os.path.join(folder, _file_name(i)) for i in tool_use_ids}

    def _key(self) -> bytes:
        if self._secret is None:
            with self._secret_lock:
                if self._secret is None:
                    self._secret = load_or_create_secret(self._secret_file)
        return self._secret

    # -- saving ----------------------------------------------------------------------------------

    def save(self, session: str, tool_use_id: str, text: str) -> SavedOutput:
        """Save the original `text` redacted for credentials, capped at 8 MiB; overwrites.

        Raises OSError when the file cannot be written or the quota refuses it (the caller then
        keeps its note as is).
        """
        got = self.save_all(session, [(tool_use_id, text)])[tool_use_id]
        if isinstance(got, OSError):
            raise got
        return got

    def save_all(
        self, session: str, outputs: Sequence[tuple[str, str]]
    ) -> dict[str, SavedOutput | OSError]:
        """`save` of each `(tool_use_id, text)` of one session, the folders made private once:
        what was saved, or the error that kept it from being saved (`QuotaExceeded` when the
        quota refused it), by id."""
        try:
            folder, present = self._session_files(session)
        except OSError as e:
            return {tool_use_id: e for tool_use_id, _ in outputs}
        batch: set[str] = set()
        out: dict[str, SavedOutput | OSError] = {}
        for tool_use_id, text in outputs:
            data, truncated, redactions = self._redacted(text)
            name = _file_name(tool_use_id)
            path = folder / name
            try:
                self._make_room(folder, present, name, len(data), batch)
                try:
                    self._write(path, data)
                except FileNotFoundError:  # a sweep removed the emptied folder meanwhile
                    self._private_folder(session)
                    self._write(path, data)
            except OSError as e:
                out[tool_use_id] = e
                continue
            present[name] = _File(0.0, len(data), str(path), str(folder))
            batch.add(name)
            out[tool_use_id] = _saved(path, len(data), truncated, redactions)
        return out

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        if not create_private(path, data):
            if already_saved(path, data):
                os.utime(path)  # saved again now: the expiry counts from here
            else:
                write_private(path, data)

    def _make_room(
        self, folder: Path, present: dict[str, _File], name: str, size: int, batch: set[str]
    ) -> None:
        """Make room for `size` bytes under `name` in a session folder whose files are
        `present`: the session's oldest files go first, then (under the total quota) the oldest
        of any session; never a file of this batch. QuotaExceeded when it cannot fit."""
        session_cap = self.limits.session_max_bytes
        previous = present[name].size if name in present else 0
        if session_cap > 0:
            if size > session_cap:
                raise QuotaExceeded(f"an output of {size} bytes is over the per-session quota")
            used = sum(f.size for f in present.values()) - previous
            evictable = (
                []
                if used + size <= session_cap
                else [f for n, f in present.items() if n != name and n not in batch]
            )
            if used - sum(f.size for f in evictable) + size > session_cap:
                raise QuotaExceeded("the session's saved outputs are at the per-session quota")
            for f in _oldest_first(evictable):
                if used + size <= session_cap:
                    break
                if _remove(f.path):
                    self._account(-f.size)
                    used -= f.size
                    del present[os.path.basename(f.path)]
            if used + size > session_cap:
                raise QuotaExceeded("the session's saved outputs are at the per-session quota")
        self._reserve(size - previous, folder, (*batch, name))

    def _reserve(self, delta: int, folder: Path, names: Iterable[str]) -> None:
        """Count `delta` more bytes under the total quota, removing the oldest files (not the
        `names` in `folder`: this batch's) when they would not fit; QuotaExceeded when even that
        is not enough."""
        cap = self.limits.max_bytes
        if cap <= 0:
            return
        with self._lock:
            if self._total is None:
                self._total = sum(f.size for f in self._scan())
            if self._total + delta > cap:
                keep = {str(folder / n) for n in names}
                files = self._scan()
                total = self._total = sum(f.size for f in files)
                if sum(f.size for f in files if f.path in keep) + delta > cap:
                    raise QuotaExceeded("saved outputs are at the total quota")  # drop nothing
                for f in _oldest_first(files):
                    if total + delta <= cap:
                        break
                    if f.path not in keep and _remove(f.path):
                        total -= f.size
                self._total = total
                if total + delta > cap:
                    raise QuotaExceeded("saved outputs are at the total quota")
            self._total += delta

    def _account(self, delta: int) -> None:
        with self._lock:
            if self._total is not None:
                self._total = max(self._total + delta, 0)

    def _session_files(self, session: str) -> tuple[Path, dict[str, _File]]:
        """The session's private folder and its files by name; made again, once, when a sweep
        removed it (empty) between making and listing it."""
        folder = self._private_folder(session)
        try:
            files = _folder_files(str(folder))
        except FileNotFoundError:
            folder = self._private_folder(session)
            files = _folder_files(str(folder))
        return folder, {os.path.basename(f.path): f for f in files}

    def _private_folder(self, session: str) -> Path:
        """The session's folder, it and the root made private (OSError when they cannot be, or
        when the folder's name is taken by anything but a directory, a symlink included)."""
        folder = self.root / self.capability(session)
        ensure_private_dir(self.root)
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISLNK(os.lstat(folder).st_mode):
                raise NotADirectoryError(f"{folder} is a symlink")
        ensure_private_dir(folder)
        return folder

    def _redacted(self, text: str) -> tuple[bytes, bool, dict[str, int]]:
        """What is saved of `text`: redacted, capped bytes, whether cut, redactions by family."""
        redacted = redact(text, self._known)
        data, truncated = cap_bytes(redacted.text)
        return data, truncated, dict(redacted.families)

    # -- reading ---------------------------------------------------------------------------------

    def get(self, output_id: str, *, capability_only: bool = False) -> str | None:
        """The saved text for a well-formed output id, or None (bad id, missing, unreadable, not
        a regular file of ours, reached through a symlink).

        `capability_only` (the HTTP route): only ids whose folder is a capability; the folders
        of older versions were named by the session key, which is not a secret."""
        parts = parse_output_id(output_id)
        if parts is None or (capability_only and not is_capability(parts[0])):
            return None
        data = read_private(self.root, parts[0], parts[1] + SUFFIX, limit=2 * CAP_BYTES)
        return None if data is None else data.decode("utf-8", "replace")

    # -- expiry and quotas -----------------------------------------------------------------------

    def _scan(self) -> list[_File]:
        """Every regular file in every session folder (a missing root has none)."""
        files: list[_File] = []
        try:
            with os.scandir(self.root) as entries:
                folders = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            return files
        for folder in folders:
            with contextlib.suppress(OSError):
                files.extend(_folder_files(folder))
        return files

    def expire(self, now: float, days: float | None = None) -> int:
        """Delete files whose mtime is more than `days` (default: the retention) old, then
        empty session folders. A missing root is fine; files or folders that cannot be removed
        are skipped. Returns the number of files deleted."""
        cutoff = now - (self.limits.retention_days if days is None else days) * DAY_SECONDS
        with self._lock:
            files = self._scan()
            deleted = sum(1 for f in files if f.mtime < cutoff and _remove(f.path))
            self._total = None
            _remove_empty({f.folder for f in files} | self._folders(), now)
        return deleted

    def sweep(self, now: float) -> SweepReport:
        """Delete files past the retention, then the oldest files of each session over the
        per-session quota, then the oldest of all while over the total quota; remove emptied
        folders. Never raises for a file it cannot remove (it is skipped)."""
        cutoff = now - self.limits.retention_days * DAY_SECONDS
        with self._lock:
            files = self._scan()
            kept: list[_File] = []
            expired = evicted = 0
            for f in files:
                if f.mtime < cutoff and _remove(f.path):
                    expired += 1
                else:
                    kept.append(f)
            by_folder: dict[str, list[_File]] = {}
            for f in kept:
                by_folder.setdefault(f.folder, []).append(f)
            session_cap = self.limits.session_max_bytes
            survivors: list[_File] = []
            for group in by_folder.values():
                used = sum(f.size for f in group)
                for f in _oldest_first(group):
                    if session_cap > 0 and used > session_cap and _remove(f.path):
                        used -= f.size
                        evicted += 1
                    else:
                        survivors.append(f)
            total = sum(f.size for f in survivors)
            left: list[_File] = []
            for f in _oldest_first(survivors):
                if 0 < self.limits.max_bytes < total and _remove(f.path):
                    total -= f.size
                    evicted += 1
                else:
                    left.append(f)
            self._total = total
            _remove_empty({f.folder for f in files} | self._folders(), now)
        return SweepReport(expired=expired, evicted=evicted, files=len(left), bytes=total)

    def maybe_sweep(self, now: float, every: float = DAY_SECONDS) -> SweepReport | None:
        """Run `sweep` at most once per `every` seconds (across processes), recorded by the
        mtime of `<root>/.expired`; a marker dated in the future also suppresses the run.
        Returns None when skipped."""
        marker = self.root / EXPIRED_MARKER
        try:
            last = marker.stat().st_mtime
        except FileNotFoundError:
            last = None
        except OSError:
            return None
        if last is not None and now - last < every:
            return None
        report = self.sweep(now)
        try:
            fd = os.open(marker, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
            os.close(fd)
            os.utime(marker, (now, now))
        except OSError:
            pass
        return report

    def _folders(self) -> set[str]:
        try:
            with os.scandir(self.root) as entries:
                return {e.path for e in entries if e.is_dir(follow_symlinks=False)}
        except OSError:
            return set()


def _remove(path: str) -> bool:
    """Unlink `path`; False when it could not be removed (already gone counts as removed)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _remove_empty(folders: Iterable[str], now: float) -> None:
    """Remove the empty folders among `folders` last changed `EMPTY_FOLDER_GRACE_S` before
    `now`: a younger one may be a save's, made an instant ago for the file it is about to write
    (in this process or another sharing the volume)."""
    before = now - EMPTY_FOLDER_GRACE_S
    for folder in folders:
        with contextlib.suppress(OSError):
            if os.stat(folder).st_mtime < before:
                os.rmdir(folder)  # fails (and is skipped) while the folder is not empty
