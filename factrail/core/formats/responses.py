"""The `input` of an OpenAI Responses API request.

- a plain string is one user message;
- `message` items (also "easy" items with a `role` and no `type`): `user` / `assistant` turns,
  `system` / `developer` text to `system_texts`;
- `function_call` (`arguments` JSON string) and `custom_tool_call` (raw `input` string, seen by the
  engine as `{"input": s}`) join the assistant message just before them, and so do the calls of
  the tools a client runs for a hosted tool definition: `local_shell_call` (tool `local_shell`,
  its `action` as input), `shell_call` (tool `shell`, its `action`: `commands`) and
  `apply_patch_call` (tool `apply_patch`, its `operation`: `path`, `diff`);
- their outputs (`function_call_output` / `custom_tool_call_output`: an `output` string or
  parts; `local_shell_call_output` and `apply_patch_call_output`: an `output` string;
  `shell_call_output`: one `stdout` / `stderr` chunk per command) are results: a run of them is
  one engine user message. A reduced shell output keeps its chunks and their outcomes, with the
  text in the first chunk's `stdout`;
- a `local_shell_call_output`'s `output` is documented as a JSON string, e.g.
  `{"output": "…", "metadata": {"exit_code": 0, "duration_seconds": 0.1}}`. When it holds an
  object with string text fields (`output`, `stdout`, `stderr`), the engine reads their non-empty
  values in that order, joined by a newline, and a non-zero `exit_code` (top level or in
  `metadata`) marks it failed; as for shell chunks, a reduced text goes in the first text field,
  the others are emptied and every other key is kept, re-serialised as compact JSON. Any other
  `output` (plain text) is read and written back as it is;
- anything else (`reasoning` with `encrypted_content`, `compaction`, `item_reference`, the
  server-run `mcp_call` / `web_search_call` / …, unknown items) is opaque: it passes through
  untouched and is never compacted.

A call the model's own program made (`caller: {"type": "program"}`: programmatic tool calling)
and its output pass through untouched: the program reads the output, only the program's
result enters the model's context, and the program is replayed from what was sent, so they are
neither counted nor reduced.

A `compaction` item carries the history the provider's own compaction summarized. The provider
prunes the calls, outputs and reasoning before the latest one, which the item stands for, but
not every message: the `/responses/compact` window is the user messages it keeps followed by
its item, and a client that sends that window (the Codex CLI, which also puts its own
instructions there) has the model read them. So the calls and outputs before the latest
`compaction` item pass through untouched and uncounted, like a program's; its messages are read
and counted like any other (`Document.live` stays 0: nothing else before the item is dropped).
"""

from __future__ import annotations

from typing import Any

from factrail.core.formats.base import (
    TEXT_SEP,
    Builder,
    FormatError,
    WireDocument,
    join_text,
    replace_text,
)
from factrail.core.model import as_map
from factrail.core.text import compact_json

