"""Tool, MCP server and skill names as the fence compares them: one normalisation for every
spelling a client may use.

`fold` is the one normalisation: NFKC (full-width letters, ligatures and mathematical letters
become ASCII), Unicode format characters (zero-width spaces and joiners, bidi marks, the BOM:
category Cf) and Hangul fillers removed, accents dropped, the letters of other scripts that
look like a Latin letter (Cyrillic `а е о р с у х і ј ѕ`, Greek `ο α ι κ ν`, the Turkish
dotless `ı`, small capitals, Cherokee and Armenian look-alikes, enclosed and regional-indicator
letters) read as that letter, camelCase humps split, case folded, `-` as `_`. A name is then
its `tokens`: the runs of letters and digits between any other characters (`__`, `.`, `/`,
`_`, `:`, spaces). Where names are compared joined, the ASCII letters a font hardly tells
apart are one letter too (`l`, `I` and `1` read as `i`; `0` as `o`).

A fenced entry (`mcp__<server>__<tool prefix>`, `<server>__`, or a bare server or name prefix)
matches a text when its tokens, joined, start where a token of the text starts (at its start,
after `mcp`, after a plugin prefix, anywhere): `mcp__email-gateway__` is seen in
`email-gateway.search`, `email_gateway/search`, `mcp_email_gateway_search`,
`EmailGatewaySearch`, `mcp__plugin_mail_email-gateway__x`, `functions.mcp__email-gateway__x`,
in a call whose server is named beside it, and in any text of a call's input. A false match
only fences a session (safe); a missed one would leak it.

A text is also read as its escapes decode it (`variants`: `\\u0065`, `\\x65`, `%65`, `&#101;`,
`&eacute;`, nested, a few rounds deep). `body_view` folds raw bytes the same way (every
character that is not a letter or digit dropped), so each entry's needle is found in them
(`may_hold`) whenever they may hold a text the fence would match.
"""

from __future__ import annotations

import contextlib
import functools
import re
import unicodedata
from dataclasses import dataclass
from html.entities import html5

import orjson

MCP = "mcp"
CACHED_NAME = 256
"""Names up to this length are folded once and remembered (tool names repeat on every turn)."""
MANY_ESCAPES = 64
"""Past this many `\\u` escapes of printable characters a body is decoded whole before the
rest are folded."""
ESCAPE_ROUNDS = 6
"""How many layers of escapes (`%2565` is two) a text is decoded through."""
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
_SKELETON = str.maketrans("l10", "iio")
_SKELETON_BYTES = bytes.maketrans(b"l10", b"iio")
"""ASCII letters a font hardly tells apart, compared as one (`l`, `I`, `1`; `0`, `o`)."""
_LOOK_ALIKES = {
    "a": "\u0430\u0251\u03b1\u1d00\u237a", "b": "\u044c\u0299\u0180\u03b2\u0432",
    "c": "\u0441\u03f2\u03c2\u1d04\u023c", "d": "\u0501\u0111\u1d05\u0257",
    "e": "\u0435\u0454\u03b5\u03f5\u1d07\u0247\u212e", "g": "\u0261\u0581\u050d\u01e5\u0262",
    "h": "\u04bb\u0570\u043d\u0127\u029c", "i": "\u0456\u0131\u03b9\u0269\u026a\u04cf\u01c0",
    "j": "\u0458\u03f3\u0237\u1d0a", "k": "\u043a\u03ba\u03f0\u1d0b", "l": "\u0142\u029f",
    "m": "\u043c\u1d0d", "n": "\u0578\u03b7\u03c0\u043f\u0274",
    "o": "\u043e\u03bf\u03c3\u0585\u00f8\u0275\u1d0f", "p": "\u0440\u03c1\u03f1\u0584\u1d18",
    "q": "\u051b\u0566", "r": "\u0433\u0280\u024d", "s": "\u0455\ua731\u0282",
    "t": "\u0442\u03c4\u0167\u1d1b", "u": "\u03c5\u057d\u03bc\u1d1c\u0289",
    "v": "\u03bd\u0475\u1d20", "w": "\u03c9\u051d\u1d21", "x": "\u0445\u03c7",
    "y": "\u0443\u04af\u03b3\u024f\u028f", "z": "\u1d22\u01b6", "A": "\u0410\u0391\u13aa",
    "B": "\u0412\u0392\u13f4", "C": "\u0421\u03f9\u13df", "D": "\u13a0",
    "E": "\u0415\u0395\u13ac", "G": "\u050c\u13c0", "H": "\u041d\u0397\u13bb\u04ba",
    "I": "\u0406\u0399\u04c0", "J": "\u0408\u13ab", "K": "\u041a\u039a\u13e6", "L": "\u13de",
    "M": "\u041c\u039c\u13b7", "N": "\u039d", "O": "\u041e\u039f\u0555",
    "P": "\u0420\u03a1\u13e2", "Q": "\u051a", "S": "\u0405\u13da", "T": "\u0422\u03a4\u13a2",
    "V": "\u13d9", "W": "\u051c\u13d4", "X": "\u0425\u03a7", "Y": "\u0423\u03a5\u04ae",
    "Z": "\u0396\u13c3",
}  # fmt: skip
"""Letters of other scripts (and Latin variants NFKD does not take apart) that render as a
Latin letter, by the letter; lower case to lower case, capitals to capitals."""
_LETTER_BLOCKS = (0x1F130, 0x1F150, 0x1F170, 0x1F1E6)
"""Squared, negative circled, negative squared and regional-indicator capitals A to Z."""
_CONFUSABLE = str.maketrans(
    {
        **{c: letter for letter, chars in _LOOK_ALIKES.items() for c in chars},
        **{chr(b + i): chr(ord("A") + i) for b in _LETTER_BLOCKS for i in range(26)},
    }
)
_BACKSLASHED_PATTERN = (
    r"\\\\*(?:u\{([0-9a-fA-F]{1,6})\}"
    r"|u([dD][89abAB][0-9a-fA-F]{2})\\+u([dD][c-fC-F][0-9a-fA-F]{2})"
    r"|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|x([0-9a-fA-F]{2}))"
)
"""`\\u{…}`, a UTF-16 surrogate pair, `\\uXXXX`, `\\UXXXXXXXX`, `\\xXX`, after the
backslashes of any nesting (each pattern opens with a literal: a fast search)."""
_ENTITY_PATTERN = r"&(?:#[xX]([0-9a-fA-F]{1,6});?|#([0-9]{1,7});?|([A-Za-z][A-Za-z0-9]{1,31};))"
"""A numeric or named HTML entity."""
_PERCENT_PATTERN = r"%[0-9a-fA-F]{2}(?:%[0-9a-fA-F]{2})*"
"""A run of percent escapes (the bytes of UTF-8 characters)."""
_BACKSLASHED = re.compile(_BACKSLASHED_PATTERN)
_ENTITY = re.compile(_ENTITY_PATTERN)
_PERCENT = re.compile(_PERCENT_PATTERN)
_BACKSLASHED_BYTES = re.compile(
    rb"\\\\*(?:u\{([0-9a-fA-F]{1,6})\}|u(00[0-7][0-9a-fA-F])|U([0-9a-fA-F]{8})|x([0-9a-fA-F]{2}))"
)
"""The escapes `body_view` does not fold itself: ASCII `\\u00XX` (which may open another
escape), `\\u{…}`, `\\U`, `\\x`."""
_ENTITY_BYTES = re.compile(_ENTITY_PATTERN.encode())
_PERCENT_BYTES = re.compile(_PERCENT_PATTERN.encode())


