"""What a re-run note keeps of the read it replaces: the files a search named, the ids a read held.

A reproducible read can be fetched again, so its note drops the body. Two kinds of fact are worth
carrying anyway because they are short and agents act on them: the files a search or listing
named (the agent opens them next), and the ids a read held — digit-bearing tokens such as hashes,
build ids, order numbers — which the agent often quotes later without re-reading. Each stays
within a small share of the read's size. When every id sits on a short line and those lines fit
that share, the note keeps the lines themselves, as they were (the id with what names it:
`const BUILD_ID = "bld-90203555";`); otherwise it lists the ids.
"""

from __future__ import annotations

import re

from factrail.core.classify import search_paths

FILES_MAX_CHARS = 1500
IDS_MAX_CHARS = 400
ID_LINE_CHARS = 100
"""A line holding an id is kept whole only when it is at most this long (stripped)."""
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


def _ids_room(text: str) -> int:
    return min(IDS_MAX_CHARS, max(80, len(text) // 16))


def ids_line(text: str, ids: list[str] | None = None) -> str:
    """`ids: a, b (+N more)` for a read that holds ids, else `` (`ids`: its `read_ids`, when
    already found)."""
    return _listed("ids", read_ids(text) if ids is None else ids, _ids_room(text))


def id_lines(text: str, ids: list[str] | None = None) -> list[str]:
    """The distinct lines holding a read's ids (each id's first), as they were, when every one
    is at most `ID_LINE_CHARS` long and together they fit the ids' room; else none (`ids`: its
    `read_ids`, when already found)."""
    room = _ids_room(text)
    lines: dict[str, None] = {}
    for token in read_ids(text) if ids is None else ids:
        at = text.find(token)
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        line = text[start : end if end >= 0 else len(text)].removesuffix("\r")
        if len(line.strip()) > ID_LINE_CHARS:
            return []
        if line not in lines:
            lines[line] = None
            room -= len(line) + 1
            if room < 0:
                return []
    return list(lines)


def read_extras(text: str, files: str | None = None) -> list[str]:
    """The lines a re-run note carries after its mark: the files a search named, else the lines
    holding the ids a read held, else those ids listed (`files`: its `files_line`, when already
    found)."""
    listed = files_line(text) if files is None else files
    if listed:
        return [listed]
    ids = read_ids(text)
    lines = id_lines(text, ids)
    if lines:
        return lines
    listed = ids_line(text, ids)
    return [listed] if listed else []
