"""Whether a header, a query parameter or a path carries a secret (the admin key), however spelled.

The search does not list spellings. It normalises and decodes the value into views, recursively,
and looks in every view for any `WINDOW` characters of the secret in a row:

- normalisations (free): Unicode NFKD without format characters (zero-width spaces and joiners,
  bidirectional marks, tags, the soft hyphen) and combining marks, so full-width, mathematical
  or circled letters read as ASCII; UTF-16 of either byte order, and NUL-interleaved text;
- decodings (`MAX_DEPTH` in a row): percent-encoding (one round, and every round), backslash
  escapes (`\\xNN`, `\\uNNNN`, `\\u{N}`, `\\UNNNNNNNN`, octal), HTML entities, hex (runs of
  pairs, with `:`, `-`, `.`, `,`, spaces or `0x` between them, at either alignment) and base64 /
  base64url (every run at each of its four alignments; whitespace inside a run removed); a
  decoded payload that is not text keeps its printable runs.

A view is compared case-folded, and as its skeleton (letters and digits only), so separators put
between the characters do not hide them. A view holding any window of the secret carries it, so
a secret split over two headers or parameters is withheld from both. A value that decodes to
more than `MAX_VIEWS` views or the byte budget is treated as carrying it: the search fails
closed. Answers are remembered (`CACHE`): a client sends the same headers on every request.
"""

from __future__ import annotations

import binascii
import functools
import html
import re
import unicodedata
from collections import deque
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

WINDOW = 12
"""A view that holds this many characters of the secret in a row (the whole secret when it is
shorter) carries it: a 43-character key split in three still leaves a window in each piece."""
MAX_DEPTH = 3
"""Decoding layers applied in a row (normalisations add none)."""
MAX_VIEWS = 128
"""Views one value may decode to before it is treated as carrying the secret (a 2.5 kB Azure
bearer token decodes to 4, a client's API key or a cookie of 60 base64 values to 1)."""
BYTE_BUDGET = 1 << 14
"""Bytes of views one value may decode to, besides `BYTES_PER_BYTE` per byte of the value."""
BYTES_PER_BYTE = 8
MAX_PERCENT_ROUNDS = 8
CACHE = ((1024, 4096), (16384, 256))
"""Answers are remembered for the last 4096 values up to 1 kB long and the last 256 up to
16 kB (at most 8 MiB of values): a client sends the same headers on every request."""

_JOIN = b"\x1f"
"""Between the decoded runs of one view: neither a letter nor a digit, in no secret."""
_SEPARATOR = b"\x1f\x1f\x1f"
"""Between runs decoded in one call: in no secret, and ASCII, so it survives a UTF-8 decoding."""
_TEXT_SEPARATOR = _SEPARATOR.decode()
_BASE64_SEPARATOR = b"Hx8f"
"""`_SEPARATOR` in base64."""
_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_SKELETON = bytes(b if chr(b).isascii() and chr(b).isalnum() else 0 for b in _LOWER)
"""Letters (lower-cased) and digits kept, every other byte a NUL (then removed)."""
_MARKS = bytes(
    {0: ord("0"), ord("%"): ord("%"), ord("\\"): ord("\\"), ord("&"): ord("&")}.get(
        b, ord(" ") if chr(b) in " \t\r\n" else 0
    )
    for b in range(256)
)
"""What decides which decodings a view gets: a NUL as `0`, `%`, `\\`, `&`, whitespace as a space;
every other byte a NUL (then removed)."""
_PRINTABLE = bytes(ord("x") if 0x20 <= b < 0x7F else ord(".") for b in range(256))
_HEX_SEPARATORS = b" \t:.,;|/_-"
_URLSAFE = bytes.maketrans(b"-_", b"+/")
_GAP = re.compile(rb"(?<=[A-Za-z0-9+/=_-])[ \t\r\n]+(?=[A-Za-z0-9+/_-])")
_BACKSLASH = re.compile(
    rb"\\(?:x([0-9a-fA-F]{2})|u\{([0-9a-fA-F]{1,6})\}|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})"
    rb"|([0-3][0-7]{2}))"
)
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Mn", "Me"})
_PLANES_SCANNED = (range(0x20000), range(0xE0000, 0xE1000))
"""Where the format characters and combining marks are; the other planes hold neither."""


@dataclass(frozen=True, slots=True)
class Needle:
    """One secret as it is searched for: its windows (case-folded) and its skeleton's, each with
    tiles of which every window holds one (a cheap first test), and what is worth decoding."""

    least: int
    """The window's length: no view shorter than this holds one."""
    shortest: int
    """No value shorter than this holds one: NFKD spells a few three-byte characters as four
    ASCII letters (`㎉`), so three quarters of a window."""
    windows: tuple[str, ...]
    tiles: tuple[str, ...]
    skeleton_windows: tuple[str, ...]
    skeleton_tiles: tuple[str, ...]
    base64_chars: int
    base64_run: re.Pattern[bytes]
    hex_run: re.Pattern[bytes]
    printable_run: re.Pattern[bytes]
    printable_tile: str

    def seen_in(self, view: bytes) -> bool:
        """Whether `view` holds a window of the secret, in any case or as its skeleton (the
        bytes are compared as Latin-1 text: `in` on `str` is the fast one)."""
        if _holds(view.translate(_LOWER).decode("latin-1"), self.tiles, self.windows):
            return True
        if not self.skeleton_tiles:
            return False
        skeleton = view.translate(_SKELETON).replace(b"\x00", b"").decode("latin-1")
        return _holds(skeleton, self.skeleton_tiles, self.skeleton_windows)


