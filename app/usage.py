"""Read the upstream's reported prompt tokens on the way past, without buffering the stream."""

from __future__ import annotations

from typing import Any

import orjson

MAX_PENDING = 1 << 20
"""An SSE event longer than this is not inspected (usage events are small)."""


ANTHROPIC_INPUT_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
"""Anthropic reports cached prompt tokens apart from `input_tokens`; the prompt is their sum."""


def prompt_tokens(payload: Any) -> int | None:
    """Prompt tokens reported in a response body or SSE event.

    `usage.prompt_tokens` (chat), else the sum of `usage.input_tokens` and Anthropic's
    `cache_read_input_tokens` / `cache_creation_input_tokens` (Responses has only the first).
    The usage may sit under `response` (a Responses stream's `response.completed`) or `message`
    (an Anthropic stream's `message_start`).
    """
    if not isinstance(payload, dict):
        return None
    usage = payload.get("usage")
    for holder in ("response", "message"):
        if not isinstance(usage, dict) and isinstance(payload.get(holder), dict):
            usage = payload[holder].get("usage")
    if not isinstance(usage, dict):
        return None
    chat = usage.get("prompt_tokens")
    if _count(chat) > 0:
        return _count(chat)
    total = sum(_count(usage.get(key)) for key in ANTHROPIC_INPUT_KEYS)
    return total if total > 0 else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def body_prompt_tokens(body: bytes) -> int | None:
    """Prompt tokens from a whole JSON response body."""
    if b'"usage"' not in body:
        return None
    try:
        return prompt_tokens(orjson.loads(body))
    except orjson.JSONDecodeError:
        return None


class StreamUsage:
    """Feed it the raw SSE bytes as they pass; `prompt_tokens` holds the last usage seen."""

    def __init__(self) -> None:
        self.prompt_tokens: int | None = None
        self._pending = b""

    def feed(self, chunk: bytes) -> None:
        """Inspect the complete events in `chunk` (plus what was pending); keep the rest."""
        data = self._pending + chunk
        cut = max(data.rfind(b"\n\n"), data.rfind(b"\r\n\r\n"))
        if cut < 0:
            self._pending = data if len(data) <= MAX_PENDING else b""
            return
        complete, self._pending = data[:cut], data[cut:].lstrip(b"\r\n")
        if b'"usage"' in complete:
            self._scan(complete)

    def _scan(self, events: bytes) -> None:
        for line in events.splitlines():
            if not line.startswith(b"data:") or b'"usage"' not in line:
                continue
            try:
                found = prompt_tokens(orjson.loads(line[5:].strip()))
            except orjson.JSONDecodeError:
                continue
            if found is not None:
                self.prompt_tokens = found
