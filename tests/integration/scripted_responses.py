"""A scripted OpenAI Responses endpoint that validates requests and bills like OpenAI's cache.

For `tests/integration/test_codex_bill.py` and `bench/codex_bill.py`: a real client (the Codex
CLI, `wire_api = "responses"`) runs a deterministic tool loop against it, direct or through
factrail. The twin of `scripted_anthropic.py` for the other wire format and the other cache.

- **Validation**, as the API would (`validate`): a model, an `input` list of known item types,
  string `arguments` on every `function_call`, every `function_call_output` answering an earlier
  `function_call` and every `function_call` answered, call ids unique. A bad request gets a 400
  in OpenAI's error shape and is counted (`rejected`).
- **The prompt cache** (`PrefixCache`), as OpenAI's automatic one: per model and
  `prompt_cache_key`, a request reads the longest prefix of `instructions`, tools and input
  items (whole items, serialised) that an earlier request held, counted only from
  `MIN_CACHED` tokens and in steps of `CACHE_STEP`; every prefix of a request is cached for
  `TTL_S` from its last use. Usage: `input_tokens`, `input_tokens_details.cached_tokens`,
  `output_tokens`, streamed (SSE, in `response.completed`) or not. Tokens: an item's JSON in
  chars / 4, rounded up (`scripted_anthropic.meter`).
- **The cache of GPT-5.6 and later** (`BreakpointCache`, models named in `WRITE_BILLED`), as
  OpenAI documents it: a request writes its prefix at its breakpoints (the implicit one at the
  end of its input unless `prompt_cache_options.mode` is `explicit`, and every content part
  marked `prompt_cache_breakpoint`; only the latest `MAX_WRITES` of them), and reads the
  longest prefix that ends exactly at one of the latest `MATCH_BREAKPOINTS` breakpoints written
  under its model and `prompt_cache_key`, from `MIN_CACHED` tokens on, for `WRITE_BILLED_TTL_S`
  after it was written. Usage adds `input_tokens_details.cache_write_tokens` (billed at 1.25×
  input).
- **The script** (`POST /_configure` with `root`, `steps`, `fact_token`): the main session (a
  request with an `exec_command` tool) is answered step by step, by how many tool outputs it
  holds: step 0 reads the notes file holding the planted fact, later steps `cat` the generated
  build logs and modules (`scripted_anthropic.write_project`), the last one greps for the fact's
  token; after `steps` calls the answer quotes the fact as found in any tool output of the
  request it was sent, or, when it is out of sight (its read became a re-run note), the agent
  re-runs the read once, as the note says, and answers from that; with `reasoning`, every
  answer starts with an opaque reasoning item (`encrypted_content`), which must come back
  right before the call or answer it produced (`validate`); with `parallel` (N), every Nth
  step from the first asks for two calls at once. A request whose tools come as an
  `additional_tools` input item with a custom `exec` tool (Codex on GPT-6: "code mode") is
  answered in kind: each call is a `custom_tool_call` of `exec` whose JavaScript runs the
  step's command through `tools.exec_command`. A request that declares OpenAI's hosted `shell`
  tool (`{"type": "shell"}`, as the Agents SDK's `ShellTool` does) is answered with
  `shell_call` items, whose `shell_call_output` (a stdout / stderr / outcome chunk per
  command) the client sends back. Other requests get a short text answer. Call ids are fresh
  for each scripted session, as the API's are.

`GET /_records`: one record per request, without its body (usage, kind, step, the first input
item that differs from the previous main request, whether the planted line was in any tool
output, whether the agent re-ran the read). `POST /_reset` forgets records and cache. Run:
`uvicorn tests.integration.scripted_responses:app`.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.integration.fakes import json_response, record_routes
from tests.integration.scripted_anthropic import (
    FACT_PREFIX,
    MAX_STEPS,
    fact_line,
    first_diff,
    meter,
)

MIN_CACHED = 1024
"""OpenAI caches prompts from 1,024 tokens on."""
CACHE_STEP = 128
"""Past the first 1,024 tokens, cache hits grow in steps of 128 tokens."""
TTL_S = 600.0
"""A cached prefix lives five to ten minutes after its last use; the longer end here."""
MAIN_TOOL = "exec_command"
CODE_TOOL = "exec"
"""Code mode's one tool: JavaScript that calls the others (`tools.exec_command(...)`)."""
SHELL_TOOL = "shell"
"""The type of OpenAI's hosted shell tool definition, whose calls the client runs."""
CALL_TYPES = ("function_call", "custom_tool_call", "shell_call")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output", "shell_call_output")
ITEM_TYPES = ("message", *CALL_TYPES, *OUTPUT_TYPES, "reasoning", "additional_tools")
WRITE_BILLED = ("gpt-5.6", "gpt-6")
"""Model families whose cache is written at breakpoints and billed for its writes."""
WRITE_BILLED_TTL_S = 1800.0
MAX_WRITES = 4
"""A request writes at most this many breakpoints."""
BREAKPOINT = "prompt_cache_breakpoint"
TEXT_PARTS = ("input_text", "text")
MATCH_BREAKPOINTS = 80
"""A request's read looks back over this many of the latest breakpoints written."""


