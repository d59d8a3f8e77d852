"""Tool, MCP server and skill names as the fence compares them: one normalisation for every
spelling a client may use.

`fold` is the one normalisation: NFKC (full-width letters and ligatures become ASCII), Unicode
format characters (zero-width spaces and joiners, bidi marks, the BOM: category Cf) and Hangul
fillers removed, camelCase humps split, case folded, accents dropped, `-` as `_`. A name is then
its `tokens`: the runs of letters and digits between any other characters (`__`, `.`, `/`, `_`,
`:`, spaces).

A fenced entry (`mcp__<server>__<tool prefix>`, `<server>__`, or a bare server or name prefix)
matches a name when its tokens, joined, start where a token of the name starts (at its start,
after `mcp`, after a plugin prefix, anywhere): `mcp__email-gateway__` is seen in
`email-gateway.search`, `email_gateway/search`, `mcp_email_gateway_search`,
`EmailGatewaySearch`, `mcp__plugin_mail_email-gateway__x`, and in a call whose server is named
beside it. A false match only fences a session (safe); a missed one would leak it.

`body_view` folds a raw JSON body the same way (every character that is not a letter or digit
dropped), so each entry's needle is found in it (`may_hold`) whenever the body may hold a call
it fences.
"""

from __future__ import annotations

import contextlib
import functools
import re
import unicodedata
from dataclasses import dataclass

import orjson

MCP = "mcp"
CACHED_NAME = 256
"""Names up to this length are folded once and remembered (tool names repeat on every turn)."""
MANY_ESCAPES = 64
"""Past this many `\\u` escapes of printable characters a body is decoded whole before the
rest are folded."""
_FILLERS = re.compile("[\u115f\u1160\u3164\uffa0]")
"""Hangul fillers: letters that render as nothing."""
_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_TOKEN = re.compile(r"[^\W_]+")
_ENTRY_MCP = re.compile(r"^mcp_+(?=[^\W_])")
_ENTRY_SERVER = re.compile(r"__|[./]")
"""Where a fenced entry's server part ends (`mcp__<server>__<tool prefix>`)."""
_ESCAPE = re.compile(rb"\\u[0-9a-fA-F]{4}(?:\\+u[dD][c-fC-F][0-9a-fA-F]{2})?")
"""A JSON `\\u` escape (the backslashes of an outer nesting before it are dropped with every
other non-letter), with the low half of a surrogate pair when one follows."""
_HEX = re.compile(rb"[0-9a-fA-F]{4}")
ESCAPE_LETTERS = b"bfnrt"
"""The letters of JSON escapes (`\\n`, `\\t`) that stay once a backslash is dropped."""
_ASCII = bytes(range(128))
_DROP = bytes(b for b in range(256) if not (b < 128 and chr(b).isalnum()))


def _fold(name: str) -> str:
    text = unicodedata.normalize("NFKC", name)
    if not text.isascii():
        text = "".join(c for c in text if unicodedata.category(c) != "Cf")
        text = _FILLERS.sub("", text)
    text = _HUMP.sub("_", text).casefold()
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c))
    return text.replace("-", "_")


_fold_cached = functools.lru_cache(maxsize=8192)(_fold)


def fold(name: str) -> str:
    """A name as the fence compares it (see the module's docstring)."""
    return _fold_cached(name) if len(name) <= CACHED_NAME else _fold(name)


def tokens(name: str) -> tuple[str, ...]:
    """The letter-and-digit runs of a folded name: `mcp__Email-Gateway__x` gives
    `("mcp", "email", "gateway", "x")`."""
    return tuple(_TOKEN.findall(fold(name)))


@dataclass(frozen=True, slots=True)
class Spelled:
    """A name as entries are matched against it: its tokens joined, where a match may start
    (each token's start, and just after an `mcp` glued to a token), and how much of it is the
    server named beside the tool (an entry's server part must lie within it)."""

    text: str
    starts: frozenset[int]
    boundary: int

    @classmethod
    def of(cls, name: str, server: str | None = None) -> Spelled:
        """`name`, after `server` when a call names its server beside the tool."""
        if len(name) + len(server or "") <= CACHED_NAME:
            return _spelled_cached(name, server)
        return _spelled(name, server)

    def ends_with(self, text: str) -> bool:
        """Whether the name ends with `text`, starting where a token starts."""
        return bool(text) and self.text.endswith(text) and len(self.text) - len(text) in self.starts