FORMAT = "responses"
HOSTED_CALLS = {
    "local_shell_call": ("local_shell", "action"),
    "shell_call": ("shell", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
}
"""Calls of a hosted tool definition the client runs: item type → (engine tool, input key)."""
CALLS = frozenset({"function_call", "custom_tool_call", *HOSTED_CALLS})
CONTENT_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
"""Outputs whose `output` is a string or a list of content parts."""
OUTPUTS = CONTENT_OUTPUTS | {
    "local_shell_call_output",
    "shell_call_output",
    "apply_patch_call_output",
}
CALL_ITEMS = CALLS | OUTPUTS
"""Every item of a call or its output (what a program's call may be)."""
LOCAL_SHELL_TEXT_KEYS = ("output", "stdout", "stderr")
"""The string fields of a JSON-object `local_shell_call_output` that hold its text, in order."""
COMPACTION_ITEMS = frozenset({"compaction", "compaction_summary"})
"""Items standing for the history the provider compacted (encrypted)."""
COMPACTION_TRIGGER = "compaction_trigger"
"""The last input item of a request that asks the provider to compact the transcript."""
PROGRAM_CALLER = "program"


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _call_id(item: dict[str, Any]) -> str:
    return _str(item.get("call_id")) or _str(item.get("id"))


def _chunks(output: Any) -> list[dict[str, Any]]:
    return [c for c in output if isinstance(c, dict)] if isinstance(output, list) else []


def shell_text(output: Any) -> str:
    """The engine text of a `shell_call_output`'s chunks: each command's stdout, then its
    stderr, the non-empty ones joined by a newline."""
    parts = (_str(c.get(k)) for c in _chunks(output) for k in ("stdout", "stderr"))
    return TEXT_SEP.join(p for p in parts if p)


def shell_output(original: Any, text: str) -> Any:
    """A `shell_call_output`'s chunks with `text` as the first one's stdout and every other
    stream emptied, each chunk's outcome (exit code, timeout) kept."""
    chunks = original if isinstance(original, list) else []
    out: list[Any] = []
    placed = False
    for chunk in chunks:
        if not isinstance(chunk, dict):
            out.append(chunk)
            continue
        out.append({**chunk, "stdout": "" if placed else text, "stderr": ""})
        placed = True
    return out if placed else original  # no chunk, no text: nothing was reduced


def _exited_non_zero(outcome: Any) -> bool:
    """Whether an object (a shell chunk's `outcome`, a local shell's JSON output or its
    `metadata`) reports a non-zero `exit_code`."""
    return isinstance(outcome, dict) and outcome.get("exit_code") not in (None, 0)


def _shell_failed(output: Any) -> bool:
    """Whether a command of a `shell_call_output` timed out or exited non-zero."""
    for c in _chunks(output):
        outcome = c.get("outcome")
        if isinstance(outcome, dict) and (
            outcome.get("type") == "timeout" or _exited_non_zero(outcome)
        ):
            return True
    return False


def _json_object(value: Any) -> dict[str, Any]:
    """The JSON object an `output` string holds (no text key when it holds none)."""
    return as_map(value) if isinstance(value, str) else {}


def _text_keys(obj: dict[str, Any]) -> list[str]:
    return [k for k in LOCAL_SHELL_TEXT_KEYS if isinstance(obj.get(k), str)]


def _local_shell_text(output: Any, obj: dict[str, Any]) -> str:
    """The engine text of a `local_shell_call_output` whose `output` holds the JSON `obj`."""
    if keys := _text_keys(obj):
        return TEXT_SEP.join(obj[k] for k in keys if obj[k])
    return join_text(output)


def local_shell_output(original: Any, text: str) -> Any:
    """A `local_shell_call_output`'s `output` with `text` written back: into its JSON object's
    first text field (the others emptied, every other key kept) as compact JSON, else as is."""
    obj = _json_object(original)
    if keys := _text_keys(obj):
        return compact_json({**obj, **dict.fromkeys(keys[1:], ""), keys[0]: text})
    return replace_text(original, text)


def _add_output(b: Builder, w: int, item: dict[str, Any], kind: str) -> None:
    output = item.get("output")
    path = (w, "output")
    failed = item.get("status") in ("failed", "incomplete")
    if kind in CONTENT_OUTPUTS:
        b.add_result(_call_id(item), path, output, part_type="input_text")
    elif kind == "shell_call_output":
        b.add_result(_call_id(item), path, output, is_error=_shell_failed(output),
                     text=shell_text(output), encode=shell_output)  # fmt: skip
    elif kind == "local_shell_call_output":
        obj = _json_object(output)
        failed = failed or _exited_non_zero(obj) or _exited_non_zero(obj.get("metadata"))
        b.add_result(_call_id(item), path, output, is_error=failed,
                     text=_local_shell_text(output, obj), encode=local_shell_output)  # fmt: skip
    else:  # an apply_patch `output` string, written back as it is
        b.add_result(_call_id(item), path, output, is_error=failed)


def from_program(item: dict[str, Any]) -> bool:
    """Whether a call or output item belongs to a call the model's program made."""
    caller = item.get("caller")
    return isinstance(caller, dict) and caller.get("type") == PROGRAM_CALLER


def asks_compaction(input: Any) -> bool:
    """Whether a Responses `input` ends with a `compaction_trigger` item."""
    return bool(input) and isinstance(input, list) and _type(input[-1]) == COMPACTION_TRIGGER


def _type(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else None


def _latest_compaction(input: list[Any]) -> int:
    """The index of the latest `compaction` item (-1: none), before which the provider reads
    no call or output."""
    return next(
        (w for w in range(len(input) - 1, -1, -1) if _type(input[w]) in COMPACTION_ITEMS), -1
    )


def parse(input: str | list[Any]) -> WireDocument:
    """Parse a Responses `input` (the value itself is the wire document)."""
    b = Builder()
    if isinstance(input, str):
        b.push("user", input)
        return b.build(FORMAT, input)
    if not isinstance(input, list):
        raise FormatError("Responses input must be a string or a JSON array")
    last: str | None = None
    offstage: set[str] = set()  # calls outside the model's context: a program's, or pruned
    pruned = _latest_compaction(input)
    for w, item in enumerate(input):
        if not isinstance(item, dict):
            raise FormatError(f"input item {w} is not an object")
        kind = item.get("type", "message" if "role" in item else None)
        cid = _call_id(item)
        if kind in CALL_ITEMS and (w < pruned or from_program(item) or cid in offstage):
            if cid:
                offstage.add(cid)
        elif kind == "message":
            role = item.get("role")
            text = join_text(item.get("content"))
            if role in ("system", "developer"):
                b.system_texts.append(text)
                last = None
            else:
                b.push("assistant" if role == "assistant" else "user", text)
                last = b.messages[-1].role
        elif kind in CALLS:
            if last != "assistant":
                b.push("assistant")
                last = "assistant"
            name = _str(item.get("name")) or "unknown_tool"
            if kind == "function_call":
                args = item.get("arguments")
                b.add_use(cid, name, as_map(args), (w, "arguments"), args)
            elif kind == "custom_tool_call":
                raw = item.get("input")
                b.add_use(cid, name, {"input": _str(raw)}, (w, "input"), raw, wrapped="input")
            else:
                tool, key = HOSTED_CALLS[kind]
                value = item.get(key)
                b.add_use(cid, tool, as_map(value), (w, key), value)
        elif kind in OUTPUTS:
            if last != "results":
                b.push("user")
                last = "results"
            _add_output(b, w, item, kind)
        elif kind in COMPACTION_ITEMS:
            last = None
    return b.build(FORMAT, input)
