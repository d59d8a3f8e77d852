"""How a slot's value is written, and whether the text around it is code.

Value forms: plain, quoted (`"…"`, `'…'`, `` `…` ``, `\\"…\\"`), a YAML block scalar (`|`, `>`,
`|-`, `>+`…: the more-indented lines that follow), YAML anchors and standard tags before the
value (`&pw …`, `!!str …`), and TOML multi-line strings (`\"\"\"…\"\"\"`, `'''…'''`). `VALUE_FORM`
is the regex part every slot pattern ends in; `value_span` says where the value lies.

Code: whether a bare name after `token =` is a variable is decided per line, from the part of
the text that line belongs to: a `grep -n` hit by the file it names (`app.py:3:` is code,
`.env:2:` and `config.yaml:7:` are not), any other line by the block around it, cut at code
fences, `==> file <==` headers and heredocs, not counting the grep hits in it.
"""

from __future__ import annotations

import bisect
import re

VALUE_FORM = (
    r"(?P<deco>(?:&[\w.-]{1,40}[ \t]+|!![a-z]{1,16}[ \t]+|[|>][-+]?[1-9]?[-+]?[ \t]+(?=[^\s#]))"
    r"{0,2})"
    r"(?:(?P<block>[|>][-+]?[1-9]?[-+]?)(?=[ \t]*(?:#[^\n]*)?\r?\n)"
    r"|(?P<triple>\"\"\"|''')"
    r"|(?P<quote>\\?[\"'`])?"
    r"(?P<value>[^\s\"'`<>{}()\[\],;\\&|:][^\s\"'`<>{}()\[\],;\\&|]{3,}))"
)
"""After the separator: YAML decorations (an anchor, a standard tag, a block indicator with the
value on the same line, as a one-line rendering leaves it), then a block scalar's indicator, a
TOML multi-line opener, or an optionally quoted value."""

_MAX_BLOCK = 8192


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _indent(text: str, start: int) -> int:
    end = start
    while end < len(text) and text[end] in " \t":
        end += 1
    return end - start


def block_span(text: str, key_at: int, after: int) -> tuple[int, int] | None:
    """The content of a YAML block scalar whose indicator ends at `after`, for a key at
    `key_at`: the following lines indented more than the key's line, as one span."""
    key_indent = _indent(text, _line_start(text, key_at))
    at = text.find("\n", after)
    start = end = -1
    limit = min(len(text), after + _MAX_BLOCK)
    while 0 <= at < limit:
        line = at + 1
        stop = text.find("\n", line)
        stop = len(text) if stop < 0 else stop
        body = text[line:stop].rstrip("\r \t")
        if body:
            indent = _indent(text, line)
            if indent <= key_indent:
                break
            if start < 0:
                start = line + indent
            end = line + len(body)
        at = stop if stop < len(text) else -1
    return (start, end) if start >= 0 else None


def triple_span(text: str, opener: str, after: int) -> tuple[int, int] | None:
    """The content of a TOML multi-line string opened by `opener` ending at `after`: to the
    closing delimiter, without the newline right after the opener or surrounding blanks."""
    close = text.find(opener, after, after + _MAX_BLOCK)
    if close < 0:
        return None
    start, end = after, close
    while start < end and text[start] in " \t\r\n":
        start += 1
    while end > start and text[end - 1] in " \t\r\n":
        end -= 1
    return (start, end) if end > start else None


def first_line(text: str, start: int, end: int) -> str:
    """The first line of a span: what a multi-line value is judged by."""
    stop = text.find("\n", start, end)
    return text[start : end if stop < 0 else stop].rstrip("\r \t")


def value_span(text: str, m: re.Match[str], key_at: int) -> tuple[int, int] | None:
    """Where the value of a slot match (ending in `VALUE_FORM`) lies in `text`."""
    if m.group("block") is not None:
        return block_span(text, key_at, m.end("block"))
    if (triple := m.group("triple")) is not None:
        return triple_span(text, triple, m.end("triple"))
    return m.span("value")


