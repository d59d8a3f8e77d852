"""A scripted Anthropic Messages endpoint that validates requests and bills like the prompt cache.

For `tests/integration/test_claude_code_bill.py` and `bench/claude_code_bill.py`: a real client
(Claude Code) runs a deterministic tool loop against it, direct or through factrail.

- **Validation**, as the API would (`validate`): roles, non-empty content, every `tool_result`
  answering a `tool_use` of the previous assistant turn and every `tool_use` answered, at most 4
  `cache_control` markers, none on thinking blocks, no 1-hour marker after a 5-minute one. A bad
  request gets a 400 in Anthropic's error shape and is counted (`rejected`).
- **The prompt cache** (`PromptCache`): the request is cut into blocks in the provider's order
  (tools, system, message content); each `cache_control` marks a breakpoint. A request reads the
  longest prefix written earlier that it matches byte for byte, looked up at each breakpoint and
  up to `LOOKBACK` blocks before it; it writes an entry at each breakpoint past what it read (a
  prefix of at least `MIN_CACHEABLE` tokens), which lives `TTL_S` (1 hour with `ttl: "1h"`) from
  its last use. Usage: `input_tokens` (after the last breakpoint), `cache_read_input_tokens`,
  `cache_creation_input_tokens`, `output_tokens`, JSON or streamed (SSE, usage in
  `message_start`, output tokens in `message_delta`). Tokens: a fixed meter, a block's JSON
  (without its marker) in chars / 4, rounded up.
- **The script** (`POST /_configure` with `root`, `steps`, `fact_token`): the main session (the
  request with a `Bash` tool) is answered step by step, by how many tool results it holds: step 0
  reads the file holding the planted fact, later steps `cat`, `Read` and `grep` big generated
  files (`write_project`), one greps for the fact's token, and after `steps` tool calls the answer
  quotes the fact as it finds it in the transcript it was sent (any tool result); with `fenced`
  (a tool name) and `fenced_step`, that step calls `fenced` (`{"query": ...}`) instead (the
  fenced call of the plugin's end-to-end test); with `writes` (N), every Nth step from the second
  `Write`s a generated module of about 6 KB instead; when the fact is out of sight (its read became
  a re-run note) it re-runs the read once, as the note says, and answers from that, or says it
  is gone; with `thinking`, every answer starts with a signed thinking block, and a request
  holding one whose signature does not match its text (a block changed in any byte) is
  rejected, as the API does; with `parallel` (N), every Nth step from the first asks for two
  tool calls at once. Side calls (titles, quota checks, other models) get a short text
  answer.

`GET /_records`: one record per request, without its body (usage, kind, step, where it first
differs from the previous main request, markers, whether the planted line was in any tool
result, whether the agent re-ran the read). `POST /_reset` forgets records and cache. Run:
`uvicorn tests.integration.scripted_anthropic:app`.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.integration.fakes import json_response, record_routes

MAX_MARKS = 4
LOOKBACK = 20
"""Blocks before a breakpoint at which the provider still looks for a cached prefix."""
MIN_CACHEABLE = 1024
"""A prefix shorter than this (in tokens) is never cached (Anthropic's minimum for Sonnet)."""
TTL_S = {None: 300.0, "5m": 300.0, "1h": 3600.0}
FACT_PREFIX = "release signing key fingerprint: "
MAIN_TOOL = "Bash"
ROLES = ("user", "assistant", "system")
MAX_STEPS = 40


def meter(raw: bytes) -> int:
    """Tokens of one serialised block: its bytes / 4, rounded up."""
    return math.ceil(len(raw) / 4)


# -- the project the script works on -----------------------------------------------------------


def fact_line(token: str) -> str:
    return f"{FACT_PREFIX}{token} (rotate before the 2.4.1 release)"


def write_project(root: Path, steps: int, token: str) -> None:
    """The files the script's tool calls read: a notes file holding the planted fact among
    filler, and per step a build log and a source module of several KB each."""
    (root / "notes").mkdir(parents=True, exist_ok=True)
    (root / "logs").mkdir(exist_ok=True)
    (root / "src").mkdir(exist_ok=True)
    notes = [
        f"- meeting note {i}: discussed the pipeline stage {i} and its owners" for i in range(40)
    ]
    notes.insert(17, fact_line(token))
    (root / "notes" / "release.md").write_text("# Release notes\n" + "\n".join(notes) + "\n")
    for i in range(1, steps + 1):
        log = [f"[{i:02d}:{j:03d}] tests/test_mod{i}.py::test_case_{j} PASSED" for j in range(150)]
        log.insert(75, f"[{i:02d}:075] WARNING slow test in module {i}: 1.{i}s")
        (root / "logs" / f"build_{i}.log").write_text("\n".join(log) + "\n")
        src = [f"def helper_{i}_{j}(value: int) -> int:\n    return value * {j} + {i}\n"
               for j in range(90)]  # fmt: skip
        (root / "src" / f"module_{i}.py").write_text("\n".join(src))


def written_module(step: int) -> str:
    """What the `Write` of `step` writes: a module of about 6 KB."""
    return "\n".join(
        f"def generated_{step}_{j}(value: int) -> int:\n    return value * {j} - {step}\n"
        for j in range(90)
    )


def tool_call(
    step: int, steps: int, root: str, token: str, writes: int = 0
) -> tuple[str, dict[str, Any]]:
    """The tool call (name, input) of `step` (0 < `steps`); with `writes`, every `writes`-th
    step from the second on writes a generated module instead."""
    if step == 0:
        return "Bash", {"command": "cat notes/release.md", "description": "Read the notes"}
    if step == steps - 1:
        return "Bash", {"command": f"grep -c {token} notes/release.md logs/*.log || true",
                        "description": "Count uses of the key"}  # fmt: skip
    if writes and step > 1 and step % writes == 0:
        path = f"{root}/src/generated_{step}.py"
        return "Write", {"file_path": path, "content": written_module(step)}
    i = (step + 1) // 2
    if step % 2:
        return "Bash", {"command": f"cat logs/build_{i}.log", "description": f"Build log {i}"}
    return "Read", {"file_path": f"{root}/src/module_{i}.py"}


def sign(thinking: str) -> str:
    """The scripted signature of a thinking block's text (the API checks its own the same way:
    a block changed in any byte is rejected)."""
    return hashlib.sha256(b"scripted thinking|" + thinking.encode()).hexdigest()


def thinking_block(step: int) -> dict[str, Any]:
    """The signed thinking block an answer of `step` starts with (`Script.thinking`)."""
    text = f"Step {step}: the notes hold the key; read on and keep what each file says in mind."
    return {"type": "thinking", "thinking": text, "signature": sign(text)}


# -- request structure ---------------------------------------------------------------------------


class Invalid(Exception):
    """The request would be a 400 `invalid_request_error` at the provider."""


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _merged(messages: list[Any]) -> list[tuple[str, list[Any]]]:
    """User and assistant messages, consecutive ones of a role merged, as the API does (Claude
    Code also sends `system` messages between them, which take no part in the alternation)."""
    merged: list[tuple[str, list[Any]]] = []
    for m in messages:
        if m["role"] == "system":
            continue
        if merged and merged[-1][0] == m["role"]:
            merged[-1][1].extend(_blocks(m["content"]))
        else:
            merged.append((m["role"], list(_blocks(m["content"]))))
    return merged


def _marks(item: Any) -> list[Any]:
    """The `cache_control` markers on a block and the blocks nested in it."""
    if not isinstance(item, dict):
        return []
    nested = item.get("content")
    marks = [b["cache_control"] for b in nested if isinstance(b, dict) and "cache_control" in b] \
        if isinstance(nested, list) else []  # fmt: skip
    if "cache_control" in item:
        marks.append(item["cache_control"])
    return marks


def validate(body: Any) -> None:
    """Raise `Invalid` where the API would answer 400."""
    if not isinstance(body, dict):
        raise Invalid("body: expected an object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise Invalid("model: Field required")
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        raise Invalid("max_tokens: expected a positive integer")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Invalid("messages: at least one message is required")
    system = body.get("system")
    if system is not None and not isinstance(system, str | list):
        raise Invalid("system: expected a string or a list of text blocks")
    for k, block in enumerate(system if isinstance(system, list) else []):
        if not isinstance(block, dict) or block.get("type") != "text" or not block.get("text"):
            raise Invalid(f"system.{k}: text content blocks must be non-empty")
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise Invalid(f"messages.{k}.role: expected user, assistant or system")
        content = m.get("content")
        if content == "" or content == [] or not isinstance(content, str | list):
            raise Invalid(f"messages.{k}: all messages must have non-empty content")
        for j, block in enumerate(_blocks(content)):
            where = f"messages.{k}.content.{j}"
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise Invalid(f"{where}: expected a content block")
            kind = block["type"]
            if kind == "text" and not (isinstance(block.get("text"), str) and block["text"]):
                raise Invalid(f"{where}: text content blocks must be non-empty")
            if kind in ("thinking", "redacted_thinking") and "cache_control" in block:
                raise Invalid(f"{where}.{kind}.cache_control: Extra inputs are not permitted")
            if m["role"] == "system" and kind != "text":
                raise Invalid(f"{where}: system messages hold text blocks only")
            if kind in ("tool_use", "tool_result", "thinking") and m["role"] != (
                "user" if kind == "tool_result" else "assistant"
            ):
                raise Invalid(f"{where}: {kind} blocks are not allowed in {m['role']} messages")
    merged = _merged(messages)
    if merged[0][0] != "user":
        raise Invalid("messages: first message must use the user role")
    seen: set[str] = set()
    for k, (role, blocks) in enumerate(merged):
        if role != "assistant":
            continue
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        for use in uses:
            if not isinstance(use, str) or use in seen:
                raise Invalid(f"messages: tool_use ids must be unique ({use})")
            seen.add(use)
        answered = (
            [b.get("tool_use_id") for b in merged[k + 1][1] if b["type"] == "tool_result"]
            if k + 1 < len(merged)
            else None
        )
        if answered is not None and set(uses) - set(answered):
            missing = sorted(set(uses) - set(answered))
            raise Invalid(
                f"messages.{k}: tool_use ids were found without tool_result blocks immediately "
                f"after: {', '.join(missing)}"
            )
    for k, (_, blocks) in enumerate(merged):
        results = [b.get("tool_use_id") for b in blocks if b["type"] == "tool_result"]
        if not results:
            continue
        previous = merged[k - 1][1] if k > 0 else []
        offered = {b["id"] for b in previous if b["type"] == "tool_use"}
        stray = [r for r in results if r not in offered]
        if stray or len(set(results)) != len(results):
            raise Invalid(
                f"messages.{k}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{stray or results}. Each `tool_result` block must have a corresponding "
                "`tool_use` block in the previous message."
            )
    for k, m in enumerate(messages):
        for j, block in enumerate(_blocks(m["content"])):
            if block.get("type") == "thinking" and block.get("signature") != sign(
                str(block.get("thinking", ""))
            ):
                raise Invalid(f"messages.{k}.content.{j}: Invalid `signature` in `thinking` block")
    marks = _request_marks(body)
    if len(marks) > MAX_MARKS:
        raise Invalid(f"A maximum of {MAX_MARKS} blocks with cache_control may be provided. "
                      f"Found {len(marks)}.")  # fmt: skip
    ttls = [m.get("ttl") if isinstance(m, dict) else None for m in marks]
    for a, b in itertools.pairwise(ttls):
        if b == "1h" and a != "1h":
            raise Invalid("a ttl='1h' cache_control block must not come after a ttl='5m' "
                          "cache_control block")  # fmt: skip


def _request_marks(body: dict[str, Any]) -> list[Any]:
    marks: list[Any] = []
    for item in body.get("tools") or []:
        marks.extend(_marks(item))
    system = body.get("system")
    for item in system if isinstance(system, list) else []:
        marks.extend(_marks(item))
    for m in body["messages"]:
        for block in _blocks(m["content"]):
            marks.extend(_marks(block))
    if body.get("cache_control") is not None:
        marks.append(body["cache_control"])
    return marks


# -- the prompt cache ----------------------------------------------------------------------------


def _unmarked(block: Any) -> Any:
    """A block as the cache sees it: without its marker (nested ones too)."""
    if not isinstance(block, dict):
        return block
    out = {k: v for k, v in block.items() if k != "cache_control"}
    if isinstance(out.get("content"), list):
        out["content"] = [_unmarked(b) for b in out["content"]]
    return out


@dataclass(slots=True)
class Cut:
    """A request cut into cacheable blocks: per block its prefix hash, cumulative tokens and
    the TTL of its marker (None: no breakpoint there)."""

    hashes: list[bytes] = field(default_factory=list)
    totals: list[int] = field(default_factory=list)
    breakpoints: dict[int, float] = field(default_factory=dict)
    message_of: list[int] = field(default_factory=list)

    def add(self, block: Any, tag: str, message: int, mark: Any) -> None:
        raw = tag.encode() + b"|" + orjson.dumps(_unmarked(block), option=orjson.OPT_SORT_KEYS)
        previous = self.hashes[-1] if self.hashes else b""
        self.hashes.append(hashlib.blake2b(previous + raw, digest_size=16).digest())
        self.totals.append((self.totals[-1] if self.totals else 0) + meter(raw))
        self.message_of.append(message)
        if mark is not None:
            ttl = mark.get("ttl") if isinstance(mark, dict) else None
            self.breakpoints[len(self.hashes) - 1] = TTL_S.get(ttl, TTL_S[None])

    def tokens(self, upto: int) -> int:
        """Tokens of blocks 0..upto (none when upto < 0)."""
        return self.totals[upto] if upto >= 0 else 0


def cut(body: dict[str, Any]) -> Cut:
    """The request's blocks in the provider's order: tools, system, messages."""
    c = Cut()
    for tool in body.get("tools") or []:
        c.add(tool, "tool", -1, tool.get("cache_control") if isinstance(tool, dict) else None)
    system = body.get("system")
    for block in _blocks(system) if system is not None else []:
        c.add(block, "system", -1, block.get("cache_control"))
    for k, m in enumerate(body["messages"]):
        for j, block in enumerate(_blocks(m["content"])):
            marks = _marks(block)
            c.add(block, f"{m['role']}:{int(j == 0)}", k, marks[-1] if marks else None)
    if body.get("cache_control") is not None and c.hashes:
        c.breakpoints[len(c.hashes) - 1] = TTL_S.get(body["cache_control"].get("ttl"), 300.0)
    return c


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int
    cache_read: int
    cache_creation: int
    read_through: int
    """The last block read from the cache (-1: none)."""


class PromptCache:
    """Prefix entries by (model, prefix hash), each with its expiry."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.entries: dict[tuple[str, bytes], tuple[float, float]] = {}
        self.clock = clock

    def bill(self, model: str, c: Cut) -> Usage:
        now = self.clock()
        read = -1
        for point in c.breakpoints:
            for at in range(point, max(point - LOOKBACK, 0) - 1, -1):
                entry = self.entries.get((model, c.hashes[at]))
                if entry is not None and entry[0] > now:
                    read = max(read, at)
                    break
        if read >= 0:
            ttl = self.entries[(model, c.hashes[read])][1]
            self.entries[(model, c.hashes[read])] = (now + ttl, ttl)
        written = read
        for point, ttl in c.breakpoints.items():
            if c.tokens(point) >= MIN_CACHEABLE:
                self.entries[(model, c.hashes[point])] = (now + ttl, ttl)
                written = max(written, point)
        total = c.tokens(len(c.hashes) - 1)
        cached = c.tokens(read)
        creation = c.tokens(written) - cached
        return Usage(total - cached - creation, cached, creation, read)


# -- the endpoint --------------------------------------------------------------------------------


@dataclass(slots=True)
class Script:
    root: str = ""
    steps: int = 0
    fact_token: str = ""
    fenced: str = ""
    fenced_step: int = -1
    writes: int = 0
    thinking: bool = False
    parallel: int = 0


SCRIPT = Script()
CACHE = PromptCache()
RECORDS: list[dict[str, Any]] = []
_KEEP_BODY = 200_000
"""A rejected request's record keeps this much of its body, to say why."""
_LAST_MAIN: list[bytes] = []
LAST_BODY: list[bytes] = []
"""The last main request's body, as received (`GET /_last`)."""


def _error(status: int, kind: str, message: str) -> Response:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return json_response(body, status, {"request-id": "req_scripted_error"})


def _is_main(body: dict[str, Any]) -> bool:
    tools = body.get("tools") or []
    return any(isinstance(t, dict) and t.get("name") == MAIN_TOOL for t in tools)


def _results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        b
        for m in body["messages"]
        if m["role"] == "user"
        for b in _blocks(m["content"])
        if b.get("type") == "tool_result"
    ]


def _text_of(result: dict[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(b.get("text", "") for b in parts if isinstance(b, dict))


def _answer_main(body: dict[str, Any], record: dict[str, Any]) -> list[dict[str, Any]]:
    results = _results(body)
    step = len(results)
    record["step"] = step
    if results and SCRIPT.fact_token:
        line = fact_line(SCRIPT.fact_token)
        record["fact_kept"] = any(line in _text_of(r) for r in results)
    record["briefed_writes"] = sum(
        1
        for m in body["messages"]
        if m["role"] == "assistant"
        for b in _blocks(m["content"])
        if b.get("type") == "tool_use"
        and b.get("name") == "Write"
        and "…[factrail omitted" in str(b.get("input", {}).get("content", ""))
    )
    last = min(SCRIPT.steps, MAX_STEPS)
    if step < last:
        both = SCRIPT.parallel and step % SCRIPT.parallel == 1 and step + 1 < last - 1
        uses = []
        for k in (step, step + 1) if both else (step,):
            name, args = tool_call(k, SCRIPT.steps, SCRIPT.root, SCRIPT.fact_token, SCRIPT.writes)
            if SCRIPT.fenced and k == SCRIPT.fenced_step:
                name, args = SCRIPT.fenced, {"query": "release key rotation"}
            uses.append({"type": "tool_use", "id": f"toolu_scripted_{k:03d}", "name": name,
                         "input": args})  # fmt: skip
        return [{"type": "text", "text": f"Step {step + 1}."}, *uses]
    lines = (ln for r in results for ln in _text_of(r).splitlines())
    found = next((ln for ln in lines if FACT_PREFIX in ln), None)
    if found is None and step == min(SCRIPT.steps, MAX_STEPS) and results:
        # Not in sight: do what the note in its place says, as an agent would (re-run the read
        # or fetch the saved output), once, then answer from what it brings back.
        record["recovering"] = True
        name, args = tool_call(0, SCRIPT.steps, SCRIPT.root, SCRIPT.fact_token)
        use = {"type": "tool_use", "id": f"toolu_scripted_{step:03d}", "name": name, "input": args}
        return [{"type": "text", "text": "Reading the notes again."}, use]
    token = found.split(FACT_PREFIX, 1)[1].split()[0] if found else None
    record["answered_fact"] = token
    text = f"The release signing key fingerprint is {token}." if token else "The fact is gone."
    return [{"type": "text", "text": text}]


def _message_json(m: Any) -> bytes:
    return orjson.dumps(_unmarked_message(m), option=orjson.OPT_SORT_KEYS)


def _unmarked_message(m: dict[str, Any]) -> dict[str, Any]:
    return {**m, "content": [_unmarked(b) for b in _blocks(m["content"])]}


def first_diff(previous: list[bytes], current: list[bytes]) -> int | None:
    """The first entry (message, input item) of the previous main request this one does not
    repeat (None: it extends it)."""
    for k, raw in enumerate(previous):
        if k >= len(current) or current[k] != raw:
            return k
    return None


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


async def _stream(message: dict[str, Any]) -> AsyncIterator[bytes]:
    content, usage = message["content"], message["usage"]
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**usage, "output_tokens": 1}}  # fmt: skip
    yield _event("message_start", {"type": "message_start", "message": start})
    yield _event("ping", {"type": "ping"})
    for k, block in enumerate(content):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            half = len(block["text"]) // 2
            parts = (block["text"][:half], block["text"][half:])
            deltas = [{"type": "text_delta", "text": t} for t in parts]
        elif block["type"] == "thinking":
            opened = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": block["thinking"]},
                      {"type": "signature_delta", "signature": block["signature"]}]  # fmt: skip
        else:
            opened = {**block, "input": {}}
            raw = orjson.dumps(block["input"]).decode()
            deltas = [{"type": "input_json_delta", "partial_json": raw[:10]},
                      {"type": "input_json_delta", "partial_json": raw[10:]}]  # fmt: skip
        yield _event("content_block_start", {"type": "content_block_start", "index": k,
                                             "content_block": opened})  # fmt: skip
        for delta in deltas:
            yield _event("content_block_delta", {"type": "content_block_delta", "index": k,
                                                 "delta": delta})  # fmt: skip
        yield _event("content_block_stop", {"type": "content_block_stop", "index": k})
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    final = {"output_tokens": usage["output_tokens"]}
    yield _event("message_delta", {"type": "message_delta", "delta": delta, "usage": final})
    yield _event("message_stop", {"type": "message_stop"})