# -- the script --------------------------------------------------------------------------------


def command(step: int, steps: int, token: str) -> str:
    """The shell command of `step` (0 < `steps`)."""
    if step == 0:
        return "cat notes/release.md"
    if step == steps - 1:
        return f"grep -c {token} notes/release.md logs/*.log || true"
    i = (step + 1) // 2
    return f"cat logs/build_{i}.log" if step % 2 else f"cat src/module_{i}.py"


# -- request structure ---------------------------------------------------------------------------


class Invalid(Exception):
    """The request would be a 400 `invalid_request_error` at the provider."""


def _items(body: dict[str, Any]) -> list[Any]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    return raw if isinstance(raw, list) else []


def _kind(item: Any) -> str:
    """An input item's type (a bare `{"role", "content"}` is a message)."""
    if not isinstance(item, dict):
        return ""
    kind = item.get("type")
    return kind if isinstance(kind, str) else ("message" if "role" in item else "")


def validate(body: Any) -> None:
    """Raise `Invalid` where the API would answer 400."""
    if not isinstance(body, dict):
        raise Invalid("body: expected an object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise Invalid("Missing required parameter: 'model'.")
    raw = body.get("input")
    if not isinstance(raw, str | list):
        raise Invalid("Invalid type for 'input': expected a string or an array of items.")
    called: set[str] = set()
    answered: set[str] = set()
    for k, item in enumerate(_items(body)):
        kind = _kind(item)
        where = f"input[{k}]"
        if kind not in ITEM_TYPES:
            raise Invalid(f"Invalid value for '{where}.type': {kind!r}.")
        if kind == "message":
            content = item.get("content")
            if not isinstance(content, str | list) or item.get("role") not in (
                "user", "assistant", "system", "developer"
            ):  # fmt: skip
                raise Invalid(f"Invalid '{where}': a message needs a role and content.")
        if kind in CALL_TYPES or kind in OUTPUT_TYPES:
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise Invalid(f"Missing required parameter: '{where}.call_id'.")
            if kind in CALL_TYPES:
                if kind == "shell_call":
                    _validate_shell_call(item, where)
                else:
                    field_name = "arguments" if kind == "function_call" else "input"
                    if not isinstance(item.get(field_name), str):
                        raise Invalid(
                            f"Invalid type for '{where}.{field_name}': expected a string."
                        )
                if call_id in called:
                    raise Invalid(f"Duplicate tool call id {call_id!r}.")
                called.add(call_id)
            else:
                if call_id not in called:
                    raise Invalid(
                        f"No tool call found for function call output with call_id {call_id}."
                    )
                if kind == "shell_call_output":
                    _validate_shell_output(item, where)
                elif not isinstance(item.get("output"), str | list):
                    raise Invalid(f"Invalid type for '{where}.output'.")
                answered.add(call_id)
        if kind == "additional_tools" and not isinstance(item.get("tools"), list):
            raise Invalid(f"Invalid type for '{where}.tools': expected an array.")
    marked = sum(_marked(i) for i in _items(body))
    if marked and not write_billed(body["model"]):
        raise Invalid(f"Unknown parameter: '{BREAKPOINT}' (model {body['model']}).")
    for k, item in enumerate(_items(body)):
        for p in _parts(item):
            mark = p.get(BREAKPOINT) if isinstance(p, dict) else None
            if mark is not None and (
                p.get("type") not in TEXT_PARTS
                or not isinstance(mark, dict)
                or mark.get("mode") != "explicit"
                or not set(mark) <= {"mode", "ttl"}
            ):
                raise Invalid(f"Invalid '{BREAKPOINT}' in input[{k}].")
    missing = sorted(called - answered)
    if missing:
        raise Invalid(f"No tool output found for function call {missing[0]}.")
    items = _items(body)
    for k, item in enumerate(items):
        if _kind(item) == "reasoning":
            following = items[k + 1] if k + 1 < len(items) else None
            if not _produced_with(following):
                raise Invalid(
                    f"Item '{item.get('id')}' of type 'reasoning' was provided without its "
                    "required following item."
                )


def _validate_shell_call(item: dict[str, Any], where: str) -> None:
    action = item.get("action")
    commands = action.get("commands") if isinstance(action, dict) else None
    if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands):
        raise Invalid(f"Invalid type for '{where}.action.commands': expected an array of strings.")


