"""Read the upstream's own usage (and a Responses id) on the way past, without buffering.

OpenAI chat reports `usage.prompt_tokens` with `prompt_tokens_details.cached_tokens` among
them; Responses `usage.input_tokens` with `input_tokens_details.cached_tokens` (also inside
`response.completed`); from the GPT-5.6 family on, both details also hold
`cache_write_tokens` (billed at 1.25× input), the rest of the prompt being uncached; Anthropic
`usage.input_tokens` (uncached only), `cache_read_input_tokens` and
`cache_creation_input_tokens` (also in a stream's `message_start` and `message_delta`).

An Anthropic response that ran several sampling iterations (a server tool loop, the
provider's own compaction) lists them in `usage.iterations`: its top-level figures add up the
`message` iterations, so the prompt factrail sent is the first of those, and a `compaction`
iteration is billed on top of the top-level figures. Server-side context editing
(`context_management`) reports the input tokens it cleared before the model saw the prompt
(`applied_edits[].cleared_input_tokens`): they were sent, but neither billed nor counted.

A client that asks Anthropic for cache diagnostics (`diagnostics.previous_message_id`; Claude
Code can, behind a feature gate) gets, when the prompt cache could not reuse the previous
request's prefix, a `diagnostics.cache_miss_reason` (in the body, a stream's `message_start` or
`message_delta`): its `type` and, for a change, the `cache_missed_input_tokens`. Both requests
are the ones factrail forwarded, so the reason measures what factrail (or the client) changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

Provider = Literal["openai", "anthropic"]
MAX_PENDING = 1 << 20
"""An SSE event longer than this is not inspected (usage events are small)."""
ANTHROPIC_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
OPENAI_KEYS = ("prompt_tokens", "input_tokens")
USAGE_KEYS = frozenset((*OPENAI_KEYS, *ANTHROPIC_KEYS))
DETAILS_KEYS = ("prompt_tokens_details", "input_tokens_details")
"""Where OpenAI chat and Responses report `cached_tokens` and `cache_write_tokens`, parts of the
prompt."""
DETAIL_COUNTS = ("cached_tokens", "cache_write_tokens")
Split = tuple[int, int, int]
"""Input tokens as (uncached, cache read, cache write)."""
MISS_REASONS = frozenset(
    {
        "messages_changed",
        "system_changed",
        "tools_changed",
        "model_changed",
        "previous_message_not_found",
        "unavailable",
    }
)
"""Anthropic's `cache_miss_reason` types (any other is counted as `other`)."""


@dataclass(frozen=True, slots=True)
class CacheMiss:
    """Why the provider's prompt cache could not reuse the previous request's prefix."""

    reason: str
    """A `MISS_REASONS` type, or `other`."""
    tokens: int = 0
    """About how many input tokens would have been read from the cache had the prefix matched
    (0 where the reason says none)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """The input tokens of one upstream response, split the way the provider bills them."""

    uncached: int
    cached: int
    """Read from the provider's prompt cache."""
    cache_write: int
    """Written to the prompt cache (Anthropic; OpenAI from the GPT-5.6 family on)."""
    reports_cache: bool = True
    """Whether the provider said what it read from its cache (an upstream that never does
    reports every prompt uncached, which says nothing about its cache)."""
    sent: Split | None = None
    """The prompt as factrail sent it, when the provider reports several iterations (the
    first `message` one); None: the figures above are that prompt's."""
    compacted: bool = False
    """The provider compacted the prompt before it first sampled: no figure is the prompt as
    sent."""
    cleared: int = 0
    """Tokens of the prompt as sent that the provider's context editing cleared."""
    miss: CacheMiss | None = None
    """The provider's own diagnosis of a prompt-cache miss, when the client asked for one."""

    @property
    def prompt(self) -> int:
        """The prompt as sent (what calibrates the session's token estimate)."""
        seen = sum(self.sent) if self.sent else self.uncached + self.cached + self.cache_write
        return seen + self.cleared

    @property
    def read(self) -> int:
        """Of the prompt as sent, the tokens read from the provider's cache."""
        return self.sent[1] if self.sent else self.cached


