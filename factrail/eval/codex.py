"""Codex CLI session rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`) as engine messages.

A rollout is JSON lines. Current ones wrap every line: `{"type": "response_item", "payload":
item}` holds one Responses item (`message`, `function_call`, `function_call_output`,
`custom_tool_call`, `local_shell_call`, `reasoning`, …); `session_meta`, `turn_context` (whose
`model` names the model), `event_msg` and `compacted` lines are bookkeeping. Early rollouts hold
the items unwrapped after a header line (`id`, `instructions`), among `record_type` lines.

The items, in order, are the Responses `input` the CLI sent; the Responses adapter reads them.
`reasoning` items are left out: their content is encrypted, so no count of its tokens is known.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from factrail.core.formats import responses
from factrail.core.formats.base import FormatError
from factrail.core.model import Message

WRAPPERS = frozenset({"session_meta", "response_item", "turn_context", "event_msg", "compacted"})
"""The `type` of a current rollout line."""
ITEM_TYPES = responses.CALL_ITEMS | {"message", "reasoning"}
"""Item types an early rollout holds unwrapped."""
LEFT_OUT = frozenset({"reasoning"})


@dataclass(frozen=True, slots=True)
class Rollout:
    """One Codex session: its messages and the model it last asked for ('' when unsaid)."""

    messages: list[Message]
    model: str


def _objects(text: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def is_rollout_line(value: Any) -> bool:
    """Whether a parsed JSON line looks like a rollout's: a wrapped line, an early header or an
    unwrapped item (a Claude Code entry has a `sessionId` and is none of these)."""
    if not isinstance(value, dict) or "sessionId" in value:
        return False
    if value.get("type") in WRAPPERS and isinstance(value.get("payload"), dict):
        return True
    if "record_type" in value or ("instructions" in value and "id" in value):
        return True
    return value.get("type") in ITEM_TYPES and ("role" in value or "call_id" in value)


def parse_rollout(text: str) -> Rollout:
    """The messages of a rollout's text (`FormatError` when no line is a rollout's)."""
    items: list[dict[str, Any]] = []
    model = ""
    recognised = False
    for obj in _objects(text):
        kind = obj.get("type")
        payload = obj.get("payload")
        if kind in WRAPPERS and isinstance(payload, dict):
            recognised = True
            if kind == "response_item":
                items.append(payload)
            elif kind == "turn_context" and isinstance(payload.get("model"), str):
                model = payload["model"]
        elif is_rollout_line(obj):
            recognised = True
            if kind in ITEM_TYPES:
                items.append(obj)
    if not recognised:
        raise FormatError("not a Codex rollout: no session_meta, response_item or item line")
    kept = [item for item in items if item.get("type") not in LEFT_OUT]
    return Rollout(list(responses.parse(kept).messages), model)
