"""Property tests: every adapter round-trips generated transcripts exactly and writes back only
the values the engine changed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factrail.core.formats import anthropic, claude_jsonl, hook, openai_chat, responses
from factrail.core.formats.base import Path, WireDocument, is_text_part

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Draw = Callable[[st.SearchStrategy[Any]], Any]

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
ids = st.text(alphabet="abcdef0123", min_size=1, max_size=4).map(lambda s: "call_" + s)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), texts)
extras = st.dictionaries(
    st.sampled_from(["x_vendor", "cache_control", "meta", "reasoning_content"]),
    st.one_of(scalars, st.dictionaries(st.sampled_from(["type", "ttl"]), scalars, max_size=2)),
    max_size=2,
)
image = st.fixed_dictionaries(
    {"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": texts})}
)
inputs = st.dictionaries(st.sampled_from(["path", "command", "n"]), scalars, max_size=3)


def parts(text_type: str) -> st.SearchStrategy[list[Any]]:
    text_part = st.builds(
        lambda t, x: {"type": text_type, "text": t, **x},
        texts,
        st.dictionaries(st.just("cache_control"), st.just({"type": "ephemeral"}), max_size=1),
    )
    return st.lists(st.one_of(text_part, image), max_size=3)


def content(text_type: str = "text") -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), texts, parts(text_type))


def arguments() -> st.SearchStrategy[Any]:
    json_args = inputs.map(lambda d: json.dumps(d, ensure_ascii=False))
    return st.one_of(json_args, texts, inputs)


@st.composite
def openai_messages(draw: Draw) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": draw(texts)}]
    for _ in range(draw(st.integers(0, 4))):
        out.append({"role": "user", "content": draw(content()), **draw(extras)})
        call_ids = draw(st.lists(ids, max_size=3))
        calls = []
        for cid in call_ids:
            fn = {"name": draw(texts), "arguments": draw(arguments())}
            nested = draw(st.booleans())
            calls.append(
                {"id": cid, "type": "function", "function": fn} if nested else {"id": cid, **fn}
            )
        assistant: dict[str, Any] = {"role": "assistant", "content": draw(content())}
        if calls:
            assistant["tool_calls"] = calls
        out.append({**assistant, **draw(extras)})
        for cid in call_ids:
            result = {"role": "tool", "tool_call_id": cid, "content": draw(content())}
            out.append({**result, **draw(extras)})
        if draw(st.booleans()):
            name = draw(texts)
            out.append(
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": name, "arguments": draw(arguments())},
                }
            )
            out.append({"role": "function", "name": name, "content": draw(content())})
    return out


outcomes = st.one_of(
    st.builds(lambda c: {"type": "exit", "exit_code": c}, st.integers(0, 3)),
    st.just({"type": "timeout"}),
)
chunk = st.builds(lambda o, e, c: {"stdout": o, "stderr": e, "outcome": c}, texts, texts, outcomes)
local_shell_json = st.builds(
    lambda streams, extra: json.dumps({**streams, **extra}, ensure_ascii=False),
    st.dictionaries(st.sampled_from(responses.LOCAL_SHELL_TEXT_KEYS), texts, max_size=2),
    st.fixed_dictionaries(
        {},
        optional={
            "metadata": st.fixed_dictionaries(
                {"exit_code": st.integers(0, 3), "duration_seconds": st.just(0.5)}
            ),
            "exit_code": st.integers(0, 3),
        },
    ),
)
"""A local shell output as a JSON object string (codex: `output` and `metadata`)."""


@st.composite
def hosted_round(draw: Draw) -> list[dict[str, Any]]:
    """Calls of hosted tool definitions the client ran, then their outputs (maybe none)."""
    kinds = draw(st.lists(st.sampled_from(["shell", "local_shell", "apply_patch"]), max_size=2))
    calls: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    for n, kind in enumerate(kinds):
        cid = f"h{n}_{draw(ids)}"
        if kind == "shell":
            action = {"commands": draw(st.lists(texts, max_size=2)), **draw(extras)}
            calls.append({"type": "shell_call", "call_id": cid, "action": action})
            chunks = draw(st.lists(chunk, min_size=1, max_size=2))
            outputs.append({"type": "shell_call_output", "call_id": cid, "output": chunks})
        elif kind == "local_shell":
            action = {"type": "exec", "command": draw(st.lists(texts, max_size=3)), "env": {}}
            calls.append({"type": "local_shell_call", "id": draw(texts), "call_id": cid,
                          "action": action})  # fmt: skip
            output = draw(st.one_of(texts, local_shell_json))
            outputs.append({"type": "local_shell_call_output", "id": cid, "output": output})
        else:
            operation = {"type": "update_file", "path": draw(texts), "diff": draw(texts)}
            calls.append({"type": "apply_patch_call", "call_id": cid, "operation": operation})
            done = {"type": "apply_patch_call_output", "call_id": cid, "status": "completed"}
            if draw(st.booleans()):
                done["output"] = draw(texts)
            outputs.append(done)
    return calls + outputs


@st.composite
def responses_input(draw: Draw) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            out.append({"role": "user", "content": draw(st.one_of(texts, parts("input_text")))})
        else:
            out.append({"type": "message", "role": "user", "content": draw(parts("input_text"))})
        if draw(st.booleans()):
            out.append(
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": draw(texts)}
            )
        if draw(st.booleans()):
            out.append(
                {"type": "message", "role": "assistant", "content": draw(parts("output_text"))}
            )
        call_ids = draw(st.lists(ids, max_size=3))
        custom = [draw(st.booleans()) for _ in call_ids]
        for cid, is_custom in zip(call_ids, custom, strict=True):
            if is_custom:
                out.append(
                    {
                        "type": "custom_tool_call",
                        "call_id": cid,
                        "name": draw(texts),
                        "input": draw(texts),
                    }
                )
            else:
                out.append(
                    {
                        "type": "function_call",
                        "call_id": cid,
                        "name": draw(texts),
                        "arguments": draw(arguments()),
                        **draw(extras),
                    }
                )
        for cid, is_custom in zip(call_ids, custom, strict=True):
            kind = "custom_tool_call_output" if is_custom else "function_call_output"
            out.append(
                {
                    "type": kind,
                    "call_id": cid,
                    "output": draw(st.one_of(texts, parts("input_text"))),
                }
            )
        out.extend(draw(hosted_round()))
        if draw(st.booleans()):
            out.append(
                {
                    "type": draw(st.sampled_from(["compaction", "item_reference", "x_new"])),
                    "id": draw(texts),
                    "encrypted_content": draw(texts),
                }
            )
    return out


def _block_content() -> st.SearchStrategy[Any]:
    return st.one_of(texts, parts("text"))


@st.composite
def anthropic_messages(draw: Draw) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 4))):
        out.append({"role": "user", "content": draw(st.one_of(texts, parts("text")))})
        call_ids = draw(st.lists(ids, max_size=3))
        blocks: list[dict[str, Any]] = []
        if draw(st.booleans()):
            blocks.append({"type": "thinking", "thinking": draw(texts), "signature": draw(texts)})
        blocks.append({"type": "text", "text": draw(texts)})
        blocks += [
            {"type": "tool_use", "id": c, "name": draw(texts), "input": draw(inputs)}
            for c in call_ids
        ]
        out.append({"role": "assistant", "content": blocks})
        if call_ids:
            results = [
                {
                    "type": "tool_result",
                    "tool_use_id": c,
                    "content": draw(_block_content()),
                    **draw(st.fixed_dictionaries({}, optional={"is_error": st.booleans()})),
                }
                for c in call_ids
            ]
            out.append({"role": "user", "content": results})
    return out


@st.composite
def claude_lines(draw: Draw) -> str:
    lines = [json.dumps({"type": "summary", "summary": draw(texts)})]
    for turn in range(draw(st.integers(0, 4))):
        lines.append(
            json.dumps(
                {
                    "type": "user",
                    "uuid": f"u{turn}",
                    "message": {"role": "user", "content": draw(texts)},
                },
                ensure_ascii=False,
            )
        )
        call_ids = draw(st.lists(ids, max_size=3))
        for k, c in enumerate(call_ids):
            block = {"type": "tool_use", "id": c, "name": draw(texts), "input": draw(inputs)}
            entry = {
                "type": "assistant",
                "message": {"id": f"msg_{turn}", "role": "assistant", "content": [block]},
                "extra": k,
            }
            lines.append(
                json.dumps(
                    entry, ensure_ascii=False, indent=draw(st.sampled_from([None, None, 1]))
                ).replace("\n", "")
            )
        if draw(st.booleans()):
            lines.append("not json {")
        for c in call_ids:
            result = {"type": "tool_result", "tool_use_id": c, "content": draw(_block_content())}
            lines.append(
                json.dumps(
                    {
                        "type": "user",
                        "isSidechain": False,
                        "message": {"role": "user", "content": [result]},
                        "toolUseResult": {"stdout": "x"},
                    },
                    ensure_ascii=False,
                )
            )
    ending: str = draw(st.sampled_from(["", "\n"]))
    return "\n".join(lines) + ending


@st.composite
def hook_messages(draw: Draw) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(0, 4))):
        out.append({"role": "user", "text": draw(texts), "handle": turn})
        call_ids = draw(st.lists(ids, max_size=3))
        uses = [
            {
                "tool_use_id": c,
                "tool": draw(texts),
                "input": draw(inputs),
                **draw(st.fixed_dictionaries({}, optional={"text": texts})),
            }
            for c in call_ids
        ]
        out.append({"role": "assistant", "text": draw(texts), "toolUses": uses})
        if call_ids:
            out.append(
                {
                    "role": "user",
                    "text": "",
                    "toolResults": [{"tool_use_id": c, "text": draw(texts)} for c in call_ids],
                }
            )
    return out


def diff_paths(a: Any, b: Any, path: Path = ()) -> list[Path]:
    """Paths where two JSON values differ (key order counts)."""
    if type(a) is not type(b):
        return [path]
    if isinstance(a, dict):
        if list(a) != list(b):
            return [path]
        return [p for k in a for p in diff_paths(a[k], b[k], (*path, k))]
    if isinstance(a, list):
        if len(a) != len(b):
            return [path]
        return [
            p
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for p in diff_paths(x, y, (*path, i))
        ]
    return [] if a == b else [path]


def at(value: Any, path: Path) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else value[key]
    return value


def check_spelling_kept(old: Any, new: Any) -> None:
    """A string stays a string; a part list keeps its non-text parts in place; a shell output's
    chunks stay, each with its outcome."""
    if old is None:  # an optional output (apply_patch) that was not there
        assert isinstance(new, str)
    elif isinstance(old, list) and old and all(isinstance(c, dict) and "outcome" in c for c in old):
        assert [c["outcome"] for c in new] == [c["outcome"] for c in old]
        assert all(isinstance(c["stdout"], str) and isinstance(c["stderr"], str) for c in new)
    elif isinstance(old, list):
        assert isinstance(new, list)
        assert [p for p in old if not is_text_part(p)] == [p for p in new if not is_text_part(p)]
        assert sum(is_text_part(p) for p in new) == 1
    else:
        assert isinstance(new, str)


def check_json_kept(old: Any, new: Any) -> None:
    """A local shell output that held a JSON object with text fields still does, with the same
    keys in the same order and every key but the text fields unchanged."""
    try:
        before = json.loads(old)
    except ValueError:
        return
    keys = responses.LOCAL_SHELL_TEXT_KEYS
    if not isinstance(before, dict) or not any(isinstance(before.get(k), str) for k in keys):
        return
    after = json.loads(new)
    assert isinstance(after, dict) and list(after) == list(before)
    assert {k: v for k, v in after.items() if k not in keys} == {
        k: v for k, v in before.items() if k not in keys
    }


def check_lossless(doc: WireDocument, wire: Any) -> None:
    before = json.dumps(wire, ensure_ascii=False)
    out = doc.emit(doc.messages)
    assert out == wire
    assert json.dumps(out, ensure_ascii=False) == before
    assert json.dumps(wire, ensure_ascii=False) == before


def check_one_result_change(
    doc: WireDocument, wire: Any, parse: Callable[[Any], Any], draw: Draw
) -> None:
    slots = [(i, j) for i, m in enumerate(doc.messages) for j in range(len(m.tool_results))]
    if not slots:
        return
    i, j = draw(st.sampled_from(slots))
    before = json.dumps(wire, ensure_ascii=False)
    new = [m.copy() for m in doc.messages]
    new[i].tool_results[j].text += "~changed"
    out = doc.emit(new)
    assert json.dumps(wire, ensure_ascii=False) == before
    location = doc.result_location(i, j)
    changed = diff_paths(wire, out)
    # An optional output that was not there is added: its item's keys change.
    parent = at(wire, location[:-1])
    added = isinstance(parent, dict) and location[-1] not in parent
    within = location[:-1] if added else location
    assert changed and all(p[: len(within)] == within for p in changed)
    check_spelling_kept(at(wire, location), at(out, location))
    if isinstance(parent, dict) and parent.get("type") == "local_shell_call_output":
        check_json_kept(at(wire, location), at(out, location))
    again = parse(out)
    assert [[r.text for r in m.tool_results] for m in again.messages] == [
        [r.text for r in m.tool_results] for m in new
    ]


def check_one_input_change(doc: WireDocument, wire: Any, draw: Draw) -> None:
    slots = [(i, k) for i, m in enumerate(doc.messages) for k in range(len(m.tool_uses))]
    if not slots:
        return
    i, k = draw(st.sampled_from(slots))
    new = [m.copy() for m in doc.messages]
    new[i].tool_uses[k].input = {**new[i].tool_uses[k].input, "briefed": "…[9 chars]"}
    out = doc.emit(new)
    assert diff_paths(wire, out) == [doc.use_location(i, k)]


@pytest.mark.parametrize(
    ("parse", "wires"),
    [
        (openai_chat.parse, openai_messages),
        (responses.parse, responses_input),
        (anthropic.parse, anthropic_messages),
        (hook.parse, hook_messages),
    ],
    ids=["openai_chat", "responses", "anthropic", "hook"],
)
@SETTINGS
@given(st.data())
def test_round_trip(
    parse: Callable[[Any], WireDocument],
    wires: Callable[[], st.SearchStrategy[list[dict[str, Any]]]],
    data: st.DataObject,
) -> None:
    wire = data.draw(wires())
    doc = parse(wire)
    check_lossless(doc, wire)
    check_one_result_change(doc, wire, parse, data.draw)
    check_one_input_change(doc, wire, data.draw)


@SETTINGS
@given(claude_lines(), st.data())
def test_claude_jsonl_round_trip(text: str, data: st.DataObject) -> None:
    doc = claude_jsonl.parse(text)
    assert doc.emit(doc.messages) == text
    slots = [(i, j) for i, m in enumerate(doc.messages) for j in range(len(m.tool_results))]
    if not slots:
        return
    i, j = data.draw(st.sampled_from(slots))
    new = [m.copy() for m in doc.messages]
    new[i].tool_results[j].text = "short"
    out = doc.emit(new)
    location = doc.wire.result_location(i, j)
    row = location[0]
    assert isinstance(row, int)
    old_lines, new_lines = text.split("\n"), out.split("\n")
    changed = [n for n, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    assert changed == [row]
    old_entry, new_entry = json.loads(old_lines[row]), json.loads(new_lines[row])
    paths = diff_paths(old_entry, new_entry)
    assert paths and all(p[: len(location) - 1] == location[1:] for p in paths)
    check_spelling_kept(at(old_entry, location[1:]), at(new_entry, location[1:]))
    assert claude_jsonl.parse(out).messages[i].tool_results[j].text == "short"