def _validate_shell_output(item: dict[str, Any], where: str) -> None:
    """A `shell_call_output`'s `output`: chunks of string `stdout` and `stderr` and an
    `outcome` (`exit` with an integer code, or `timeout`)."""
    chunks = item.get("output")
    if not isinstance(chunks, list):
        raise Invalid(f"Invalid type for '{where}.output': expected an array.")
    for j, chunk in enumerate(chunks):
        at = f"{where}.output[{j}]"
        if not isinstance(chunk, dict):
            raise Invalid(f"Invalid type for '{at}': expected an object.")
        for stream in ("stdout", "stderr"):
            if not isinstance(chunk.get(stream), str):
                raise Invalid(f"Missing required parameter: '{at}.{stream}'.")
        outcome = chunk.get("outcome")
        exited = isinstance(outcome, dict) and outcome.get("type") == "exit"
        if (
            not isinstance(outcome, dict)
            or outcome.get("type") not in ("exit", "timeout")
            or (exited and not isinstance(outcome.get("exit_code"), int))
        ):
            raise Invalid(f"Invalid value for '{at}.outcome'.")


def _produced_with(item: Any) -> bool:
    """Whether `item` can follow a reasoning item: the call or answer that reasoning produced."""
    kind = _kind(item)
    return kind in CALL_TYPES or (kind == "message" and item.get("role") == "assistant")


# -- the prompt cache ----------------------------------------------------------------------------


def blocks(body: dict[str, Any]) -> list[bytes]:
    """The request as the cache sees it, in order: instructions, tools, input items (as the
    model sees them: `rendered`)."""
    out = []
    if body.get("instructions"):
        out.append(b"instructions|" + orjson.dumps(body["instructions"]))
    tools = body.get("tools") or []
    out.extend(b"tool|" + orjson.dumps(t, option=orjson.OPT_SORT_KEYS) for t in tools)
    out.extend(
        b"item|" + orjson.dumps(rendered(i), option=orjson.OPT_SORT_KEYS) for i in _items(body)
    )
    return out


def _parts(item: Any) -> list[Any]:
    """An item's content blocks (a message's `content`, a tool output's `output`) when a list."""
    if not isinstance(item, dict):
        return []
    value = item.get("output" if _kind(item) in OUTPUT_TYPES else "content")
    return value if isinstance(value, list) else []


def rendered(item: Any) -> Any:
    """An input item as the model reads it: a breakpoint is no part of the prompt, and a list
    of one text block reads as its text."""
    if not isinstance(item, dict):
        return item
    key = "output" if _kind(item) in OUTPUT_TYPES else "content"
    if not _parts(item):
        return item
    parts = [
        {k: v for k, v in p.items() if k != BREAKPOINT} if isinstance(p, dict) else p
        for p in item[key]
    ]
    single = len(parts) == 1 and isinstance(parts[0], dict)
    if single and parts[0].get("type") in TEXT_PARTS and set(parts[0]) == {"type", "text"}:
        return {**item, key: parts[0]["text"]}
    return {**item, key: parts}


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int
    cached_tokens: int
    cache_write_tokens: int = 0


