"""Read the upstream's reported prompt tokens on the way past, without buffering the stream."""

from __future__ import annotations

from typing import Any

import orjson

MAX_PENDING = 1 << 20
"""An SSE event longer than this is not inspected (usage events are small)."""


def prompt_tokens(payload: Any) -> int | None:
    """`usage.prompt_tokens` (chat), `usage.input_tokens` (Responses) or the same under
    `response` (a Responses stream's `response.completed` event)."""
    if not isinstance(payload, dict):
        return None
    usage = payload.get("usage")
    if not isinstance(usage, dict) and isinstance(payload.get("response"), dict):
        usage = payload["response"].get("usage")
    if not isinstance(usage, dict):
        return None
    for key in ("prompt_tokens", "input_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


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