def _holds(text: str, tiles: tuple[str, ...], windows: tuple[str, ...]) -> bool:
    for tile in tiles:
        if tile in text:
            return any(window in text for window in windows)
    return False


def _windows(text: str, size: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Every `size`-long piece of `text`, and tiles such that each piece holds a whole one."""
    pieces = tuple(dict.fromkeys(text[i : i + size] for i in range(len(text) - size + 1)))
    step = (size + 1) // 2
    tiles = tuple(dict.fromkeys(text[i : i + step] for i in range(0, len(text) - step + 1, step)))
    return pieces, tiles


@functools.lru_cache(maxsize=8)
def needle(secret: bytes) -> Needle | None:
    """How `secret` is searched for (None: an empty secret, which nothing carries)."""
    if not secret:
        return None
    folded = secret.translate(_LOWER).decode("latin-1")
    size = min(len(folded), WINDOW)
    windows, tiles = _windows(folded, size)
    skeleton = secret.translate(_SKELETON).replace(b"\x00", b"").decode("latin-1")
    skeleton_windows: tuple[str, ...] = ()
    skeleton_tiles: tuple[str, ...] = ()
    if len(skeleton) >= size:  # a secret mostly of punctuation is searched as it is only
        skeleton_windows, skeleton_tiles = _windows(skeleton, size)
    return Needle(
        least=size,
        shortest=-(-3 * size // 4),
        windows=windows,
        tiles=tiles,
        skeleton_windows=skeleton_windows,
        skeleton_tiles=skeleton_tiles,
        base64_chars=-(-4 * size // 3),
        base64_run=re.compile(rb"[A-Za-z0-9+/_-]{%d,}" % -(-4 * size // 3)),
        hex_run=re.compile(rb"[0-9a-fA-F]{%d,}" % (2 * size)),
        printable_run=re.compile(rb"[\x20-\x7e]{%d,}" % size),
        printable_tile="x" * size,
    )


def shortest_carrier(secret: bytes) -> int:
    """The length below which no value carries `secret` (a very large number for none)."""
    found = needle(secret)
    return found.shortest if found is not None else 1 << 62


def carries_secret(value: bytes, secret: bytes) -> bool:
    """Whether `value` (a header's name or value, a query parameter, a path) holds any `WINDOW`
    characters of `secret` in a row in any of its views (see the module's docstring)."""
    return carries_any(value, (secret,))


def carries_any(value: bytes, secrets: tuple[bytes, ...]) -> bool:
    """Whether `value` carries one of `secrets` (`carries_secret`)."""
    if len(value) <= CACHE[0][0]:
        return _remembered(value, secrets)
    if len(value) <= CACHE[1][0]:
        return _remembered_long(value, secrets)
    return _searched(value, secrets)


def header_carries(name: bytes, value: bytes, secrets: tuple[bytes, ...]) -> bool:
    """Whether a header carries one of `secrets`: its name and value searched as one text
    (no window spans the separator between them but in a skeleton, which withholds more)."""
    if len(value) <= CACHE[0][0]:
        return _remembered_header(name, value, secrets)
    return carries_any(name + _JOIN + value, secrets)


def _searched(value: bytes, secrets: tuple[bytes, ...]) -> bool:
    return any(_search(value, secret) for secret in secrets)


_remembered = functools.lru_cache(maxsize=CACHE[0][1])(_searched)
_remembered_long = functools.lru_cache(maxsize=CACHE[1][1])(_searched)


@functools.lru_cache(maxsize=CACHE[0][1])
def _remembered_header(name: bytes, value: bytes, secrets: tuple[bytes, ...]) -> bool:
    return _searched(name + _JOIN + value, secrets)


def prepare(secret: bytes) -> None:
    """Build what searching for `secret` needs now, not on the first request."""
    needle(secret)
    _invisible()


def _search(value: bytes, secret: bytes) -> bool:
    found = needle(secret)
    if found is None or len(value) < found.shortest:
        return False
    budget = BYTE_BUDGET + BYTES_PER_BYTE * len(value)
    seen = {value}
    queue = deque([(value, 0)])
    while queue:
        view, depth = queue.popleft()
        if found.seen_in(view):
            return True
        for child, cost in _children(view, found, decode=depth < MAX_DEPTH):
            if len(child) < found.least or child in seen:
                continue
            budget -= len(child)
            if len(seen) >= MAX_VIEWS or budget < 0:
                return True
            seen.add(child)
            queue.append((child, depth + cost))
    return False


def _children(view: bytes, found: Needle, *, decode: bool) -> list[tuple[bytes, int]]:
    """The views `view` normalises (cost 0) and, when `decode`, decodes (cost 1) to."""
    out: list[tuple[bytes, int]] = []
    marks = view.translate(_MARKS).replace(b"\x00", b"").decode("latin-1")
    if "0" in marks and 4 * view.count(b"\x00") >= len(view):
        out.append((view.replace(b"\x00", b""), 0))
        for codec in ("utf-16-le", "utf-16-be"):
            out.append((view.decode(codec, "ignore").encode("utf-8", "surrogatepass"), 0))
    if not view.isascii():
        text = view.decode("utf-8", "replace")
        if 4 * text.count("\ufffd") <= len(text):  # mostly UTF-8, not a binary payload
            out.append((_fold(text), 0))
    if not decode:
        return out
    if "%" in marks:
        once = unquote_to_bytes(view)
        out += [(once, 1), (_percent_to_the_end(once), 1)]
    if "\\" in marks:
        out.append((_BACKSLASH.sub(_unescape, view), 1))
    if "&" in marks:
        text = view.decode("utf-8", "surrogateescape")
        out.append((html.unescape(text).encode("utf-8", "surrogateescape"), 1))
    out += _hex_views(view, found)
    out += _base64_views(view, found, spaced=marks.count(" "))
    return out


def _fold(text: str) -> bytes:
    """`text` in NFKD without format characters and combining marks, as UTF-8."""
    folded = unicodedata.normalize("NFKD", text).translate(_invisible())
    return folded.encode("utf-8", "surrogatepass")


@functools.cache
def _invisible() -> dict[int, None]:
    """Format characters and combining marks, for `str.translate` to remove."""
    return {
        point: None
        for plane in _PLANES_SCANNED
        for point in plane
        if unicodedata.category(chr(point)) in _INVISIBLE_CATEGORIES
    }


def _percent_to_the_end(value: bytes) -> bytes:
    for _ in range(MAX_PERCENT_ROUNDS):
        decoded = unquote_to_bytes(value)
        if decoded == value:
            break
        value = decoded
    return value


def _unescape(match: re.Match[bytes]) -> bytes:
    digits = match[1] or match[2] or match[3] or match[4]
    point = int(digits, 16) if digits else int(match[5], 8)
    if point > 0x10FFFF:
        return match[0]
    return chr(point).encode("utf-8", "surrogatepass")


def _hex_views(view: bytes, found: Needle) -> list[tuple[bytes, int]]:
    """Hex runs (separators and `0x` between the pairs removed) decoded at both alignments."""
    bare = view.replace(b"0x", b"").replace(b"0X", b"").translate(None, _HEX_SEPARATORS)
    runs = found.hex_run.findall(bare)
    if not runs:
        return []
    decoded = [binascii.unhexlify(_even(run[start:])) for run in runs for start in (0, 1)]
    return [(piece, 1) for piece in _payloads(_SEPARATOR.join(decoded), found)]


def _even(run: bytes) -> bytes:
    return run[: len(run) - len(run) % 2]


def _base64_views(view: bytes, found: Needle, *, spaced: int) -> list[tuple[bytes, int]]:
    """Base64 and base64url runs decoded at each of their four alignments; a run broken by
    whitespace (more than once: `Bearer TOKEN` is not) is read whole as well."""
    runs = found.base64_run.findall(view)
    if spaced > 1:
        joined, gaps = _GAP.subn(b"", view)
        if gaps > 1:
            runs += found.base64_run.findall(joined)
    if not runs:
        return []
    quads = []
    for run in runs:
        for start in range(min(4, len(run) - found.base64_chars + 1)):
            part = run[start:]
            extra = len(part) % 4  # cut or filled with zero bits to whole quads
            quads.append(part[:-1] if extra == 1 else part + b"AA"[: (4 - extra) % 4])
    try:
        data = binascii.a2b_base64(_BASE64_SEPARATOR.join(quads).translate(_URLSAFE))
    except binascii.Error:  # not expected: whole quads of the alphabet always decode
        return []
    return [(piece, 1) for piece in _payloads(data, found)]


def _payloads(data: bytes, found: Needle) -> list[bytes]:
    """Decoded runs (apart by `_SEPARATOR`) as views: text (ASCII, UTF-8, UTF-16 of ASCII) as
    it is, a binary payload as its printable runs long enough to hold a window (none, most
    often). One pass over all of them finds the common case: no text at all."""
    if data.isascii():
        return [data]
    text = data.decode("utf-8", "replace")
    if "\ufffd" not in text:
        return [data]
    printable = found.printable_tile in data.translate(_PRINTABLE).decode("latin-1")
    nul = 2 * data.count(b"\x00") >= found.least
    pieces = []
    for piece, piece_text in zip(data.split(_SEPARATOR), text.split(_TEXT_SEPARATOR), strict=True):
        if len(piece) < found.least:
            continue
        if "\ufffd" not in piece_text or (nul and 4 * piece.count(b"\x00") >= len(piece)):
            pieces.append(piece)
        elif printable:
            pieces += found.printable_run.findall(piece)
    return pieces
