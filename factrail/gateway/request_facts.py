"""What a proxied request says about itself: its path as sent, its system prompt and the tokens
outside its transcript, whether it asks the provider for a summary, the context window and the
prompt cache's lifetime it asks for, and the shape of its route's error events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from starlette.datastructures import Headers
from starlette.types import Scope

from factrail.core.formats.base import Document, join_text
from factrail.core.formats.responses import asks_compaction
from factrail.core.tokens import estimate_tokens
from factrail.gateway.cache_marks import requested_ttl
from factrail.gateway.errors import StreamShape
from factrail.gateway.routing import RESPONSES, Route
from factrail.policy.cost import EXTENDED_RETENTION_S, duration_s, model_ttl_s


def asks_summary(route: Route, data: Mapping[str, Any]) -> bool:
    """Whether the request asks the provider to compact its transcript (no turn follows on it):
    Anthropic's `compaction` parameter, a Responses input ending with a `compaction_trigger`."""
    if route.provider == "anthropic":
        return isinstance(data.get("compaction"), dict)
    return route is RESPONSES and asks_compaction(data.get("input"))


def stream_shape(route: Route, content_type: str) -> StreamShape | None:
    """The shape of an error event in the route's event stream; None for any other body."""
    if "text/event-stream" not in content_type:
        return None
    if route.provider == "anthropic":
        return "anthropic"
    return "responses" if route is RESPONSES else "openai"


def raw_path(scope: Scope) -> str:
    """The path as the client sent it: `%2F` in an id must not become a path separator."""
    raw = scope.get("raw_path")
    return raw.decode("latin-1") if isinstance(raw, bytes) else str(scope["path"])


def system_text(data: dict[str, Any], route: Route) -> str:
    """The route's top-level system prompt (a string or text blocks) as text; "" when none."""
    return join_text(data.get(route.system)) if route.system else ""


def with_system(doc: Document, system: str) -> Document:
    """`doc` with a top-level system prompt counted among its system texts (the session key)."""
    if system:
        doc.system_texts.append(system)
    return doc


def extra_tokens(data: dict[str, Any], doc: Document) -> int:
    """Estimated tokens outside the transcript, which the provider counts too: tool
    definitions (also as a Responses `additional_tools` item), `instructions` and every system
    text (`system` / `developer` messages of chat and Responses, Anthropic's top-level
    `system`)."""
    extra = sum(estimate_tokens(text) for text in doc.system_texts)
    tools = data.get("tools")
    if tools:
        extra += estimate_tokens(orjson.dumps(tools).decode())
    instructions = data.get("instructions")
    if isinstance(instructions, str):
        extra += estimate_tokens(instructions)
    items = data.get("input")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            extra += estimate_tokens(orjson.dumps(item.get("tools")).decode())  # Codex on GPT-6
    return extra


LONG_CONTEXT_BETA = "context-1m"
"""The `anthropic-beta` flag (`context-1m-2025-08-07`) that gives a Claude model a window of a
million tokens."""
LONG_CONTEXT_TOKENS = 1_000_000


def requested_cache_ttl(provider: str, data: Mapping[str, Any]) -> float | None:
    """The prompt cache's lifetime a request asked for, or its model keeps, when known: the
    longest of an Anthropic request's `cache_control` markers (one hour with `ttl: "1h"`);
    OpenAI's 24-hour retention (`prompt_cache_retention: "24h"`), `prompt_cache_options.ttl`
    (`"30m"`), or the 30 minutes of the GPT-5.6 family on (`cost.model_ttl_s`)."""
    if provider == "anthropic":
        ttl = requested_ttl(data)
        return float(ttl) if ttl is not None else None
    if data.get("prompt_cache_retention") == "24h":
        return EXTENDED_RETENTION_S
    model = data.get("model")
    options = data.get("prompt_cache_options")
    asked = duration_s(options.get("ttl")) if isinstance(options, Mapping) else None
    kept = model_ttl_s(model) if isinstance(model, str) else None
    return max((t for t in (asked, kept) if t is not None), default=None)


def requested_window(provider: str, headers: Headers) -> int | None:
    """The context window a request asked for, when it says: a Claude request with the 1M
    context beta has 1M tokens, not the model's default (its trigger, danger line and the size
    past which even recent results give way all follow)."""
    if provider != "anthropic":
        return None
    betas = ",".join(headers.getlist("anthropic-beta")).lower()
    return LONG_CONTEXT_TOKENS if LONG_CONTEXT_BETA in betas else None
