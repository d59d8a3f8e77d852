"""A fake OpenAI chat upstream that bills like a provider's prompt cache (for `bench/replay.py`).

Per conversation (the `x-replay-conversation` request header, which factrail forwards as any
other end-to-end header; `default` without it) it remembers the messages of the previous request
and answers every `POST /v1/chat/completions` with a `usage` whose `prompt_tokens` are the
request's tokens and whose `prompt_tokens_details.cached_tokens` are the tokens of the longest
prefix of messages it shares with the previous request, message by message as serialised JSON
(byte-identical or not: a provider's cache reads up to the first changed byte; this one reads
whole messages). Tokens are counted per message with `factrail.core.tokens.estimate_tokens`:

- meter `text` (the default, the meter of `factrail eval --sim`): the message's text content
  plus each tool call's arguments, so the figures calibrate factrail's estimate at about 1;
- meter `json` (`x-replay-meter: json`): the message's whole JSON, as a rougher provider might;
- meter `transcript`: as `text`, but `system` and `developer` messages count nothing, which is
  what factrail's own estimate counts on this route (a diagnostic: calibration stays at 1).

Streams (`"stream": true`) send the usage in a last chunk when `stream_options.include_usage`
is set, as OpenAI does. Each answer also says in headers what the cache saw (`x-fake-prompt`,
`x-fake-cached`, `x-fake-messages`, `x-fake-shared`, `x-fake-previous`), and the server keeps one
record per request, without its body (`GET /_cache_records`, `POST /_reset`); when a request does
not extend the previous one of its conversation, the record holds the first differing message
of each (`diff`). `POST /_forget?conversation=KEY` drops a conversation's remembered messages.
Run: `uvicorn tests.integration.fake_cache_upstream:app`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from factrail.core.formats.base import join_text
from factrail.core.tokens import estimate_tokens
from factrail.eval.sim import shared_prefix
from tests.integration.fakes import json_response

CONVERSATION_HEADER = "x-replay-conversation"
METER_HEADER = "x-replay-meter"
METERS = ("text", "json", "transcript")
MAX_CONVERSATIONS = 64
"""Conversations remembered at once (least recently used forgotten first)."""
MEMO_MAX = 200_000
"""Message token counts kept (by the message's JSON and meter)."""


@dataclass(slots=True)
class Conversation:
    """What the cache holds of one conversation: the previous request's serialised messages."""

    messages: list[bytes] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    seen: bool = False


CONVERSATIONS: OrderedDict[str, Conversation] = OrderedDict()
RECORDS: list[dict[str, Any]] = []
_MEMO: dict[tuple[str, bytes], int] = {}


def message_tokens(message: Any, raw: bytes, meter: str) -> int:
    """Tokens of one message under `meter` (memoised by its JSON)."""
    key = (meter, raw)
    hit = _MEMO.get(key)
    if hit is not None:
        return hit
    if meter == "json" or not isinstance(message, dict):
        tokens = estimate_tokens(raw.decode())
    elif meter == "transcript" and message.get("role") in ("system", "developer"):
        tokens = 0
    else:
        tokens = estimate_tokens(join_text(message.get("content")))
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            fn = call.get("function") if isinstance(call, dict) else None
            args = fn.get("arguments") if isinstance(fn, dict) else None
            if isinstance(args, str):
                tokens += estimate_tokens(args)
            elif args is not None:
                tokens += estimate_tokens(orjson.dumps(args).decode())
    if len(_MEMO) >= MEMO_MAX:
        _MEMO.clear()
    _MEMO[key] = tokens
    return tokens


def _conversation(key: str) -> Conversation:
    conv = CONVERSATIONS.get(key)
    if conv is None:
        conv = CONVERSATIONS[key] = Conversation()
        while len(CONVERSATIONS) > MAX_CONVERSATIONS:
            CONVERSATIONS.popitem(last=False)
    CONVERSATIONS.move_to_end(key)
    return conv


def _diff(previous: list[bytes], current: list[bytes], at: int) -> dict[str, Any]:
    """The first message where `current` leaves `previous` (either may be missing)."""
    return {
        "index": at,
        "previous": previous[at].decode() if at < len(previous) else None,
        "current": current[at].decode() if at < len(current) else None,
    }


def _usage(prompt: int, cached: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens": 1,
        "total_tokens": prompt + 1,
    }


def _chunk(delta: dict[str, Any] | None, usage: dict[str, Any] | None = None) -> bytes:
    data: dict[str, Any] = {
        "id": "chatcmpl-cache",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "fake-cache",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    if usage is not None:
        data["usage"] = usage
    return b"data: " + orjson.dumps(data) + b"\n\n"


async def _stream(usage: dict[str, Any] | None) -> AsyncIterator[bytes]:
    yield _chunk({"role": "assistant", "content": "ok"})
    yield _chunk({})
    if usage is not None:
        yield _chunk(None, usage)
    yield b"data: [DONE]\n\n"


async def chat(request: Request) -> Response:
    data = orjson.loads(await request.body())
    key = request.headers.get(CONVERSATION_HEADER, "default")
    meter = request.headers.get(METER_HEADER, "text")
    meter = meter if meter in METERS else "text"
    wire = data.get("messages") if isinstance(data, dict) else None
    messages = wire if isinstance(wire, list) else []
    raws = [orjson.dumps(m) for m in messages]
    tokens = [message_tokens(m, raw, meter) for m, raw in zip(messages, raws, strict=True)]
    conv = _conversation(key)
    shared = shared_prefix(conv.messages, raws) if conv.seen else 0
    prompt, cached = sum(tokens), sum(tokens[:shared])
    record: dict[str, Any] = {
        "conversation": key,
        "prompt": prompt,
        "cached": cached,
        "messages": len(raws),
        "shared": shared,
        "previous": len(conv.messages) if conv.seen else None,
    }
    if conv.seen and shared < len(conv.messages):
        record["diff"] = _diff(conv.messages, raws, shared)
    RECORDS.append(record)
    conv.messages, conv.tokens, conv.seen = raws, tokens, True
    headers = {
        "x-fake-prompt": str(prompt),
        "x-fake-cached": str(cached),
        "x-fake-messages": str(len(raws)),
        "x-fake-shared": str(shared),
        "x-fake-previous": "" if record["previous"] is None else str(record["previous"]),
    }
    usage = _usage(prompt, cached)
    if data.get("stream"):
        options = data.get("stream_options")
        include = isinstance(options, dict) and options.get("include_usage") is True
        stream = _stream(usage if include else None)
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)
    answer = {
        "id": "chatcmpl-cache",
        "object": "chat.completion",
        "created": 1,
        "model": data.get("model", "fake-cache"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok"},
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
    }
    return json_response(answer, headers=headers)


async def records(request: Request) -> Response:
    return json_response(RECORDS)


async def reset(request: Request) -> Response:
    RECORDS.clear()
    CONVERSATIONS.clear()
    _MEMO.clear()
    return json_response({})


async def forget(request: Request) -> Response:
    CONVERSATIONS.pop(request.query_params.get("conversation", ""), None)
    return json_response({})


app = Starlette(
    routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/_cache_records", records),
        Route("/_records", records),
        Route("/_reset", reset, methods=["POST"]),
        Route("/_forget", forget, methods=["POST"]),
    ]
)
