"""One explicit prompt-cache breakpoint at the end of the frozen zone, on OpenAI requests to the
models that cache at breakpoints (the GPT-5.6 family and later).

Those models read a cached prefix only where an earlier request wrote one: at its breakpoints,
the implicit one on its latest user or tool message and any content block marked
`prompt_cache_breakpoint`. After a compaction every later request's implicit breakpoint lies
past the change, so the next compaction, which changes the transcript after the frozen zone,
finds nothing cached but the head and writes everything again at 1.25× (measured with Codex on
GPT-6: each of five compactions re-read only the head). Marked on the frozen zone's last tool
output, that prefix is written once and read by every later compaction.

OpenAI's rules, which the placing keeps:

- Breakpoints go on input content blocks (`input_text` on Responses, `text` on chat); a tool
  output or message whose content is a string becomes a one-block list holding the same text,
  which renders the same prompt.
- A request writes at most four breakpoints (in the default implicit mode the implicit one and
  the latest three marked): none is added when the client's markers would then lose a write,
  nor where the client already marked that item.
- Only the write-billed families get one (`policy.cost.writes_billed`): an older model would
  reject the field.

The marker is a pure function of the request and the frozen zone: byte-stable while the zone
does not move. It is written into copies: the client's parsed objects are never changed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from factrail.core.formats.base import WireDocument
from factrail.core.formats.responses import CALLS, CONTENT_OUTPUTS

log = logging.getLogger("factrail.cache_marks")

KEY = "prompt_cache_breakpoint"
MARK = {"mode": "explicit"}
MAX_WRITES = 4
INPUT_ROLES = frozenset({"user", "developer", "system"})
TEXT_BLOCKS = frozenset({"input_text", "text"})


def _breakpoints(value: Any) -> int:
    """How many blocks of a content value (a list of blocks, or a string) carry a breakpoint."""
    return (
        sum(1 for p in value if isinstance(p, dict) and KEY in p) if isinstance(value, list) else 0
    )


def _content_key(item: Any) -> str | None:
    """Where an item keeps the content a breakpoint can go on (None: it has none)."""
    if not isinstance(item, dict) or item.get("type") not in (None, "message", *CONTENT_OUTPUTS):
        return None
    if item.get("type") in CONTENT_OUTPUTS:
        return "output"
    if item.get("role") == "tool" or item.get("role") in INPUT_ROLES:
        return "content"
    return None


def marks(items: list[Any]) -> int:
    """How many blocks of the request already carry a breakpoint."""
    return sum(
        _breakpoints(item.get(key)) for item in items if (key := _content_key(item)) is not None
    )


def _marked_content(value: Any, part_type: str) -> list[Any] | None:
    """`value` (a string or a list of content blocks) with its last text block marked; None
    when it has none that can carry one."""
    if isinstance(value, str):
        return [{"type": part_type, "text": value, KEY: dict(MARK)}] if value else None
    if not isinstance(value, list):
        return None
    for k in range(len(value) - 1, -1, -1):
        part = value[k]
        if isinstance(part, dict) and part.get("type") in TEXT_BLOCKS and part.get("text"):
            out = list(value)
            out[k] = {**part, KEY: dict(MARK)}
            return out
    return None


def _frozen_item(doc: WireDocument, items: list[Any], frozen_through: int) -> int | None:
    """The wire item ending the frozen zone: the last tool output of an engine message up to
    `frozen_through` that can carry a breakpoint (a hosted shell's chunks cannot: then the one
    before it), or before any output (the head) the last input message before the first
    call."""
    for m in range(min(frozen_through, len(doc.messages) - 1), -1, -1):
        for r in range(len(doc.messages[m].tool_results) - 1, -1, -1):
            path = doc.result_location(m, r)
            k = path[0] if path and isinstance(path[0], int) else None
            if k is not None and k < len(items) and _content_key(items[k]) is not None:
                return k
    first_call = next(
        (
            k
            for k, item in enumerate(items)
            if isinstance(item, dict)
            and (item.get("type") in CALLS or item.get("tool_calls") or item.get("role") == "tool")
        ),
        len(items),
    )
    return next(
        (k for k in range(first_call - 1, -1, -1) if _content_key(items[k]) == "content"), None
    )


def place(
    body: Mapping[str, Any],
    items: Any,
    doc: Any,
    frozen_through: int | None,
    *,
    chat: bool,
) -> list[Any] | None:
    """`items` (the wire `input` or `messages` to forward) with one breakpoint at the end of the
    frozen zone, or None to forward them as they are. Never raises: a marker is an
    optimisation."""
    if frozen_through is None or not isinstance(items, list) or not isinstance(doc, WireDocument):
        return None
    try:
        options = body.get("prompt_cache_options")
        implicit = not (isinstance(options, Mapping) and options.get("mode") == "explicit")
        if marks(items) + implicit >= MAX_WRITES:
            return None
        k = _frozen_item(doc, items, frozen_through)
        key = _content_key(items[k]) if k is not None and k < len(items) else None
        if k is None or key is None or _breakpoints(items[k].get(key)):
            return None
        content = _marked_content(items[k].get(key), "text" if chat else "input_text")
        if content is None:
            return None
        out = list(items)
        out[k] = {**items[k], key: content}
        return out
    except Exception:
        log.warning("could not place the cache breakpoint", exc_info=True)
        return None