class PrefixCache:
    """Cached prefixes by (model, cache key, prefix hash), each with its expiry."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.entries: dict[tuple[str, str, bytes], float] = {}
        self.clock = clock

    def bill(self, model: str, key: str, raw: list[bytes]) -> Usage:
        now = self.clock()
        total = hit = 0
        prefix = b""
        for block in raw:
            prefix = hashlib.blake2b(prefix + block, digest_size=16).digest()
            total += meter(block)
            entry = (model, key, prefix)
            if self.entries.get(entry, 0.0) > now:
                hit = total  # every prefix of a cached prefix is cached too
            self.entries[entry] = now + TTL_S
        cached = 0 if hit < MIN_CACHED else hit - (hit - MIN_CACHED) % CACHE_STEP
        return Usage(total, cached)


def _explicit(body: dict[str, Any]) -> bool:
    options = body.get("prompt_cache_options")
    return isinstance(options, dict) and options.get("mode") == "explicit"


def _marked(item: Any) -> int:
    return sum(1 for p in _parts(item) if isinstance(p, dict) and BREAKPOINT in p)


def breakpoints(body: dict[str, Any]) -> list[int]:
    """Where a request asks its prefix to be written, as counts of `blocks`: after every input
    item holding a block marked `prompt_cache_breakpoint`, and at the end of the input unless
    `prompt_cache_options.mode` is `explicit`."""
    items = _items(body)
    head = len(blocks(body)) - len(items)
    marks = [head + k + 1 for k, item in enumerate(items) if _marked(item)]
    if not _explicit(body):
        marks.append(head + len(items))
    return sorted(set(marks))


class BreakpointCache:
    """GPT-5.6's cache: prefixes written at breakpoints, read only where one ends."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.entries: dict[tuple[str, str], list[tuple[bytes, float]]] = {}
        self.clock = clock

    def bill(self, model: str, key: str, raw: list[bytes], marks: list[int]) -> Usage:
        now = self.clock()
        hashes: list[bytes] = []
        tokens = [0]
        prefix = b""
        for block in raw:
            prefix = hashlib.blake2b(prefix + block, digest_size=16).digest()
            hashes.append(prefix)
            tokens.append(tokens[-1] + meter(block))
        written = self.entries.setdefault((model, key), [])
        live = {h for h, expiry in written[-MATCH_BREAKPOINTS:] if expiry > now}
        cached = max((tokens[j + 1] for j, h in enumerate(hashes) if h in live), default=0)
        cached = cached if cached >= MIN_CACHED else 0
        writes = [j for j in marks[-MAX_WRITES:] if 0 < j <= len(raw) and tokens[j] >= MIN_CACHED]
        for j in writes:
            written.append((hashes[j - 1], now + WRITE_BILLED_TTL_S))
        del written[: -MATCH_BREAKPOINTS * 4]
        write = max((tokens[j] for j in writes), default=0) - cached
        return Usage(tokens[-1], cached, max(write, 0))


def write_billed(model: str) -> bool:
    return model.rsplit("/", 1)[-1].startswith(WRITE_BILLED)


# -- the endpoint --------------------------------------------------------------------------------


@dataclass(slots=True)
class Script:
    root: str = ""
    steps: int = 0
    fact_token: str = ""
    reasoning: bool = False
    parallel: int = 0
    run: str = "scripted"
    """In every call id: fresh for each scripted session, as the API's ids are, so that two runs
    that factrail cannot tell apart (same head, no session id) never share a call id."""


SCRIPT = Script()
CACHE = PrefixCache()
BREAKPOINTS = BreakpointCache()
RECORDS: list[dict[str, Any]] = []
_KEEP_BODY = 200_000
"""A rejected request's record keeps this much of its body, to say why."""
_LAST_MAIN: list[bytes] = []


def _error(status: int, message: str) -> Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None,
                      "code": None}}  # fmt: skip
    return json_response(body, status, {"x-request-id": "req_scripted_error"})


def _tool_names(tools: Any) -> set[str]:
    """The names of `tools`, those inside namespaces included."""
    names: set[str] = set()
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict):
            names.add(str(tool.get("name", "")))
            names |= _tool_names(tool.get("tools"))
    return names


def _code_mode(body: dict[str, Any]) -> bool:
    """Whether the client's tools come as an input item with code mode's `exec` (Codex on
    GPT-6), so calls are JavaScript that calls the tools."""
    return any(
        _kind(i) == "additional_tools" and CODE_TOOL in _tool_names(i.get("tools"))
        for i in _items(body)
    )


def _shell_mode(body: dict[str, Any]) -> bool:
    """Whether the client declared the hosted shell tool, whose calls it runs itself."""
    tools = body.get("tools")
    return any(isinstance(t, dict) and t.get("type") == SHELL_TOOL for t in tools or [])


def _is_main(body: dict[str, Any]) -> bool:
    return MAIN_TOOL in _tool_names(body.get("tools")) or _code_mode(body) or _shell_mode(body)


def _output_text(item: dict[str, Any]) -> str:
    output = item.get("output")
    if isinstance(output, str):
        return output
    parts = output if isinstance(output, list) else []
    if _kind(item) == "shell_call_output":
        streams = (p.get(k, "") for p in parts if isinstance(p, dict) for k in ("stdout", "stderr"))
        return "\n".join(s for s in streams if s)
    return "\n".join(p.get("text", "") for p in parts if isinstance(p, dict))


