"""A reduced result beside its original: which of the original's lines the model was sent.

A line of the original counts as kept when it occurs, as it is, among the lines of the text
sent (set membership: linear in both texts). Both texts are shown without a capability, as the
JSON report shows notes (`session.inspect.without_capabilities`)."""

from __future__ import annotations

from dataclasses import dataclass

from factrail.session.inspect import without_capabilities

MAX_LINES = 400
"""Lines shown of either text; the rest is counted."""


@dataclass(frozen=True, slots=True)
class Compared:
    """What a result page block shows: the original's lines with whether each was kept (None
    when the original is not saved or cannot be read), the sent lines, and what was cut off."""

    original: list[tuple[str, bool]] | None
    original_more: int
    omitted: int
    """Lines of the whole original that were not sent."""
    sent: list[str] | None
    sent_more: int


def hidden(text: str, output_id: str | None) -> str:
    """`text` with the folder of `output_id`, and anything shaped like a capability, hidden."""
    row = {"note": text, "whole": output_id}
    shown: str = without_capabilities({"results": [row]})["results"][0]["note"]
    return shown


def compare(
    original: str | None, sent: str | None, output_id: str | None, cap: int = MAX_LINES
) -> Compared:
    """`original` beside `sent`, each shown without a capability and cut to `cap` lines."""
    sent_lines = None if sent is None else hidden(sent, output_id).split("\n")
    if original is None:
        whole = None
        omitted = 0
    else:
        sent_set = set(sent_lines or ())
        lines = hidden(original, output_id).split("\n")
        whole = [(line, line in sent_set) for line in lines]
        omitted = sum(1 for _, kept in whole if not kept)
    return Compared(
        original=None if whole is None else whole[:cap],
        original_more=0 if whole is None else max(0, len(whole) - cap),
        omitted=omitted,
        sent=None if sent_lines is None else sent_lines[:cap],
        sent_more=0 if sent_lines is None else max(0, len(sent_lines) - cap),
    )
