"""What a re-run note keeps of the read it replaces: the files a search named, the ids a read held.

A reproducible read can be fetched again, so its note drops the body. Two kinds of fact are worth
carrying anyway because they are short and agents act on them: the files a search or listing
named (the agent opens them next), and the ids a read held — digit-bearing tokens such as hashes,
build ids, order numbers — which the agent often quotes later without re-reading. Each list stays
within a small share of the read's size.
"""

from __future__ import annotations

import re

from factrail.core.classify import search_paths

FILES_MAX_CHARS = 1500
IDS_MAX_CHARS = 400
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@#-]{5,}")
_LETTER = re.compile(r"[A-Za-z]")
_DIGIT = re.compile(r"[0-9]")
_TRAILING = ".:,"


def _listed(label: str, items: list[str], room: int) -> str:
    """`<label>: a, b (+N more)` with as many items as fit in `room` chars, else ``."""
    kept: list[str] = []
    used = 0
    for item in items:
        if used + len(item) + 2 > room:
            break
        kept.append(item)
        used += len(item) + 2
    if not kept:
        return ""
    more = len(items) - len(kept)
    tail = f" (+{more} more)" if more else ""
    return f"{label}: {', '.join(kept)}{tail}"


def files_line(text: str) -> str:
    """`files: a, b (+N more)` for a search or listing output, else ``.

    Paths stay whole (no shared prefix factored out): the agent quotes them as they were.
    """
    return _listed("files", search_paths(text), min(FILES_MAX_CHARS, max(160, len(text) // 8)))


def read_ids(text: str) -> list[str]:
    """Distinct ids of a read in order: ≥ 6 chars with a digit and a letter, or ≥ 8 digits."""
    seen: dict[str, None] = {}
    for m in _ID.finditer(text):
        t = m.group().rstrip(_TRAILING)
        if len(t) < 6 or not _DIGIT.search(t):
            continue
        if _LETTER.search(t) or len(t) >= 8:
            seen.setdefault(t)
    return list(seen)


def ids_line(text: str) -> str:
    """`ids: a, b (+N more)` for a read that holds ids, else ``."""
    return _listed("ids", read_ids(text), min(IDS_MAX_CHARS, max(80, len(text) // 16)))


def read_extras(text: str) -> list[str]:
    """The line a re-run note carries after its mark: the files a search named, else the ids a
    read held."""
    line = files_line(text) or ids_line(text)
    return [line] if line else []