@dataclass(frozen=True, slots=True)
class Entry:
    """A fenced tool entry: its server part and tool prefix, joined; `server` is the length of
    the server part (the whole entry when it names no tool)."""

    text: str
    server: int

    @classmethod
    def parse(cls, entry: str) -> Entry | None:
        """`mcp__<server>__<tool prefix>`, `<server>__`, `<server>.`, `<server>/`, or a bare
        name (a server, or a tool-name prefix); None for an entry that names nothing."""
        folded = _ENTRY_MCP.sub("", fold(entry).strip())
        server, *tool = _ENTRY_SERVER.split(folded, maxsplit=1)
        head = "".join(tokens(server))
        if not head:
            return None
        return cls(head + "".join(tokens(tool[0])) if tool else head, len(head))

    @property
    def needle(self) -> str:
        """What a body holding a call of this entry must hold once folded: its server part."""
        return self.text[: self.server]

    def matches(self, name: Spelled) -> bool:
        """Whether the entry starts where a token of `name` starts, its server part within
        the server named beside the tool (when one is)."""
        return any(
            name.text.startswith(self.text, p) and p + self.server <= name.boundary
            for p in name.starts
        )


def _spelled(name: str, server: str | None) -> Spelled:
    head = tokens(server) if server else ()
    parts = (*head, *tokens(name))
    starts: set[int] = set()
    at = 0
    for part in parts:
        starts.add(at)
        if part.startswith(MCP) and len(part) > len(MCP):
            starts.add(at + len(MCP))
        at += len(part)
    text = "".join(parts)
    return Spelled(text, frozenset(starts), sum(map(len, head)) if head else len(text))


_spelled_cached = functools.lru_cache(maxsize=8192)(_spelled)


def skill_spelled(value: str) -> Spelled:
    """The skill a `Skill` argument or slash command names: its first word, qualifier and all
    (`/plugin:skill args`)."""
    words = fold(value).split(maxsplit=1)
    return Spelled.of(words[0] if words else "")


def skill_text(skill: str) -> str:
    """A fenced skill name, folded and joined."""
    return "".join(tokens(skill))


def may_hold(body: bytes, needles: tuple[bytes, ...]) -> bool:
    """Whether a raw JSON body, folded as names are (`body_view`), may hold one of `needles`
    (folded ASCII): it holds one, or holds one with every escape letter dropped from both (a
    `\\n` or `\\t` between a name's letters leaves its letter in the view). True for a body
    that is not UTF-8."""
    view = body_view(body)
    if view is None:
        return True
    if any(n in view for n in needles):
        return True
    bare = view.translate(None, ESCAPE_LETTERS)
    return any(n.translate(None, ESCAPE_LETTERS) in bare for n in needles)


def body_view(body: bytes) -> bytes | None:
    """A raw JSON body folded as names are, every character that is not an ASCII letter or
    digit dropped: its `\\u` escapes (at any nesting) and non-ASCII characters folded one
    distinct character at a time. None when it is not UTF-8."""
    view = body
    controls = view.count(b"\\u000") + view.count(b"\\u001")
    if view.count(b"\\u") - controls > MANY_ESCAPES:
        # decoded at once (a client that escapes every non-ASCII character); a body that
        # does not decode is folded one escape at a time below
        with contextlib.suppress(orjson.JSONDecodeError, orjson.JSONEncodeError, RecursionError):
            view = orjson.dumps(orjson.loads(view))
    if b"\\u" in view:
        for escape in sorted(set(_ESCAPE.findall(view)), key=len, reverse=True):
            view = view.replace(escape, _escape_fold(escape))
    if not view.isascii():
        try:
            others = set(view.translate(None, _ASCII).decode("utf-8"))
        except UnicodeDecodeError:
            return None
        for char in others:
            if folded := _char_fold(char):
                view = view.replace(char.encode(), folded)
    return view.lower().translate(None, _DROP)


@functools.lru_cache(maxsize=4096)
def _char_fold(char: str) -> bytes:
    """The ASCII letters and digits a character folds to (none for most)."""
    return "".join(_TOKEN.findall(_fold(char))).encode("ascii", "ignore")


@functools.lru_cache(maxsize=4096)
def _escape_fold(escape: bytes) -> bytes:
    """The folded letters a `\\u` escape (or surrogate pair) spells."""
    high, *low = (int(h, 16) for h in _HEX.findall(escape.replace(b"\\u", b" ")))
    if low and 0xD800 <= high < 0xDC00:
        return _char_fold(chr(0x10000 + ((high - 0xD800) << 10) + (low[0] - 0xDC00)))
    units = [high, *low]
    return b"".join(_char_fold(chr(u)) for u in units if not 0xD800 <= u < 0xE000)