def _plain(text: str) -> str:
    """Accents dropped and look-alike letters read as Latin ones."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    return text.translate(_CONFUSABLE)


def _fold(name: str) -> str:
    text = name if name.isascii() else name.translate(_CONFUSABLE)
    text = unicodedata.normalize("NFKC", text)
    if not text.isascii():
        text = "".join(c for c in text if unicodedata.category(c) != "Cf")
        text = _plain(_FILLERS.sub("", text))
    text = _HUMP.sub("_", text).casefold()
    if not text.isascii():
        text = _plain(text).lower()  # what case folding made (`İ` is `i` and a dot)
    return text.replace("-", "_")


_fold_cached = functools.lru_cache(maxsize=8192)(_fold)


def fold(name: str) -> str:
    """A name as the fence compares it (see the module's docstring)."""
    return _fold_cached(name) if len(name) <= CACHED_NAME else _fold(name)


def tokens(name: str) -> tuple[str, ...]:
    """The letter-and-digit runs of a folded name: `mcp__Email-Gateway__x` gives
    `("mcp", "email", "gateway", "x")`."""
    return tuple(_TOKEN.findall(fold(name)))


def joined(name: str) -> str:
    """A name's tokens joined, as entries are compared with it."""
    return "".join(tokens(name)).translate(_SKELETON)


def unescape(text: str) -> str:
    """`text` with its character escapes decoded (`\\u0065`, `\\x65`, `%65`, `&#101;`,
    `&eacute;`, at any nesting of backslashes), layer after layer (`%255C` is `%5C`, then
    `\\`), at most `ESCAPE_ROUNDS`."""
    for _ in range(ESCAPE_ROUNDS):
        before = text
        if "\\" in text:
            text = _BACKSLASHED.sub(_backslashed, text)
        if "&" in text:
            text = _ENTITY.sub(_entity, text)
        if "%" in text:
            text = _PERCENT.sub(_percent, text)
        if text == before:
            break
    return text


def _unescape_bytes(data: bytes) -> bytes:
    """`unescape` of raw bytes: UTF-8 in, UTF-8 out (lone surrogates as they are)."""
    for _ in range(ESCAPE_ROUNDS):
        before = data
        if b"\\" in data:
            data = _BACKSLASHED_BYTES.sub(_backslashed_bytes, data)
        if b"&" in data:
            data = _ENTITY_BYTES.sub(_entity_bytes, data)
        if b"%" in data:
            data = _PERCENT_BYTES.sub(_percent_bytes, data)
        if data == before:
            break
    return data


def _percent(match: re.Match[str]) -> str:
    return _percent_text(match.group(0))


@functools.lru_cache(maxsize=4096)
def _percent_text(run: str) -> str:
    return bytes.fromhex(run.replace("%", "")).decode("utf-8", "replace")


def _percent_bytes(match: re.Match[bytes]) -> bytes:
    return _percent_run(match.group(0))


@functools.lru_cache(maxsize=4096)
def _percent_run(run: bytes) -> bytes:
    return bytes.fromhex(run.replace(b"%", b"").decode("ascii"))


def _backslashed(match: re.Match[str]) -> str:
    return _code_point(match.group(0), match.groups())


def _entity(match: re.Match[str]) -> str:
    hexa, decimal, named = match.groups()
    if named is not None:
        return html5.get(named, match.group(0))
    return _code_point(match.group(0), (hexa, None, None, None, None, None), decimal)


def _backslashed_bytes(match: re.Match[bytes]) -> bytes:
    return _utf8(_backslashed_cached(match.group(0)))


def _entity_bytes(match: re.Match[bytes]) -> bytes:
    return _utf8(_entity_cached(match.group(0)))


@functools.lru_cache(maxsize=4096)
def _backslashed_cached(escape: bytes) -> str:
    return unescape(escape.decode("ascii"))


@functools.lru_cache(maxsize=4096)
def _entity_cached(escape: bytes) -> str:
    return unescape(escape.decode("ascii"))


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _code_point(escape: str, groups: tuple[str | None, ...], decimal: str | None = None) -> str:
    braced, high, low, four, eight, byte = groups
    if high is not None and low is not None:
        return chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00))
    digits = braced or four or eight or byte
    point = int(digits, 16) if digits is not None else int(decimal or "0")
    return chr(point) if point <= 0x10FFFF else escape


