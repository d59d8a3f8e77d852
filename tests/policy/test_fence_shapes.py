"""One call model: the fence reads every call the engine reads, in every shape and spelling.

Property: a call of a fenced tool, written through every call shape each wire format accepts
(OpenAI chat: nested, name-only, flat, custom, legacy `function_call` with its `role: function`
result; Responses: `function_call` with and without a `namespace`, `custom_tool_call`,
`mcp_call`; Anthropic: `tool_use`, `mcp_tool_use`, `server_tool_use`; Claude Code jsonl; hook
messages) and spelled as any client may (the separators `__ . / _`, case, `-`/`_` swapped or
dropped, camelCase, zero-width and full-width characters, plugin-qualified, `mcp` glued on, the
server in a field beside the tool or in its input, Cline's `use_mcp_tool`, a `Skill` call), is
seen by the gateway's reading (`body_refs` + `TaintFence.scan`, the calls the gateway joins,
and the byte pre-check `may_call` on the raw and the ASCII-escaped body) and, where the format's
parser models the call's name and input, by the engine's (`tool_refs` after `parse`). The
matcher and body walk the fence had before (`legacy_*`, kept here as they were) miss calls the
same generator makes. Unrelated tools stay clean. Through the gateway, a remote judge is never
asked about a session holding any of them; the same session with the judge declared local is.
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from factrail.core.formats import anthropic, claude_jsonl, hook, openai_chat, responses
from factrail.core.formats.base import Document
from factrail.hook.fence import request_refs
from factrail.policy.provenance import body_calls
from factrail.policy.taint import TaintFence, body_refs, tool_refs
from tests.test_fence_wire import PLAIN, Gateway, build, send

FENCE = TaintFence()
SERVERS = ("email-gateway", "claude_ai_Gmail")
TOOLS = ("search_threads", "send", "x")
SKILL = "email-search"
OUT = "3 threads, 2 unread"
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"
SERVER_KEYS = ("server_name", "server", "serverName", "mcp_server", "server_label")
FORMS = (
    "mcp", "bare", "plugin", "dot", "slash", "mcp-single", "single", "mcp-glued", "colon",
    "beside", "input", "cline", "skill",
)  # fmt: skip
"""How a call names its fenced server: in its name (each separator), beside it, in its input,
through Cline's dispatcher, or a `Skill` call of the fenced skill."""
EXAMPLES = settings(max_examples=300, deadline=None, derandomize=True)
WIRE_EXAMPLES = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass(frozen=True)
class Call:
    """One call: its name, its input (an object, and the text a raw-input shape sends), and the
    server when it is named beside the tool."""

    name: str
    args: dict[str, Any]
    raw: str
    beside: str | None = None
    carried: bool = False
    """The input names the fenced server, tool or skill (so it must be sent)."""


def make_call(form: str, server: str, tool: str, key: str = "server_name") -> Call:
    """A call of `tool` of `server` (or of the fenced skill, spelled `server`) in `form`."""
    args: dict[str, Any] = {"q": "invoices"}
    if form == "beside":
        return Call(tool, args, "invoices", beside=server)
    held: dict[str, Any]
    if form == "input":
        held = {key: server, "q": "invoices"}
        return Call(tool, held, json.dumps(held), carried=True)
    if form == "cline":
        held = {"server_name": server, "tool_name": tool, "arguments": args}
        return Call("use_mcp_tool", held, json.dumps(held), carried=True)
    if form == "skill":
        return Call(tool, {"skill": server}, server, carried=True)
    name = {
        "mcp": f"mcp__{server}__{tool}",
        "bare": f"{server}__{tool}",
        "plugin": f"mcp__plugin_agent-box_{server}__{tool}",
        "dot": f"{server}.{tool}",
        "slash": f"{server}/{tool}",
        "mcp-single": f"mcp_{server}_{tool}",
        "single": f"{server}_{tool}",
        "mcp-glued": f"mcp{server}__{tool}",
        "colon": f"mcp:{server}:{tool}",
    }[form]
    return Call(name, args, "invoices")


