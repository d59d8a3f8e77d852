"""Which session a request belongs to: the client's own session wherever it names one.

Every key is a blake2b hash (nothing in clear) behind a prefix naming its source: `h-` the
caller's `X-Factrail-Session`, `c-` a client's session id, `r-` a chain of provider-kept turns
(Responses, Anthropic threads) whose start was not seen, `s-` the stable head and the first
answer; the fence's aliases (`alias_keys`) are `a-` each session id the client names, alone,
`s-` the head alone, `f-` the head as every wire format spells it, and the session of the
answer a request continues.
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
    return _key(HEAD_ALIAS, *head, *_first_answer(doc))


def alias_keys(
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    doc: Document | None = None,
    model: str = "",
    chain: Chain | None = None,
    session: str | None = None,
) -> tuple[str, ...]:
    """Every identity a request carries besides its own key `session`, which the fence keeps
    its taint under and checks, so that taint survives any change of the others: each session
    id the client names (`a-`, alone: whatever its head, so a client's compaction keeps it);
    the session of the answer it continues (`chain`); the stable head alone (`s-`: a new or
    changed session header, a changed or dropped client id, a client trimming its oldest
    turns). The head is left out when the transcript does not start at it (it continues a
    provider-kept history) or holds no text. At most a dozen keys, each once."""
    keys = [_key(CLIENT_ALIAS, client) for client in client_ids(headers, body)]
    previous = previous_id(body)
    known = chain(previous) if previous and chain is not None else None
    if known:
        keys.append(known)
    head = _head(doc, model) if doc is not None and not previous else ()
    if any(head[:-1]):
        keys.append(_key(HEAD_ALIAS, *head))
    wide = fence_head(doc, body) if doc is not None and not previous else ()
    if any(wide):
        keys.append(_key(FENCE_HEAD, *wide))
    return tuple(k for k in dict.fromkeys(keys) if k != session)


CLIENT_ALIAS = "a-"
"""The prefix of the fence's record of a client's session id alone (`alias_keys`)."""
HEAD_ALIAS = "s-"
"""The prefix of a stable head alone: the key of a client that names no session before its
first answer, and the fence's record of the head of every request."""


FENCE_HEAD = "f-"
"""The prefix of the fence's record of a head as every wire format spells it (`fence_head`):
it carries a taint across routes and models, and never proves that a transcript was seen
from its start."""


def fence_head(doc: Document, body: Mapping[str, Any]) -> tuple[str, str]:
    """The head as the fence compares it whatever the wire format and model: the system texts
    (a Responses `instructions` among them: chat's system and developer messages, Anthropic's
    `system`), then the first user message, each with every blank dropped."""
    instructions = body.get("instructions")
    given = instructions if isinstance(instructions, str) else ""
    systems = [given if given not in doc.system_texts else "", *doc.system_texts]
    first_user = next((m.text for m in doc.messages if is_prompt(m)), "")
    return _solid("".join(systems)), _solid(first_user)


def _solid(text: str) -> str:
    return "".join(text.split())


def is_client_alias(key: str) -> bool:
    """Whether `key` is the fence's record of a client's session id (a taint that outlives the
    client's own compaction), not a session with turns and a bill of its own."""
    return key.startswith(CLIENT_ALIAS)


def proves_start(session: str, alias: str) -> bool:
    """Whether an alias record seen from its start shows that `session`'s transcript was seen
    whole: a client's session id, or the answer it continues, does; a head does only for a
    client that names no session (a run of its own prompt), never for a named session, whose
    head another session may share; a head as every wire format spells it never does."""
    if alias.startswith(FENCE_HEAD):
        return False
    return not alias.startswith(HEAD_ALIAS) or session.startswith(HEAD_ALIAS)


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
    """The client's own session id: the first of `client_ids`."""
    return next(iter(client_ids(headers, body)), None)


def client_ids(headers: Mapping[str, str], body: Mapping[str, Any]) -> tuple[str, ...]:
    """Every session id the client names, in this order: Claude Code's `metadata.user_id`
    (its session part when it has one), OpenAI `prompt_cache_key`, a session header, a
    Responses `client_metadata`; each once."""
    metadata = body.get("metadata")
    user = _text(metadata.get("user_id")) if isinstance(metadata, dict) else None
    candidates = [body.get("prompt_cache_key"), *(headers.get(n) for n in CLIENT_HEADERS)]
    extra = body.get("client_metadata")
    if isinstance(extra, dict):
        candidates += [extra.get(n) for n in CLIENT_METADATA_KEYS]
    named = [_claude_session(user)] if user else []
    named += [t for t in map(_text, candidates) if t]
    return tuple(dict.fromkeys(named))


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
