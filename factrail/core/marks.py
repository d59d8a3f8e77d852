"""The compaction mark: the one bracketed note line the rails leave in a reduced result.

Every note reads `[factrail omitted N chars<detail>; <full-output note>]` on a line of its own.
Recognition is strict (a whole line of exactly this grammar) so that a tool output that merely
quotes `[factrail omitted ` is not mistaken for a reduced one. Callers should still track reduced
results structurally and pass them to `apply(..., final=ids)`.
"""

from __future__ import annotations

import re

RERUN_DETAIL = ": reproducible, re-run the call to see it"
FACTS_ONLY_DETAIL = ": only fact lines kept under context pressure"
EVICTED_DETAIL = ": evicted under context pressure, oldest first"

_MARK_LINE = re.compile(
    r"^\[factrail omitted \d+ chars"
    r"(?: of this output(?: \(error\))?(?:, kept \d+ fact lines?)?"
    rf"|{re.escape(RERUN_DETAIL)}|{re.escape(FACTS_ONLY_DETAIL)}|{re.escape(EVICTED_DETAIL)})"
    r"; (?:the )?full output [^\n]*\]\r?$",
    re.MULTILINE,
)
_LEGACY = re.compile(r"\[(?:fast-jev-compaction|jev-compaction) truncated ")


def full_output_phrase(tool_use_id: str) -> str:
    """Where the full output is while it has not been saved (backquoted: `u1` ≠ `u12`)."""
    return f"full output under `{tool_use_id}` in this transcript"


SAVED_OUTPUT_COMMAND = "factrail outputs get"
"""The command that prints a saved output by its id, wherever the store is local."""


def saved_output_phrase(output_id: str, route: str | None = None) -> str:
    """Where the full output is once saved (the usual `swap_full_output_note` target): the
    gateway `route` that serves `output_id` when there is one, and the command that prints it.
    Never a file path: the note goes to the model provider."""
    if route:  # the id once: every reduced result carries this, and `outputs get` takes routes
        return (
            f"full output saved at {route}{output_id} (`{SAVED_OUTPUT_COMMAND}` prints it);"
            " read it for anything not kept here"
        )
    command = f"`{SAVED_OUTPUT_COMMAND} {output_id}`"
    return f"full output saved, {command} prints it; read it for anything not kept here"


def note(omitted: int, detail: str, tool_use_id: str) -> str:
    """One mark line: `[factrail omitted N chars<detail>; <full-output note>]`."""
    return f"[factrail omitted {omitted} chars{detail}; {full_output_phrase(tool_use_id)}]"


def stub_detail(is_error: bool, kept: int) -> str:
    """The detail of an observation stub's mark."""
    error = " (error)" if is_error else ""
    facts = f", kept {kept} fact line{'s' if kept != 1 else ''}" if kept > 0 else ""
    return f" of this output{error}{facts}"


def has_mark_phrase(text: str) -> bool:
    """Whether `text` holds the opening phrase of a mark (ours or a legacy engine's): a line
    without one is never a mark line."""
    return "[factrail omitted " in text or "compaction truncated " in text


def is_mark_line(line: str) -> bool:
    """Whether `line` is one whole note line we emit (or a legacy engine's mark); the regexes
    run only on a line holding a mark phrase."""
    if not has_mark_phrase(line):
        return False
    return _MARK_LINE.fullmatch(line) is not None or _LEGACY.search(line) is not None


def mark_lines(text: str) -> list[str]:
    """Every mark line of `text`, in order."""
    if not has_mark_phrase(text):
        return []
    return [line for line in text.split("\n") if is_mark_line(line)]


def is_compacted(text: str) -> bool:
    """Whether `text` carries one of our note lines (or a legacy engine's mark)."""
    if "[factrail omitted " in text and _MARK_LINE.search(text) is not None:
        return True
    return "compaction truncated " in text and _LEGACY.search(text) is not None


def swap_full_output_note(text: str, tool_use_id: str, replacement: str) -> str:
    """Replace the full-output note of `tool_use_id` on the mark lines of `text`."""
    phrase = full_output_phrase(tool_use_id)
    if phrase not in text:
        return text
    return _MARK_LINE.sub(lambda m: m.group(0).replace(phrase, replacement), text)