def _call(step: int, cmd: str, mode: str = "") -> dict[str, Any]:
    """The call that runs `cmd`: `exec_command`, in code mode JavaScript calling it, or a
    hosted shell's call."""
    if mode == "shell":
        return {"type": "shell_call", "id": f"sh_scripted_{step:03d}", "status": "completed",
                "call_id": f"call_{SCRIPT.run}_{step:03d}",
                "action": {"commands": [cmd], "timeout_ms": 10000}}  # fmt: skip
    if mode == "code":
        source = (f"const r = await tools.exec_command({{cmd: {orjson.dumps(cmd).decode()}}});\n"
                  "text(r.output);")  # fmt: skip
        return {"type": "custom_tool_call", "id": f"ctc_scripted_{step:03d}",
                "status": "completed", "call_id": f"call_{SCRIPT.run}_{step:03d}",
                "name": CODE_TOOL, "input": source}  # fmt: skip
    return {"type": "function_call", "id": f"fc_scripted_{step:03d}", "status": "completed",
            "call_id": f"call_{SCRIPT.run}_{step:03d}", "name": MAIN_TOOL,
            "arguments": orjson.dumps({"cmd": cmd, "yield_time_ms": 10000}).decode()}  # fmt: skip


def _text(text: str, n: int) -> dict[str, Any]:
    return {"type": "message", "id": f"msg_scripted_{n:04d}", "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip


def _reasoning(n: int) -> dict[str, Any]:
    """An opaque reasoning item, as a reasoning model returns with `reasoning.encrypted_content`
    included: the client sends it back, and it must stay right before the item it produced."""
    sealed = hashlib.sha256(f"reasoning {n}".encode()).hexdigest() * 8
    return {"type": "reasoning", "id": f"rs_scripted_{n:04d}", "summary": [],
            "encrypted_content": "gAAAAA" + sealed}  # fmt: skip


def _answered_in_order(items: list[Any]) -> bool:
    """Whether the outputs of each run of calls follow the run, in the calls' order (how the
    client sends parallel calls back)."""
    calls: list[str] = []
    pending: list[str] = []
    for item in items:
        kind = _kind(item)
        if kind in CALL_TYPES:
            if not pending:
                calls = []
            calls.append(item["call_id"])
            pending = list(calls)
        elif kind in OUTPUT_TYPES and (not pending or item["call_id"] != pending.pop(0)):
            return False
    return True


def _answer_main(body: dict[str, Any], record: dict[str, Any]) -> list[dict[str, Any]]:
    outputs = [i for i in _items(body) if _kind(i) in OUTPUT_TYPES]
    mode = "code" if _code_mode(body) else "shell" if _shell_mode(body) else ""
    step = len(outputs)
    record["step"] = step
    sent = [i for i in _items(body) if _kind(i) == "reasoning"]
    record["reasoning_sent"] = len(sent)
    record["reasoning_altered"] = sum(
        1
        for i in sent
        if i.get("encrypted_content") != _reasoning(int(i["id"][-4:]))["encrypted_content"]
    )
    if outputs and SCRIPT.fact_token:
        line = fact_line(SCRIPT.fact_token)
        record["fact_kept"] = any(line in _output_text(o) for o in outputs)
    record["outputs_in_order"] = _answered_in_order(_items(body))
    last = min(SCRIPT.steps, MAX_STEPS)
    if step < last:
        calls = [_call(step, command(step, SCRIPT.steps, SCRIPT.fact_token), mode)]
        if SCRIPT.parallel and step % SCRIPT.parallel == 1 and step + 1 < last - 1:
            # Two calls at once: their outputs come back together, after both calls.
            calls.append(_call(step + 1, command(step + 1, SCRIPT.steps, SCRIPT.fact_token), mode))
        return calls
    lines = (ln for o in outputs for ln in _output_text(o).splitlines())
    found = next((ln for ln in lines if FACT_PREFIX in ln), None)
    if found is None and step == min(SCRIPT.steps, MAX_STEPS) and outputs:
        # Not in sight: do what the note in its place says, as an agent would, once.
        record["recovering"] = True
        return [_call(step, command(0, SCRIPT.steps, SCRIPT.fact_token), mode)]
    token = found.split(FACT_PREFIX, 1)[1].split()[0] if found else None
    record["answered_fact"] = token
    text = f"The release signing key fingerprint is {token}." if token else "The fact is gone."
    return [_text(text, record["n"])]


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **data}) + b"\n\n"


