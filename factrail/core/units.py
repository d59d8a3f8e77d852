"""Units: the pieces a tool output is cut into for fact lines and stubs.

A text is cut into its lines, each line at its escaped newlines, then long pieces near 200 chars
(at a separator past the first 100 chars when there is one), each trimmed. Our own mark lines are
never units, so a note is never picked as a fact.
"""

from __future__ import annotations

from factrail.core.kernels import active
from factrail.core.marks import has_mark_phrase, is_mark_line

_K = active()

FACT_LINE_CHARS = 200
_SPLIT_MIN = 100
_SEPARATORS = (", ", "; ", " | ", " ")


def _part_spans(part: str, at: int, out: list[tuple[int, int, bool]]) -> None:
    """The units of one stripped-to-be piece of a line starting at offset `at` (see `units`)."""
    stripped = part.strip()
    if not stripped:
        return
    start = at + len(part) - len(part.lstrip())
    if len(stripped) <= FACT_LINE_CHARS:
        out.append((start, start + len(stripped), True))
        return
    rest, clean = stripped, True
    while len(rest) > FACT_LINE_CHARS:
        window = rest[:FACT_LINE_CHARS]
        c = max(window.rfind(sep) for sep in _SEPARATORS)
        hard = c <= _SPLIT_MIN
        cut = FACT_LINE_CHARS if hard else c + 1
        head = rest[:cut]
        piece = head.strip()
        if piece:
            lead = len(head) - len(head.lstrip())
            out.append((start + lead, start + lead + len(piece), clean and not hard))
        tail = rest[cut:]
        rest = tail.strip()
        start += cut + len(tail) - len(tail.lstrip())
        clean = not hard
    if rest:
        out.append((start, start + len(rest), clean))


def unit_spans(text: str) -> list[tuple[int, int, bool]]:
    """`(start, end, clean)` of every unit of `text` (`units(text)[i] == text[start:end]`);
    `clean`: no token char touches either edge, so a token of the text never straddles it
    (false only beside a long line cut at 200 chars with no separator to cut at)."""
    marked = has_mark_phrase(text)
    if (kernel := _K.unit_spans) is not None and not marked:
        return kernel(text)
    out: list[tuple[int, int, bool]] = []
    pos = 0
    for line in text.split("\n"):
        if not (marked and is_mark_line(line)):
            if "\\n" in line:
                at = pos
                for part in line.split("\\n"):
                    _part_spans(part, at, out)
                    at += len(part) + 2
            else:
                _part_spans(line, pos, out)
        pos += len(line) + 1
    return out


def units(text: str) -> list[str]:
    """The text cut into trimmed pieces of at most 200 chars (mark lines left out): its lines,
    then each line at its escaped newlines, then long pieces near 200 chars, at a separator past
    the first 100 chars when there is one."""
    return [text[a:b] for a, b, _ in unit_spans(text)]
