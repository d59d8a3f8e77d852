"""Which session a request belongs to: the client's own session wherever it names one.

Every key is a blake2b hash (nothing in clear) behind a prefix naming its source: `h-` the
caller's `X-Factrail-Session`, `c-` a client's session id, `r-` a chain of provider-kept turns
(Responses, Anthropic threads) whose start was not seen, `s-` the stable head and the first
answer; the fence's aliases are `a-` the client's session id alone and `s-` the head alone.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from factrail.core.formats.base import Document
from factrail.core.model import is_prompt
from factrail.policy.provenance import previous_id

SESSION_HEADER = "x-factrail-session"
CLIENT_HEADERS = (
    "x-claude-code-session-id",
    "session_id",
    "session-id",
    "conversation_id",
    "x-session-id",
)
"""Session ids clients send as headers: Claude Code, Codex CLI (`session_id`; older versions
also `conversation_id`), others."""
CLIENT_METADATA_KEYS = ("session_id", "thread_id", "conversation_id")
"""Keys of a Responses `client_metadata` that name a conversation (Codex sends the first two)."""
SESSION_PART = "_session_"
"""Claude Code's `metadata.user_id` is `user_<hash>_account_<uuid>_session_<uuid>` (newer
versions send a JSON object with a `session_id` instead)."""

Chain = Callable[[str], str | None]
"""Provider response id → the session key of the request it answered, when known."""


def session_key(
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    doc: Document,
    model: str,
    chain: Chain | None = None,
) -> str:
    """The session of a request (`headers` with lower-case names, or case-insensitive).

    In order: `X-Factrail-Session`; the session of the response a request continues on the
    provider's side (`previous_id`, when `chain` knows it); the client's own session id
    (`client_id`) together with the stable head, so that the subagents of one client session
    (other system prompt and task) stay apart; a previous id not known (a chain from here on); the
    stable head (system texts, first user message, model family) with the first answer once
    there is one (its text and call ids: runs of one prompt part there, so two runs at once
    never share a plan; the first request of each, which has no answer yet, is keyed by the
    head alone).
    """
    explicit = _text(headers.get(SESSION_HEADER))
    if explicit:
        return header_key(explicit)
    previous = previous_id(body)
    known = chain(previous) if previous and chain is not None else None
    if known:
        return known
    head = _head(doc, model)
    client = client_id(headers, body)
    if client:
        return _key("c-", client, *head)
    if previous:
        return _key("r-", previous)
    return _key("s-", *head, *_first_answer(doc))


def alias_keys(
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    doc: Document | None = None,
    model: str = "",
) -> tuple[str, ...]:
    """Keys the fence keeps a session's taint under besides its own, so that it survives what
    would change the key: the client's own session id alone (`a-`), whatever its head (its
    compaction, a new session header); for a client that names no session, the head alone
    (the key of its first request, and of every run of the same prompt: a client that trims
    its oldest turns changes its first answer, never its head)."""
    client = client_id(headers, body)
    if client:
        return (_key(CLIENT_ALIAS, client),)
    named = _text(headers.get(SESSION_HEADER)) or previous_id(body)
    if doc is None or named or not _first_answer(doc):
        return ()
    return (_key("s-", *_head(doc, model)),)


CLIENT_ALIAS = "a-"
"""The prefix of the fence's record of a client's session id alone (`alias_keys`)."""


def is_client_alias(key: str) -> bool:
    """Whether `key` is the fence's record of a client's session id (a taint that outlives the
    client's own compaction), not a session with turns and a bill of its own."""
    return key.startswith(CLIENT_ALIAS)


def _head(doc: Document, model: str) -> tuple[str, ...]:
    """The stable head: system texts, first user message, model family."""
    first_user = next((m.text for m in doc.messages if is_prompt(m)), "")
    family = re.split(r"[-:@/]", model.lower(), maxsplit=1)[0] if model else ""
    return (*doc.system_texts, first_user, family)


def _first_answer(doc: Document) -> tuple[str, ...]:
    """What sets a run apart from another of the same prompt: its first answer's text and the
    ids the provider gave its calls (none before the first answer)."""
    answer = next((m for m in doc.messages if m.role == "assistant"), None)
    if answer is None:
        return ()
    return (answer.text, *(f"{u.tool_use_id}\x01{u.tool}" for u in answer.tool_uses))


def header_key(value: str) -> str:
    """The session key of requests that send `X-Factrail-Session: value`."""
    return _key("h-", value.strip())


def client_id(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """The client's own session id: Claude Code's `metadata.user_id` (its session part when
    it has one), OpenAI `prompt_cache_key`, a session header, a Responses `client_metadata`."""
    metadata = body.get("metadata")
    user = _text(metadata.get("user_id")) if isinstance(metadata, dict) else None
    if user:
        return _claude_session(user)
    candidates = [body.get("prompt_cache_key"), *(headers.get(n) for n in CLIENT_HEADERS)]
    extra = body.get("client_metadata")
    if isinstance(extra, dict):
        candidates += [extra.get(n) for n in CLIENT_METADATA_KEYS]
    return next((t for t in map(_text, candidates) if t), None)


def _claude_session(user: str) -> str:
    """The session part of a `metadata.user_id`, else the whole value."""
    if user.startswith("{"):
        try:
            parsed = orjson.loads(user)
        except orjson.JSONDecodeError:
            return user
        session = _text(parsed.get("session_id")) if isinstance(parsed, dict) else None
        return session or user
    _, sep, session = user.rpartition(SESSION_PART)
    return session if sep and session else user


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _key(prefix: str, *parts: str) -> str:
    joined = "\x00".join(parts).encode("utf-8", "surrogatepass")
    return prefix + hashlib.blake2b(joined, digest_size=12).hexdigest()