def variants(text: str) -> tuple[str, ...]:
    """A text as sent and as its escapes decode it (when they change it)."""
    decoded = unescape(text)
    return (text,) if decoded == text else (text, decoded)


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

    def holds(self, text: str, within: int | None = None) -> bool:
        """Whether `text` occurs starting where a token starts (its first `within` characters
        inside the server part)."""
        at = self.text.find(text) if text else -1
        while at >= 0:
            if at in self.starts and at + (within or 0) <= self.boundary:
                return True
            at = self.text.find(text, at + 1)
        return False


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
        head = "".join(tokens(server)).translate(_SKELETON)
        if not head:
            return None
        rest = "".join(tokens(tool[0])).translate(_SKELETON) if tool else ""
        return cls(head + rest, len(head))

    @property
    def needle(self) -> str:
        """What a body holding a call of this entry must hold once folded: its server part."""
        return self.text[: self.server]

    @property
    def parts(self) -> tuple[str, str]:
        """The server part and the tool prefix."""
        return self.text[: self.server], self.text[self.server :]

    def matches(self, name: Spelled) -> bool:
        """Whether the entry starts where a token of `name` starts, its server part within
        the server named beside the tool (when one is)."""
        return name.holds(self.text, self.server)


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
    text = "".join(parts).translate(_SKELETON)
    return Spelled(text, frozenset(starts), sum(map(len, head)) if head else len(text))


_spelled_cached = functools.lru_cache(maxsize=8192)(_spelled)


def skill_text(skill: str) -> str:
    """A fenced skill name, folded and joined."""
    return joined(skill)


def may_hold(body: bytes, needles: tuple[bytes, ...]) -> bool:
    """Whether raw bytes (a JSON body, a text), folded as names are (`body_view`), may hold one
    of `needles` (folded ASCII): as sent, or with their escapes decoded (`unescape`); also with
    every JSON escape letter dropped from both (a `\\n` or `\\t` between a name's letters leaves
    its letter in the view). True for bytes that are not UTF-8."""
    view = body_view(body)
    if view is None or _holds(view, needles):
        return True
    decoded = _unescape_bytes(body)
    if decoded == body:
        return False
    view = body_view(decoded)
    return view is None or _holds(view, needles)


def _holds(view: bytes, needles: tuple[bytes, ...]) -> bool:
    if any(n in view for n in needles):
        return True
    bare = view.translate(None, ESCAPE_LETTERS)
    return any(n.translate(None, ESCAPE_LETTERS) in bare for n in needles)


def body_view(body: bytes) -> bytes | None:
    """Raw bytes folded as names are, every character that is not an ASCII letter or digit
    dropped: their `\\u` escapes (at any nesting) and non-ASCII characters folded one distinct
    character at a time. None when they are not UTF-8."""
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
    return view.lower().translate(_SKELETON_BYTES, _DROP)


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
