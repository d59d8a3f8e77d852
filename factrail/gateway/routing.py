"""The proxied routes: which upstream each goes to and, for the compaction routes, where the
transcript lives in the body."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Provider = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class Route:
    """A proxied route: its metric label, upstream provider and, for compaction routes, where
    the transcript lives (`field`), which parser reads it and which field holds the system
    prompt."""

    label: str
    field: str | None = None
    provider: Provider = "openai"
    parser: str | None = None
    """Key in `Engine.parsers`; defaults to `field`."""
    system: str | None = None


CHAT = Route("chat_completions", "messages")
RESPONSES = Route("responses", "input")
PASSTHROUGH = Route("passthrough")
MESSAGES = Route("messages", "messages", "anthropic", parser="anthropic", system="system")
ANTHROPIC_PASSTHROUGH = Route("passthrough", provider="anthropic")
