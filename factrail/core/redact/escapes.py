"""A text with one level of string escapes undone (`\\"` → `"`, `\\n` → a newline, `\\t`,
`\\/`, `\\\\`…), and the way back from its offsets to the text's: JSON written inside a JSON
string (`"{\\"password\\": \\"…\\"}"`), or a tool call's arguments as a judge sees them
(`"cat <<EOF\\npassword: |\\n  …"`), are read as what they encode, and what is found there is
replaced where it lies in the text. (`\\uXXXX` stays as written: it seldom hides a slot.)"""

from __future__ import annotations

import bisect
import re
from itertools import accumulate, chain

_SPLIT = re.compile(r"(\\[\"'\\/nrt])")
_CHAR = {
    f"\\{c}": char
    for c, char in {
        '"': '"',
        "'": "'",
        "\\": "\\",
        "/": "/",
        "n": "\n",
        "r": "\r",
        "t": "\t",
    }.items()
}


class Unescaped:
    """`text` with its escapes undone (`view`), and where each of its offsets was in `text`
    (worked out only when asked: most views hold nothing)."""

    __slots__ = ("_parts", "_text_at", "_view_at", "view")

    def __init__(self, text: str) -> None:
        parts = _SPLIT.split(text)  # literal, escape, literal, …, literal
        parts[1::2] = map(_CHAR.__getitem__, parts[1::2])  # each escape: 2 chars → 1
        self._parts = parts
        self.view = "".join(parts)
        self._view_at: list[int] = []
        self._text_at: list[int] = []

    def _map(self) -> None:
        literals = [len(p) for p in self._parts[0::2]]
        view_ends = list(accumulate(chain.from_iterable((n, 1) for n in literals)))
        text_ends = list(accumulate(chain.from_iterable((n, 2) for n in literals)))
        # after each literal run an escape starts, and after each escape a literal run
        self._view_at = [0, *view_ends[:-1]]
        self._text_at = [0, *text_ends[:-1]]

    def back(self, pos: int) -> int:
        """Where offset `pos` of the view lies in the text (an escape maps to its start, the
        offset right after it to the end of the escape)."""
        if not self._view_at:
            self._map()
        i = bisect.bisect_right(self._view_at, pos) - 1
        return self._text_at[i] + pos - self._view_at[i]


def has_escapes(text: str) -> bool:
    """Whether `text` holds an escape to undo."""
    return "\\" in text and _SPLIT.search(text) is not None