class UsageReader:
    """Collects what one upstream response reports about itself, from its body or its SSE
    bytes: the usage figures (each the largest seen, as stream figures are cumulative) and,
    for a Responses response, its id."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self._id_mark = ("object", "response") if provider == "openai" else ("type", "message")
        """Where a body says it is the response whose `id` a later request may continue."""
        self.response_id: str | None = None
        self._counts: dict[str, int] = {}
        self._sent: Split | None = None
        self._compaction: Split = (0, 0, 0)
        self._compacted = False
        self._cleared = 0
        self._miss: CacheMiss | None = None
        self._pending = b""

    @property
    def usage(self) -> Usage | None:
        """The input usage reported so far, or None when there was none."""
        counts = self._counts
        if self.provider == "anthropic":
            if not any(k in counts for k in ANTHROPIC_KEYS):
                return None
            extra = self._compaction
            return Usage(
                counts.get("input_tokens", 0) + extra[0],
                counts.get("cache_read_input_tokens", 0) + extra[1],
                counts.get("cache_creation_input_tokens", 0) + extra[2],
                "cache_read_input_tokens" in counts,
                self._sent,
                self._compacted,
                self._cleared,
                self._miss,
            )
        prompt = next((counts[k] for k in OPENAI_KEYS if k in counts), None)
        if prompt is None:
            return None
        cached = min(counts.get("cached_tokens", 0), prompt)
        written = min(counts.get("cache_write_tokens", 0), prompt - cached)
        return Usage(prompt - cached - written, cached, written, "cached_tokens" in counts)

    def read_body(self, body: bytes) -> None:
        """Read a whole JSON response body."""
        if b'"usage"' in body:
            self._read_json(body)

    def feed(self, chunk: bytes) -> None:
        """Read the complete SSE events in `chunk` (plus what was pending); keep the rest."""
        data = self._pending + chunk
        cut = max(data.rfind(b"\n\n"), data.rfind(b"\r\n\r\n"))
        if cut < 0:
            self._pending = data if len(data) <= MAX_PENDING else b""
            return
        complete, self._pending = data[:cut], data[cut:].lstrip(b"\r\n")
        if b'"usage"' not in complete:
            return
        for line in complete.splitlines():
            if line.startswith(b"data:") and b'"usage"' in line:
                self._read_json(line[5:])

    def _read_json(self, raw: bytes) -> None:
        try:
            payload = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        if isinstance(payload, dict):
            self._read(payload)

    def _read(self, payload: dict[str, Any]) -> None:
        """Take the usage of a body or event: at its top (chat, Anthropic bodies and
        `message_delta`), under `response` (Responses events) or `message` (`message_start`);
        and the response's id (a Responses response, an Anthropic message)."""
        holder = payload
        for key in ("response", "message"):
            if not isinstance(holder.get("usage"), dict) and isinstance(payload.get(key), dict):
                holder = payload[key]
        field, value = self._id_mark
        if holder.get(field) == value and isinstance(holder.get("id"), str):
            self.response_id = holder["id"]
        usage = holder.get("usage")
        if not isinstance(usage, dict):
            return
        found = {k: usage[k] for k in USAGE_KEYS if k in usage}
        for key in DETAILS_KEYS:
            details = usage.get(key)
            if isinstance(details, dict):
                found.update((k, details[k]) for k in DETAIL_COUNTS if k in details)
        for key, value in found.items():
            if _count(value):
                self._counts[key] = max(self._counts.get(key, 0), value)
        if self.provider != "anthropic":
            return
        iterations = usage.get("iterations")
        if isinstance(iterations, list):
            self._read_iterations(iterations)
        delta = payload.get("delta")
        for diagnostics in (holder.get("diagnostics"), _field(delta, "diagnostics")):
            self._read_miss(diagnostics)
        managed = holder.get("context_management")
        edits = managed.get("applied_edits") if isinstance(managed, dict) else None
        if isinstance(edits, list):
            cleared = sum(
                _tokens(e.get("cleared_input_tokens")) for e in edits if isinstance(e, dict)
            )
            self._cleared = max(self._cleared, cleared)

    def _read_miss(self, diagnostics: Any) -> None:
        """A `cache_miss_reason` (`null` while the diagnosis is pending: nothing)."""
        reason = _field(diagnostics, "cache_miss_reason")
        kind = _field(reason, "type")
        if isinstance(kind, str):
            missed = _tokens(_field(reason, "cache_missed_input_tokens"))
            self._miss = CacheMiss(kind if kind in MISS_REASONS else "other", missed)

    def _read_iterations(self, iterations: list[Any]) -> None:
        """The first `message` iteration (the prompt as sent, unless a compaction came
        first) and the sum of the `compaction` ones (the latest list seen: a stream repeats it
        whole)."""
        sent: Split | None = None
        compacted = False
        compaction = [0, 0, 0]
        for entry in iterations:
            if not isinstance(entry, dict):
                continue
            if not _count(entry.get("input_tokens")):
                continue
            values = [_tokens(entry.get(k)) for k in ANTHROPIC_KEYS]
            if entry.get("type") == "message" and sent is None:
                sent = (values[0], values[1], values[2])
            elif entry.get("type") == "compaction":
                compacted = compacted or sent is None
                compaction = [a + b for a, b in zip(compaction, values, strict=True)]
        if sent is not None:
            self._sent = sent
        self._compacted = compacted
        self._compaction = (compaction[0], compaction[1], compaction[2])


def _field(value: Any, key: str) -> Any:
    """`value[key]` of an object, else None."""
    return value.get(key) if isinstance(value, dict) else None


def _tokens(value: Any) -> int:
    """`value` as a token count (0 when it is none)."""
    return value if _count(value) else 0


def _count(value: Any) -> bool:
    """Whether `value` is a token count (a non-negative int)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