async def messages(request: Request) -> Response:
    raw = await request.body()
    record: dict[str, Any] = {"n": len(RECORDS), "path": request.url.path}
    RECORDS.append(record)
    try:
        body = orjson.loads(raw)
        validate(body)
    except (orjson.JSONDecodeError, Invalid) as e:
        record.update(status=400, error=str(e), body=raw[:_KEEP_BODY].decode(errors="replace"))
        return _error(400, "invalid_request_error", str(e))
    model = body["model"]
    main = _is_main(body) and SCRIPT.steps > 0
    record.update(status=200, model=model, kind="main" if main else "side",
                  stream=bool(body.get("stream")), messages=len(body["messages"]),
                  max_tokens=body["max_tokens"])  # fmt: skip
    c = cut(body)
    if request.url.path.endswith("/count_tokens"):
        record["kind"] = "count_tokens"
        return json_response({"input_tokens": c.tokens(len(c.hashes) - 1)})
    usage = CACHE.bill(model, c)
    content = (
        _answer_main(body, record) if main else [{"type": "text", "text": "Bill test session"}]
    )
    if main and SCRIPT.thinking:
        content = [thinking_block(record.get("step", 0)), *content]
        record["thinking_sent"] = sum(
            1
            for m in body["messages"]
            for b in _blocks(m["content"])
            if b.get("type") == "thinking"
        )
    if main:
        current = [_message_json(m) for m in body["messages"]]
        record["first_diff"] = first_diff(_LAST_MAIN, current) if _LAST_MAIN else None
        record["previous_messages"] = len(_LAST_MAIN)
        _LAST_MAIN[:] = current
        LAST_BODY[:] = [raw]
        record["marks"] = sorted({c.message_of[p] for p in c.breakpoints})
        record["read_message"] = c.message_of[usage.read_through] if usage.read_through >= 0 \
            else None  # fmt: skip
    output = sum(meter(orjson.dumps(b)) for b in content)
    record.update(input_tokens=usage.input_tokens, cache_read=usage.cache_read,
                  cache_creation=usage.cache_creation, output_tokens=output)  # fmt: skip
    tool = any(b["type"] == "tool_use" for b in content)
    message = {
        "id": f"msg_scripted_{record['n']:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if tool else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.input_tokens,
            "cache_creation_input_tokens": usage.cache_creation,
            "cache_read_input_tokens": usage.cache_read,
            "output_tokens": output,
        },
    }
    headers = {"request-id": f"req_scripted_{record['n']:04d}"}
    if body.get("stream"):
        return StreamingResponse(_stream(message), media_type="text/event-stream", headers=headers)
    return json_response(message, headers=headers)