async def _stream(response: dict[str, Any]) -> AsyncIterator[bytes]:
    yield _event("response.created", {"response": {**response, "status": "in_progress",
                                                   "output": [], "usage": None}})  # fmt: skip
    for k, item in enumerate(response["output"]):
        yield _event("response.output_item.added", {"output_index": k, "item": item})
        if item["type"] == "message":
            delta = {"output_index": k, "content_index": 0, "item_id": item["id"],
                     "delta": item["content"][0]["text"]}  # fmt: skip
            yield _event("response.output_text.delta", delta)
        yield _event("response.output_item.done", {"output_index": k, "item": item})
    yield _event("response.completed", {"response": response})


async def responses(request: Request) -> Response:
    raw = await request.body()
    record: dict[str, Any] = {"n": len(RECORDS), "path": request.url.path}
    RECORDS.append(record)
    try:
        body = orjson.loads(raw)
        validate(body)
    except (orjson.JSONDecodeError, Invalid) as e:
        record.update(status=400, error=str(e), body=raw[:_KEEP_BODY].decode(errors="replace"))
        return _error(400, str(e))
    model = body["model"]
    main = _is_main(body) and SCRIPT.steps > 0
    key = str(body.get("prompt_cache_key") or "")
    record["marked"] = [k for k, i in enumerate(_items(body)) if _marked(i)]
    record.update(status=200, model=model, kind="main" if main else "side",
                  stream=bool(body.get("stream")), items=len(_items(body)),
                  prompt_cache_key=key)  # fmt: skip
    cut = blocks(body)
    if write_billed(model):
        usage = BREAKPOINTS.bill(model, key, cut, breakpoints(body))
    else:
        usage = CACHE.bill(model, key, cut)
    output = _answer_main(body, record) if main else [_text("Bill test session", record["n"])]
    if main and SCRIPT.reasoning:
        output = [_reasoning(record["n"]), *output]
    if main:
        current = [b for b in cut if b.startswith(b"item|")]
        record["first_diff"] = first_diff(_LAST_MAIN, current) if _LAST_MAIN else None
        record["previous_items"] = len(_LAST_MAIN)
        _LAST_MAIN[:] = current
    out_tokens = sum(meter(orjson.dumps(i)) for i in output)
    uncached = usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens
    record.update(input_tokens=uncached, cache_read=usage.cached_tokens,
                  cache_creation=usage.cache_write_tokens, output_tokens=out_tokens)  # fmt: skip
    details = {"cached_tokens": usage.cached_tokens}
    if write_billed(model):
        details["cache_write_tokens"] = usage.cache_write_tokens
    response = {
        "id": f"resp_scripted_{record['n']:04d}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": output,
        "usage": {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": details,
            "output_tokens": out_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.input_tokens + out_tokens,
        },
    }
    headers = {"x-request-id": f"req_scripted_{record['n']:04d}"}
    if body.get("stream"):
        return StreamingResponse(_stream(response), media_type="text/event-stream", headers=headers)
    return json_response(response, headers=headers)


async def configure(request: Request) -> Response:
    """Set the script (`root`, `steps`, `fact_token`; `reasoning`, `parallel`) and forget
    everything before it."""
    data = orjson.loads(await request.body())
    SCRIPT.root, SCRIPT.steps = str(data["root"]), int(data["steps"])
    SCRIPT.fact_token = str(data["fact_token"])
    SCRIPT.reasoning = bool(data.get("reasoning", False))
    SCRIPT.parallel = int(data.get("parallel", 0))
    SCRIPT.run = secrets.token_hex(4)  # as long as "scripted": the same token counts
    RECORDS.clear()
    _forget()
    return json_response({})


def _forget() -> None:
    """Forget the cache and the last main request (`/_reset` forgets the records too)."""
    CACHE.entries.clear()
    BREAKPOINTS.entries.clear()
    _LAST_MAIN.clear()


async def other(request: Request) -> Response:
    RECORDS.append({"n": len(RECORDS), "path": request.url.path, "status": 404, "kind": "other"})
    return _error(404, f"{request.method} {request.url.path}")


app = Starlette(
    routes=[
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/_configure", configure, methods=["POST"]),
        *record_routes(RECORDS, _forget),
        Route("/{path:path}", other, methods=["GET", "POST", "PUT", "DELETE", "HEAD"]),
    ]
)