# -- the wire shapes ------------------------------------------------------------------------------

Items = list[dict[str, Any]]


def _assistant_calls(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "On it.", "tool_calls": list(calls)}


def _tool_result(i: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": OUT}


def chat_function(c: Call, i: int) -> Items:
    fn = {"name": c.name, "arguments": json.dumps(c.args)}
    return [_assistant_calls({"id": f"call_{i}", "type": "function", "function": fn}),
            _tool_result(i)]  # fmt: skip


def chat_name_only(c: Call, i: int) -> Items:
    """`function{name}` without `arguments` (beside it, when the input must be sent)."""
    call: dict[str, Any] = {"id": f"call_{i}", "type": "function", "function": {"name": c.name}}
    if c.carried:
        call["arguments"] = json.dumps(c.args)
    return [_assistant_calls(call), _tool_result(i)]


def chat_flat(c: Call, i: int) -> Items:
    flat = {"id": f"call_{i}", "type": "function", "name": c.name, "arguments": json.dumps(c.args)}
    return [_assistant_calls(flat), _tool_result(i)]


def chat_custom(c: Call, i: int) -> Items:
    custom = {"id": f"call_{i}", "type": "custom", "custom": {"name": c.name, "input": c.raw}}
    return [_assistant_calls(custom), _tool_result(i)]


def chat_legacy(c: Call, i: int) -> Items:
    fc = {"name": c.name, "arguments": json.dumps(c.args)}
    return [{"role": "assistant", "content": None, "function_call": fc},
            {"role": "function", "name": c.name, "content": OUT}]  # fmt: skip


def responses_function_call(c: Call, i: int) -> Items:
    item = {"type": "function_call", "call_id": f"fc_{i}", "name": c.name,
            "arguments": json.dumps(c.args)}  # fmt: skip
    if c.beside is not None:
        item["namespace"] = c.beside
    return [item, {"type": "function_call_output", "call_id": f"fc_{i}", "output": OUT}]


def responses_custom(c: Call, i: int) -> Items:
    item = {"type": "custom_tool_call", "call_id": f"ct_{i}", "name": c.name, "input": c.raw}
    return [item, {"type": "custom_tool_call_output", "call_id": f"ct_{i}", "output": OUT}]


def responses_mcp_call(c: Call, i: int) -> Items:
    return [{"type": "mcp_call", "id": f"mcp_{i}", "name": c.name,
             "server_label": c.beside or "toolbox", "arguments": json.dumps(c.args),
             "output": OUT}]  # fmt: skip


def anthropic_tool_use(c: Call, i: int) -> Items:
    use = {"type": "tool_use", "id": f"toolu_{i}", "name": c.name, "input": c.args}
    result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": OUT}
    return [{"role": "assistant", "content": [{"type": "text", "text": "On it."}, use]},
            {"role": "user", "content": [result]}]  # fmt: skip


def anthropic_mcp_tool_use(c: Call, i: int) -> Items:
    use = {"type": "mcp_tool_use", "id": f"mcptoolu_{i}", "name": c.name,
           "server_name": c.beside or "toolbox", "input": c.args}  # fmt: skip
    done = {"type": "mcp_tool_result", "tool_use_id": f"mcptoolu_{i}",
            "content": [{"type": "text", "text": OUT}]}  # fmt: skip
    return [{"role": "assistant", "content": [use, done]}, {"role": "user", "content": "Go on."}]


def anthropic_server_tool_use(c: Call, i: int) -> Items:
    use = {"type": "server_tool_use", "id": f"srvtoolu_{i}", "name": c.name, "input": c.args}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": "Go on."}]


def claude_code(c: Call, i: int) -> Items:
    use = {"type": "tool_use", "id": f"toolu_{i}", "name": c.name, "input": c.args}
    result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": OUT}
    return [
        {"type": "assistant", "sessionId": "s1", "uuid": f"a{i}",
         "message": {"id": f"msg_{i}", "role": "assistant", "content": [use]}},
        {"type": "user", "sessionId": "s1", "uuid": f"u{i}",
         "message": {"role": "user", "content": [result]}},
    ]  # fmt: skip


def hook_messages(c: Call, i: int) -> Items:
    use = {"tool_use_id": f"toolu_{i}", "tool": c.name, "input": c.args}
    return [{"role": "assistant", "text": "", "toolUses": [use]},
            {"role": "user", "text": "", "toolResults": [{"tool_use_id": f"toolu_{i}",
                                                          "text": OUT}]}]  # fmt: skip


@dataclass(frozen=True)
class Shape:
    """A call shape a wire format accepts, whether its parser models the call's name and input
    (else only the body walk sees it), whether it has a field for the server beside the tool,
    and whether its input is a raw string."""

    name: str
    fmt: str
    items: Callable[[Call, int], Items]
    parsed: bool = True
    beside: bool = False
    raw_input: bool = False


SHAPES = (
    Shape("chat-function", "chat", chat_function),
    Shape("chat-name-only", "chat", chat_name_only),
    Shape("chat-flat", "chat", chat_flat),
    Shape("chat-custom", "chat", chat_custom, parsed=False, raw_input=True),
    Shape("chat-legacy", "chat", chat_legacy),
    Shape("responses-function-call", "responses", responses_function_call, beside=True),
    Shape("responses-custom", "responses", responses_custom, raw_input=True),
    Shape("responses-mcp-call", "responses", responses_mcp_call, parsed=False, beside=True),
    Shape("anthropic-tool-use", "anthropic", anthropic_tool_use),
    Shape("anthropic-mcp-tool-use", "anthropic", anthropic_mcp_tool_use, parsed=False, beside=True),
    Shape("anthropic-server-tool-use", "anthropic", anthropic_server_tool_use, parsed=False),
    Shape("claude-code", "jsonl", claude_code),
    Shape("hook", "hook", hook_messages),
)
WIRE_FORMATS = ("chat", "responses", "anthropic")


@dataclass(frozen=True)
class Case:
    """A transcript holding one call in one shape."""

    shape: Shape
    call: Call
    form: str

    def items(self) -> Items:
        return self.shape.items(self.call, 7)

    def body(self) -> Any:
        """The decoded request body (a jsonl file: its decoded lines)."""
        items, fmt = self.items(), self.shape.fmt
        if fmt == "chat":
            opening = [{"role": "system", "content": "You are an agent."},
                       {"role": "user", "content": "Tidy the inbox."}]  # fmt: skip
            return {"model": "gpt-4o",
                    "messages": [*opening, *items, {"role": "user", "content": "Go."}]}  # fmt: skip
        if fmt == "responses":
            first = {"type": "message", "role": "user", "content": "Tidy the inbox."}
            return {"model": "gpt-4o", "input": [first, *items]}
        if fmt == "anthropic":
            messages = [{"role": "user", "content": "Tidy the inbox."}, *items]
            return {"model": "claude-sonnet-4-5", "system": "You are an agent.",
                    "messages": messages}  # fmt: skip
        if fmt == "jsonl":
            said = {"role": "user", "content": "Tidy the inbox."}
            line: dict[str, Any] = {
                "type": "user",
                "sessionId": "s1",
                "uuid": "u0",
                "message": said,
            }
            return [line, *items]
        return [{"role": "user", "text": "Tidy the inbox."}, *items]

    def raw(self) -> bytes:
        body = self.body()
        if self.shape.fmt == "jsonl":
            return "\n".join(json.dumps(line, ensure_ascii=False) for line in body).encode()
        return orjson.dumps(body)

    def escaped(self) -> bytes:
        """The raw body as a client that escapes every non-ASCII character sends it."""
        body = self.body()
        if self.shape.fmt == "jsonl":
            return "\n".join(json.dumps(line) for line in body).encode()
        return json.dumps(body).encode()

    def parse(self) -> Document:
        body, fmt = self.body(), self.shape.fmt
        if fmt == "chat":
            return openai_chat.parse(body["messages"])
        if fmt == "responses":
            return responses.parse(body["input"])
        if fmt == "anthropic":
            return anthropic.parse(body["messages"], body["system"])
        if fmt == "jsonl":
            return claude_jsonl.parse(self.raw().decode())
        return hook.parse(body)

    @property
    def engine_sees(self) -> bool:
        """Whether the parser models what names the server (its name, or its input)."""
        if not self.shape.parsed or self.form == "beside":
            return False
        return not (self.shape.raw_input and self.form in ("input", "cline"))


def seen(case: Case, fence: TaintFence = FENCE) -> dict[str, bool]:
    """Which of the fence's readings see the case's call."""
    body, doc = case.body(), case.parse()
    out = {
        "body": fence.scan(body_refs(body)).tainted,
        "gateway": fence.scan(body_calls(body, doc.messages)).tainted,
        "may_call": fence.may_call(case.raw()) and fence.may_call(case.escaped()),
        "engine": fence.scan(tool_refs(doc.messages)).tainted,
    }
    if case.shape.fmt == "hook":
        call = case.call
        request = {"tool": call.name, "input": call.args, "server": call.beside}
        if case.form == "skill":
            request["skill"] = call.args["skill"]
        out["hook"] = fence.scan(request_refs({"tools": [request]})).tainted
    return out


def gateway_sees(found: dict[str, bool]) -> bool:
    """The body walk, the gateway's joined calls, the byte pre-check (and the hook's request)
    all see the call."""
    return all(seen for reading, seen in found.items() if reading != "engine")


# -- spellings ------------------------------------------------------------------------------------


def fullwidth(ch: str) -> str:
    return chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch


@st.composite
def spelled(draw: st.DrawFn, name: str) -> str:
    """`name` with any letter's case flipped, any `-`/`_` swapped or dropped, any character
    full-width, and zero-width characters anywhere."""
    out = []
    for ch in name:
        if ch in "-_":
            out.append(draw(st.sampled_from(["-", "_", ""])))
        else:
            flipped = ch.swapcase() if ch.isalpha() and draw(st.booleans()) else ch
            out.append(fullwidth(flipped) if draw(st.integers(0, 7)) == 0 else flipped)
        if draw(st.integers(0, 7)) == 0:
            out.append(draw(st.sampled_from(ZERO_WIDTH)))
    return "".join(out)


@st.composite
def skill_values(draw: st.DrawFn) -> str:
    skill = draw(spelled(SKILL))
    return draw(st.sampled_from([skill, f"/{skill}", f"agentbox:{skill}", f"/{skill} invoices"]))


@st.composite
def fenced_cases(draw: st.DrawFn, formats: tuple[str, ...] | None = None) -> Case:
    """A call of the default fence, in any shape and spelling."""
    shapes = [s for s in SHAPES if formats is None or s.fmt in formats]
    shape = draw(st.sampled_from(shapes))
    form = draw(st.sampled_from(FORMS))
    if form == "beside" and not shape.beside:
        form = "input"
    if form == "skill":
        call = make_call(form, draw(skill_values()), draw(spelled("Skill")))
    else:
        server = draw(spelled(draw(st.sampled_from(SERVERS))))
        key = draw(st.sampled_from(SERVER_KEYS))
        call = make_call(form, server, draw(st.sampled_from(TOOLS)), key)
    return Case(shape, call, form)


@EXAMPLES
@given(fenced_cases())
def test_every_reading_sees_every_shape_and_spelling(case: Case) -> None:
    found = seen(case)
    assert gateway_sees(found), (case, found)
    if case.engine_sees:
        assert found["engine"], (case, found)


GRID_SPELLINGS = (
    "email-gateway", "Email_Gateway", "EMAIL-GATEWAY", "EmailGateway", "emailgateway",
    "email\u200b-gateway", "\u200demail-gate\u2060way", "ｅｍａｉｌ-gateway",
    "ＥＭＡＩＬ＿ＧＡＴＥＷＡＹ",
    "claude_ai_Gmail", "claude-ai-gmail", "ClaudeAiGmail", "claude_ai_Ｇmail",
)  # fmt: skip
GRID_SKILLS = ("email-search", "/Email_Search invoices", "agentbox:email-search", "ｅmail-search")


def grid() -> Iterator[Case]:
    """Every shape x every form x a fixed set of spellings."""
    for shape, form in itertools.product(SHAPES, FORMS):
        if form == "beside" and not shape.beside:
            continue
        if form == "skill":
            for skill in GRID_SKILLS:
                yield Case(shape, make_call(form, skill, "Skill"), form)
            continue
        for server, key in zip(GRID_SPELLINGS, itertools.cycle(SERVER_KEYS), strict=False):
            yield Case(shape, make_call(form, server, "search_threads", key), form)


def test_the_grid_of_shapes_and_spellings_is_seen_and_the_legacy_fence_missed_some() -> None:
    """Every case of the grid is seen by every reading (the engine's where its parser models
    the call); the legacy reading misses some in every shape."""
    cases = list(grid())
    found = [seen(c) for c in cases]
    missed = [c for c, f in zip(cases, found, strict=True) if not gateway_sees(f)]
    engine = [c for c, f in zip(cases, found, strict=True) if c.engine_sees and not f["engine"]]
    assert (missed, engine) == ([], [])
    legacy = [c for c in cases if not legacy_sees(c)]
    assert len(cases) > 700 and len(legacy) > len(cases) / 3
    assert {c.shape.name for c in legacy} == {s.name for s in SHAPES}


def test_the_legacy_fence_fails_the_same_property() -> None:
    """With the matcher and body walk the fence had before swapped in, the same generator
    finds a fenced call that reaches the judge's side of the fence unseen."""
    miss = find(
        fenced_cases(),
        lambda case: not legacy_sees(case),
        settings=settings(max_examples=2000, database=None, derandomize=True),
    )
    assert gateway_sees(seen(miss))


@pytest.mark.parametrize(
    ("shape", "form"),
    [
        ("chat-legacy", "mcp"),
        ("chat-flat", "mcp"),
        ("chat-name-only", "mcp"),
        ("chat-custom", "mcp"),
        ("responses-function-call", "beside"),
    ],
)
def test_the_shapes_the_legacy_walk_missed(shape: str, form: str) -> None:
    """The shapes that leaked, each with a plain spelling: the legacy walk misses them."""
    call = make_call(form, "email-gateway", "search")
    case = Case(next(s for s in SHAPES if s.name == shape), call, form)
    assert not legacy_sees(case)
    assert seen(case)["body"] and seen(case)["gateway"]


# -- unrelated tools stay clean -------------------------------------------------------------------

CLEAN_NAMES = (
    "Read", "bash", "Grep", "web_search", "mcp__github__search", "mcp__claude-flow__memory_search",
    "mcp__email__send", "mcp__slack__post_message", "email",
)  # fmt: skip


@st.composite
def clean_cases(draw: st.DrawFn) -> Case:
    """A call of a tool the default fence does not name, in any shape and form (random names
    are drawn without an `e`, which every default entry holds)."""
    shape = draw(st.sampled_from(SHAPES))
    form = draw(st.sampled_from(FORMS))
    if form == "beside" and not shape.beside:
        form = "input"
    word = st.from_regex(r"[a-df-z][a-df-z0-9_.\-/]{0,14}", fullmatch=True)
    server = draw(st.sampled_from(CLEAN_NAMES) | word)
    if form == "skill":
        return Case(shape, make_call(form, server, "Skill"), form)
    return Case(shape, make_call(form, server, draw(st.sampled_from(CLEAN_NAMES) | word)), form)


@EXAMPLES
@given(clean_cases())
def test_unrelated_tools_are_not_fenced(case: Case) -> None:
    assert not any(seen(case).values()), case


# -- through the gateway --------------------------------------------------------------------------

LEAKS = [
    ("chat", chat_legacy, "mcp__email-gateway__search", {}),
    ("chat", chat_flat, "mcp__email-gateway__search", {}),
    ("chat", chat_name_only, "mcp__email-gateway__search", {}),
    ("chat", chat_custom, "mcp__email-gateway__search", {}),
    ("responses", responses_function_call, "search", {"beside": "email-gateway"}),
    ("responses", responses_custom, "mcp__email-gateway__search", {}),
    ("chat", chat_function, "email-gateway.search", {}),
    ("chat", chat_function, "email-gateway/search", {}),
    ("responses", responses_function_call, "mcp_email_gateway_search", {}),
    ("anthropic", anthropic_tool_use, "email_gateway_search", {}),
    ("chat", chat_function, "use_mcp_tool", {"args": {"server_name": "email-gateway",
                                                      "tool_name": "search"}}),
    ("anthropic", anthropic_tool_use, "search", {"args": {"server_name": "email-gateway"}}),
    ("anthropic", anthropic_tool_use, "search", {"args": {"server": "email-gateway"}}),
    ("anthropic", anthropic_tool_use, "mcp__email\u200b-gateway__search", {}),
    ("responses", responses_function_call, "mcp__ｅｍａｉｌ-gateway__search", {}),
]  # fmt: skip
"""Every shape and spelling found leaking, as its client writes it."""


def leak_call(name: str, extra: Mapping[str, Any]) -> Call:
    args = dict(extra.get("args", {"q": "invoices"}))
    return Call(name, args, json.dumps(args), beside=extra.get("beside"), carried="args" in extra)


def judge_requests(tmp: Path, fmt: str, items: Items, *, local: bool) -> int:
    """Judge requests for one request through the gateway: a transcript past the trigger
    (plain calls with long outputs) holding `items`."""
    gateway = Gateway(tmp / uuid.uuid4().hex, local)
    gateway.tmp.mkdir()
    client = str(uuid.uuid4())
    body = build(fmt, [PLAIN[i % 2] for i in range(8)], f"Tidy the inbox ({client[:8]}).", client)
    key, at = {"chat": ("messages", 2), "anthropic": ("messages", 1)}.get(fmt, ("input", 1))
    body[key][at:at] = items
    with gateway.running() as g:
        send(g, fmt, orjson.dumps(body), "h-" + client)
    return gateway.judge_requests


@pytest.mark.parametrize(("fmt", "shape", "name", "extra"), LEAKS)
def test_no_leaking_shape_reaches_a_remote_judge(
    tmp_path: Path,
    fmt: str,
    shape: Callable[[Call, int], Items],
    name: str,
    extra: dict[str, Any],
) -> None:
    """Each shape found leaking: 0 requests to a remote judge; declared local, the judge is
    asked (the zero is the fence's doing)."""
    items = shape(leak_call(name, extra), 99)
    assert judge_requests(tmp_path, fmt, items, local=False) == 0
    assert judge_requests(tmp_path, fmt, items, local=True) > 0


@WIRE_EXAMPLES
@given(case=fenced_cases(WIRE_FORMATS))
def test_no_generated_shape_reaches_a_remote_judge(tmp_path: Path, case: Case) -> None:
    """A generated shape and spelling: 0 requests to a remote judge; declared local, asked."""
    assert judge_requests(tmp_path, case.shape.fmt, case.items(), local=False) == 0
    assert judge_requests(tmp_path, case.shape.fmt, case.items(), local=True) > 0


# -- the fence as it was (kept to prove the property fails on it) ---------------------------------

LEGACY_CALL_TYPES = frozenset(
    {"tool_use", "server_tool_use", "mcp_tool_use", "function_call", "custom_tool_call",
     "mcp_call", "mcp_approval_request", "tool_call"}
)  # fmt: skip
LEGACY_NOT_CALLS = frozenset({"tools", "tool_choice", "mcp_servers", "functions"})
LegacyRef = tuple[str, str | None, str | None]


def legacy_fold(name: str) -> str:
    return name.strip().casefold().replace("-", "_")


def legacy_skill_name(value: str) -> str:
    words = value.strip().split(maxsplit=1)
    word = words[0] if words else ""
    return legacy_fold(re.split(r"[:/]", word.lstrip("/"))[-1])


def legacy_split_server(name: str) -> tuple[str | None, str]:
    mcp = name.startswith("mcp__")
    server, sep, tool = (name[len("mcp__") :] if mcp else name).partition("__")
    if sep or mcp:
        return server, tool
    return None, name


def legacy_same_server(server: str | None, fenced: str) -> bool:
    return server is not None and (server == fenced or server.endswith("_" + fenced))


def legacy_entries(fence: TaintFence) -> list[tuple[str | None, str]]:
    entries = []
    for entry in fence.tools:
        folded = legacy_fold(entry)
        if not folded.strip("_"):
            continue
        server, tool = legacy_split_server(folded)
        if server is not None and not server:
            continue
        entries.append((server, tool))
    return entries


def legacy_taints(fence: TaintFence, tool: str, skill: str | None, server: str | None) -> bool:
    skills = {s for s in map(legacy_skill_name, fence.skills) if s}
    folded = legacy_fold(tool)
    if folded == legacy_fold("Skill") and skill and legacy_skill_name(skill) in skills:
        return True
    named: str | None
    if server is not None:
        named = legacy_fold(server) or None
    else:
        named, folded = legacy_split_server(folded)
    if not folded and named is None:
        return False
    for entry_server, prefix in legacy_entries(fence):
        if entry_server is None:
            if folded.startswith(prefix) or legacy_same_server(named, prefix):
                return True
        elif legacy_same_server(named, entry_server) and folded.startswith(prefix):
            return True
    return named is None and folded in skills


def legacy_skill_argument(arguments: Any) -> str | None:
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return arguments or None
    if not isinstance(arguments, Mapping):
        return None
    for key in ("skill", "name", "command"):
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def legacy_ref(tool: str, arguments: Any, server: str | None) -> LegacyRef:
    skill = legacy_skill_argument(arguments) if legacy_fold(tool) == "skill" else None
    return (tool, skill, server)


def legacy_call_ref(block: Mapping[str, Any]) -> LegacyRef | None:
    function = block.get("function")
    if isinstance(function, Mapping) and "arguments" in function:
        name = function.get("name")
        if isinstance(name, str):
            return legacy_ref(name, function.get("arguments"), None)
    if block.get("type") not in LEGACY_CALL_TYPES:
        return None
    name = block.get("name")
    server = block.get("server_name") or block.get("server_label")
    server = server if isinstance(server, str) else None
    if not isinstance(name, str):
        return ("", None, server) if server else None
    arguments = block["input"] if "input" in block else block.get("arguments")
    return legacy_ref(name, arguments, server)


def legacy_body_refs(body: Any) -> list[LegacyRef]:
    refs: list[LegacyRef] = []
    stack: list[tuple[Any, int]]
    if isinstance(body, Mapping):
        stack = [(v, 1) for k, v in body.items() if k not in LEGACY_NOT_CALLS]
    else:
        stack = [(body, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > 64:
            continue
        if isinstance(value, list):
            stack.extend((v, depth + 1) for v in reversed(value))
            continue
        if not isinstance(value, Mapping):
            continue
        ref = legacy_call_ref(value)
        if ref is not None:
            refs.append(ref)
        stack.extend((v, depth + 1) for v in value.values() if isinstance(v, list | Mapping))
    return refs


def legacy_sees(case: Case, fence: TaintFence = FENCE) -> bool:
    """Whether the fence as it was saw the case's call (the gateway read the body's calls)."""
    return any(legacy_taints(fence, *ref) for ref in legacy_body_refs(case.body()))