async def configure(request: Request) -> Response:
    """Set the script (`root`, `steps`, `fact_token`; `fenced`, `fenced_step`, `writes`,
    `thinking`, `parallel`) and forget everything before it."""
    data = orjson.loads(await request.body())
    SCRIPT.root, SCRIPT.steps = str(data["root"]), int(data["steps"])
    SCRIPT.fact_token = str(data["fact_token"])
    SCRIPT.fenced = str(data.get("fenced", ""))
    SCRIPT.fenced_step = int(data.get("fenced_step", -1))
    SCRIPT.writes = int(data.get("writes", 0))
    SCRIPT.thinking = bool(data.get("thinking", False))
    SCRIPT.parallel = int(data.get("parallel", 0))
    RECORDS.clear()
    _forget()
    return json_response({})


async def last(request: Request) -> Response:
    return Response(LAST_BODY[0] if LAST_BODY else b"{}", media_type="application/json")


def _forget() -> None:
    """Forget the cache and the last main request (`/_reset` forgets the records too)."""
    CACHE.entries.clear()
    _LAST_MAIN.clear()
    LAST_BODY.clear()


async def other(request: Request) -> Response:
    RECORDS.append({"n": len(RECORDS), "path": request.url.path, "status": 404, "kind": "other"})
    return _error(404, "not_found_error", f"{request.method} {request.url.path}")


app = Starlette(
    routes=[
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", messages, methods=["POST"]),
        Route("/_configure", configure, methods=["POST"]),
        Route("/_last", last),
        *record_routes(RECORDS, _forget),
        Route("/{path:path}", other, methods=["GET", "POST", "PUT", "DELETE", "HEAD"]),
    ]
)
