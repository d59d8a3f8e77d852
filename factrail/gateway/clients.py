"""Which client sent a request, from its `User-Agent`: a short, stable name for the pages and
the turn log (never the header itself, which may carry anything)."""

from __future__ import annotations

import re
from collections.abc import Mapping

KNOWN = (
    ("claude-cli", "claude-code"),
    ("claude-code", "claude-code"),
    ("codex", "codex"),
    ("mini-swe-agent", "mini-swe-agent"),
    ("litellm", "litellm"),
    ("openai-agents", "openai-agents"),
    ("anthropic/python", "anthropic-python"),
    ("anthropic/js", "anthropic-node"),
    ("openai/python", "openai-python"),
    ("openai/js", "openai-node"),
    ("gemini", "gemini-cli"),
    ("curl/", "curl"),
)
"""A lowercased `User-Agent` substring → the client's name; the first match wins."""
_PRODUCT = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,31}")
MAX_CHARS = 32


def client_name(headers: Mapping[str, str]) -> str | None:
    """The client's name: a known one, else the first product token of the `User-Agent`
    (letters, digits, `.`, `_`, `-`; at most 32 characters); None without one."""
    agent = headers.get("user-agent", "")
    lowered = agent.lower()
    for needle, name in KNOWN:
        if needle in lowered:
            return name
    match = _PRODUCT.match(agent.strip())
    return match.group(0).lower()[:MAX_CHARS] if match else None