_CODE_MARKERS = (
    "def ", "import ", "class ", "return ", "function ", "const ", "let ", "var ", "self.",
    "this.", "=>", "();", "):\n", ") {", "fn ", "func ", "#include", "package ",
    ".py:", ".ts:", ".js:", ".go:", ".rs:", ".java:", ".rb:", ".php:",
)  # fmt: skip
"""What marks a block as code (a statement, `self.`, `=>`, a call, a `grep -n` hit in a source
file). Plain substring tests: this runs on any text holding a slot."""


def looks_like_code(text: str) -> bool:
    """Whether `text` holds one of the `_CODE_MARKERS`."""
    return any(marker in text for marker in _CODE_MARKERS)


_GREP_HIT = re.compile(r"(?P<path>[^\s:./]*[./][^\s:]*):\d+[:-]")
"""A `grep -n` hit's head: `app/config.py:3:`, `.env:2:`, `setup.cfg-9-`."""


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_CODE_FILES = _words(
    """py pyi pyx ts tsx js jsx mjs cjs go rs java kt kts scala rb php c h cc cpp hpp cs swift
    m mm sh bash zsh ps1 lua pl pm r dart ex exs clj erl hs ml vue svelte groovy"""
)
_DATA_FILES = _words(
    """env yaml yml json toml ini cfg conf properties txt md rst xml cnf npmrc pypirc netrc
    gradle tfvars lock csv tsv log example sample template"""
)
_CUT = re.compile(
    r"^[ \t]*(?:```|~~~)[^\n]*$"
    r"|^==> [^\n]* <==[ \t]*$"
    r"|^[^\n]*<<-?[ \t]*['\"]?(?P<heredoc>[A-Za-z_][A-Za-z0-9_]*)['\"]?[ \t]*$",
    re.MULTILINE,
)
"""Where a text changes what it holds: a code fence, a `tail`/`head` file header, a heredoc."""
_CUT_LITERALS = ("```", "~~~", "==> ", "<<")
_GREP_LINE = re.compile(r"^[^\s:./]*[./][^\s:]*:\d+[:-][^\n]*\n?", re.MULTILINE)


def _file_kind(path: str) -> bool | None:
    """Whether a file of this name holds code (True), data (False), or unknown (None)."""
    name = path.rsplit("/", 1)[-1].lower()
    if name.startswith(".env") or name in ("dockerfile", "makefile"):
        return False
    ext = name.rsplit(".", 1)[-1] if "." in name else ""
    if ext in _CODE_FILES:
        return True
    return False if ext in _DATA_FILES else None


class CodeContext:
    """Whether the line at an offset of `text` is code, worked out once and only when a slot
    needs it."""

    __slots__ = ("_cuts", "_flags", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._cuts: list[int] | None = None
        self._flags: dict[int, bool] = {}

    def _segments(self) -> list[int]:
        if self._cuts is None:
            text = self._text
            cuts = [0]
            pos = 0
            cut = any(c in text for c in _CUT_LITERALS)
            while cut and (m := _CUT.search(text, pos)) is not None:
                cuts += (m.start(), m.end())
                pos = m.end() + 1
                if (word := m.group("heredoc")) is not None:
                    close = re.compile(rf"^[ \t]*{word}[ \t]*$", re.MULTILINE).search(text, pos)
                    if close is not None:
                        cuts += (close.start(), close.end())
                        pos = close.end() + 1
            cuts.append(len(text) + 1)
            self._cuts = cuts
        return self._cuts

    def at(self, pos: int) -> bool:
        """Whether the line holding `pos` is code."""
        text = self._text
        start = _line_start(text, pos)
        hit = _GREP_HIT.match(text, start)
        if hit is not None:
            kind = _file_kind(hit.group("path"))
            if kind is not None:
                return kind
            stop = text.find("\n", pos)
            return looks_like_code(text[start : len(text) if stop < 0 else stop + 1])
        cuts = self._segments()
        i = bisect.bisect_right(cuts, pos) - 1
        if i not in self._flags:
            block = text[cuts[i] : cuts[i + 1]]
            code = looks_like_code(block)
            if code and _GREP_LINE.search(block) is not None:  # not by its grep hits
                code = looks_like_code(_GREP_LINE.sub("", block))
            self._flags[i] = code
        return self._flags[i]
