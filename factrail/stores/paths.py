"""Where the stores live (XDG roots), safe file-name components and private directories."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

APP_DIR = "factrail"
NAME_LIMIT = 200
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _root(env: Mapping[str, str] | None, xdg_var: str, home_parts: tuple[str, ...]) -> Path | None:
    environ: Mapping[str, str] = os.environ if env is None else env
    xdg = environ.get(xdg_var, "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / APP_DIR
    home = environ.get("HOME", "")
    if home and os.path.isabs(home):
        return Path(home).joinpath(*home_parts, APP_DIR)
    return None


def cache_root(env: Mapping[str, str] | None = None) -> Path | None:
    """`$XDG_CACHE_HOME/factrail`, else `$HOME/.cache/factrail`; None when neither is usable.

    Empty or relative values are ignored, as the XDG spec requires.
    """
    return _root(env, "XDG_CACHE_HOME", (".cache",))


def data_root(env: Mapping[str, str] | None = None) -> Path | None:
    """`$XDG_DATA_HOME/factrail`, else `$HOME/.local/share/factrail`; None when unusable."""
    return _root(env, "XDG_DATA_HOME", (".local", "share"))


def sanitise_name(name: str) -> str:
    """A safe single path component: first 200 chars, `[A-Za-z0-9_.-]` only, no leading dot.

    `../../etc/passwd` → `_._.._etc_passwd`, `..` → `_.`, `.expired` → `_expired`, `` → `_`.
    """
    safe = _UNSAFE.sub("_", name[:NAME_LIMIT])
    if safe.startswith("."):
        safe = "_" + safe[1:]
    return safe or "_"


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and any missing parents) as 0700; force 0700 on `path` even if it existed.

    Existing parents keep their mode; parents created here are 0700 too.
    """
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            continue
        os.chmod(directory, 0o700)
    if not path.is_dir():
        raise NotADirectoryError(str(path))
    os.chmod(path, 0o700)
    return path
