"""The fence reads more, never less: rules, not a list of spellings.

The rules (`factrail.policy.taint`): a name is folded once (NFKC, format characters dropped,
look-alike letters of other scripts read as the Latin letter, escapes decoded); a call is
every mapping shaped like one, read whole but for its result (every key and string, JSON
decoded a few levels deep, raw text tokenised); a text holding tool-invocation markup is a
call; a skill is fenced by its tokens anywhere; a body forwarded unread is still read; a head
is one identity whatever the wire format. Each test below uses spellings and shapes of its
own: the rules, not the cases they were made from, must cover them. The byte pre-check
`may_call` holds whenever the scan fences (a property over random bodies), and the same
shapes with an unfenced server or skill stay clean.
"""

from __future__ import annotations

import gzip
import json
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factrail.core.formats import anthropic, hook, openai_chat, responses
from factrail.core.formats.base import Document
from factrail.hook.fence import request_refs
from factrail.policy.names import fold, tokens, unescape
from factrail.policy.provenance import body_calls
from factrail.policy.taint import TaintFence, body_refs, tool_refs
from factrail.session.fencing import fence_unread
from factrail.session.keys import alias_keys, header_key, session_key
from factrail.stores.memory_state import MemoryStateStore
from tests.test_fence_wire import PLAIN, Call, Gateway, build, send

FENCE = TaintFence()
OPERATOR = TaintFence.configured(["mcp__vault__read_"], [])
CLEAN_SERVER, CLEAN_SKILL = "calendar-sync", "release-notes"

# -- helpers -------------------------------------------------------------------------------------


def _chat(name: str, args: Any) -> dict[str, Any]:
    arguments = args if isinstance(args, str) else json.dumps(args)
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
    return {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "Tidy the inbox."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "3 threads"}]}  # fmt: skip


def _responses(name: str) -> dict[str, Any]:
    return {"model": "gpt-4o", "input": [
        {"type": "message", "role": "user", "content": "Tidy the inbox."},
        {"type": "function_call", "call_id": "c1", "name": name, "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "3 threads"}]}  # fmt: skip


def _anthropic(name: str) -> dict[str, Any]:
    use = {"type": "tool_use", "id": "t1", "name": name, "input": {"q": "invoices"}}
    return {"model": "claude-x", "messages": [
        {"role": "user", "content": "Tidy the inbox."},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "3 threads"}]}]}  # fmt: skip


def _document(body: dict[str, Any]) -> list[Any]:
    if "input" in body:
        return responses.parse(body["input"]).messages
    if body.get("model") == "claude-x":
        return anthropic.parse(body["messages"], None).messages
    if "messages" in body and all("role" in m for m in body["messages"]):
        try:
            return openai_chat.parse(body["messages"]).messages
        except Exception:
            return []
    return []


def _assert_fenced(body: dict[str, Any]) -> None:
    assert FENCE.scan(body_refs(body)).tainted, body
    assert FENCE.scan(body_calls(body, _document(body))).tainted, body
    assert FENCE.may_call(orjson.dumps(body)), body
    assert FENCE.may_call(json.dumps(body).encode()), body


def _assert_clean(body: dict[str, Any]) -> None:
    assert not FENCE.scan(body_calls(body, _document(body))).tainted, body


# -- one normalisation --------------------------------------------------------------------------

NAMES = [
    "mcp__\u0435m\u0430il-gateway__search",  # Cyrillic e and a
    "mcp__email-g\u03b1\u03c4eway__x",  # Greek alpha and tau
    "claude_ai_Gma\u0456l__list",  # Cyrillic i
    "mcp__\u1d07\u1d0d\u1d00\u026a\u029f-gateway__x",  # small capitals
    "\u13acMAIL-GATEWAY.search",  # a Cherokee capital
    "\U0001f174\U0001f17c\U0001f170\U0001f178\U0001f17b-gateway__x",  # negative squared
    "mcp__emai1-gateway__x",  # digit one for l
    "EmaiI_Gateway__x",  # capital I for l
    "MCP::\u0415MAIL\u00b7GATEWAY::SEARCH",  # Cyrillic capital, middle dot
    "mcp__&#x65;mail-gateway__x",  # an HTML entity
    "mcp__email&hyphen;gateway__x",
    "mcp__\\x65mail-gateway__x",  # a C escape, kept as text
    "mcp__email%252Dgateway__x",  # percent-encoded twice
    "mcp__%65%6D%61%69%6C-gateway__x",
    "functions.multi_tool_use.mcp__email-gateway__x",
]
CLEAN_NAMES = [
    "mcp__calendar-sync__list_events",
    "mcp__myemail-gateway__x",  # `email` does not start a token
    "mcp__email__send",
    "email-research",
    "\u0435mail",  # a look-alike of a word, not of an entry
]


@pytest.mark.parametrize("name", NAMES)
def test_every_spelling_of_a_fenced_name_is_fenced_in_every_format(name: str) -> None:
    for body in (_chat(name, {"q": "invoices"}), _responses(name), _anthropic(name)):
        _assert_fenced(body)


@pytest.mark.parametrize("name", CLEAN_NAMES)
def test_other_names_stay_clean(name: str) -> None:
    for body in (_chat(name, {"q": "invoices"}), _responses(name), _anthropic(name)):
        _assert_clean(body)


def test_look_alikes_fold_to_latin_letters() -> None:
    assert fold("\u0440\u0430\u0443\u0440\u0430l") == "paypal"
    assert tokens("\u039c\u0421\u0420__\u0131x") == ("mcp", "ix")
    assert fold("\u0130STANBUL") == "istanbul"
    assert unescape("%2565&amp;#109;\\\\u0061&#x69;\\x6c") == "email"


# -- one call model: a call is read whole ------------------------------------------------------


def _shapes(server: str, skill: str) -> list[tuple[str, dict[str, Any]]]:
    """Shapes the probe set does not hold, naming `server` or `skill` as a client might."""
    skills = f"/home/u/.claude/skills/{skill.title()}/SKILL.md"
    return [
        ("Gemini functionCall, server under serverId",
         {"contents": [{"role": "model", "parts": [
             {"functionCall": {"name": "call_tool", "args": {"serverId": server}}}]}]}),
        ("Bedrock toolUse, server deep in the input",
         {"messages": [{"role": "assistant", "content": [{"toolUse": {
             "toolUseId": "t1", "name": "dispatch",
             "input": {"route": {"x-mcp-server": server}}}}]}]}),
        ("the server as a host name", _chat("call", {"endpoint": {"host": f"{server}.internal"}})),
        ("the server under Server-Label", _chat("invoke", {"Server-Label": server.upper()})),
        ("arguments JSON-encoded three times",
         _chat("use_mcp_tool", json.dumps(json.dumps(json.dumps({"server_name": server}))))),
        ("arguments as TOML", _chat("use_mcp_tool", f'server = "{server}"\ntool = "search"')),
        ("arguments as XML", _chat("use_mcp_tool", f"<server>{server}</server>")),
        ("arguments percent-encoded",
         _chat("call", {"u": "mcp://" + "".join(f"%{ord(c):02X}" for c in server)})),
        ("Hermes <tool_call> markup in assistant text",
         {"messages": [{"role": "assistant",
                        "content": f'<tool_call>{{"name": "mcp__{server}__x"}}</tool_call>'}]}),
        ("DeepSeek call tokens in assistant text",
         {"messages": [{"role": "assistant", "content":
                        f"<\uff5ctool\u2581call\u2581begin\uff5c>function<\uff5ctool\u2581sep\uff5c>"
                        f"{server}_search"}]}),
        ("Llama <function=...> markup",
         {"messages": [{"role": "assistant", "content": f"<function={server}.search>{{}}"}]}),
        ("a zero-width character inside the tag",
         {"messages": [{"role": "assistant",
                        "content": f'<inv\u200boke name="mcp__{server}__x"></invoke>'}]}),
        ("HTML-escaped markup in a tool result",
         {"messages": [{"role": "tool", "tool_call_id": "c",
                        "content": f"&lt;invoke name=&quot;mcp__{server}__x&quot;&gt;"}]}),
        ("custom_tool_call_output carrying the name",
         {"input": [{"type": "custom_tool_call_output", "call_id": "c",
                     "name": f"mcp__{server}__x", "output": "3 threads"}]}),
        ("Skill with skillId", _chat("Skill", {"skillId": skill})),
        ("Skill with an upper-case display name", _chat("Skill", {"Skill": skill.upper()})),
        ("Skill with a version suffix", _chat("Skill", {"skill": skill.replace("-", "_") + "@v2"})),
        ("a Glob of the skill's folder", _chat("Glob", {"pattern": f"**/skills/{skill}/**"})),
        ("a Read of the skill's SKILL.md, title case", _chat("Read", {"file_path": skills})),
    ]  # fmt: skip


@pytest.mark.parametrize("index", range(len(_shapes("s", "k"))))
def test_shapes_no_parser_knows_are_read(index: int) -> None:
    _, fenced = _shapes("email-gateway", "email-search")[index]
    _assert_fenced(fenced)
    _, clean = _shapes(CLEAN_SERVER, CLEAN_SKILL)[index]
    _assert_clean(clean)


def test_an_operator_entry_with_a_tool_prefix_is_read_across_a_calls_texts() -> None:
    """The server in one text and the tool prefix in another still fence the call."""
    nested = _chat("dispatch", {"target": {"server": "Vault", "op": {"tool": "read_secret"}}})
    assert OPERATOR.scan(body_refs(nested)).tainted
    assert not OPERATOR.scan(body_refs(_chat("mcp__vault__list", {"q": 1}))).tainted


def test_a_slash_command_in_any_text_part_of_a_user_turn() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}
    said = [{"type": "text", "text": "see above"}, {"type": "text", "text": "/Email_Search"}]
    parts = [image, *said]
    doc = anthropic.parse([{"role": "user", "content": parts}], None)
    assert FENCE.scan(tool_refs(doc.messages)).tainted
    items = [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "ctx"},
                {"type": "input_text", "text": "/email-search q3"},
            ],
        }
    ]
    assert FENCE.scan(tool_refs(responses.parse(items).messages)).tainted  # fmt: skip
    clean = [{"type": "message", "role": "user", "content": "/release-notes q3"}]
    assert not FENCE.scan(tool_refs(responses.parse(clean).messages)).tainted


# -- the byte pre-check holds whenever the scan fences -----------------------------------------

FRAGMENTS = [
    "email", "gateway", "mail", "e", "gate", "way", "-", "_", "__", "mcp", "claude", "ai",
    "gmail", "search", "skill", "%2D", "%65", "%25", "%", "2D", "\\", "u0065", "x2d", "\\x2d",
    "\\u0065", "&#45;", "&#x65;", "&amp;", "&", "#", ";", "\u0435", "\u0131", "\u1d07",
    "\uff25", "\u200b", "\u0301", " ", "\n", "/", ".", ":", "<", ">", "invoke", "name=", '"',
    "server", "tool", "calendar", "sync", "Email", "GATEWAY", "\u0130", "l", "1", "I",
]  # fmt: skip
KEYS = [
    "name", "type", "arguments", "input", "args", "server_name", "server", "tool", "tool_name",
    "role", "content", "output", "text", "function", "skill", "skill_name", "recipient_name",
    "tool_uses", "id", "namespace", "parameters",
]  # fmt: skip
TYPES = ["tool_use", "function_call", "function_call_output", "message", "text", "mcp_call"]

texts = st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join)


def _values(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.sampled_from(KEYS) | texts
    mapping = st.dictionaries(keys, inner, max_size=4)
    typed = st.builds(lambda m, t: {**m, "type": t}, mapping, st.sampled_from(TYPES))
    encoded = inner.map(lambda v: json.dumps(v))
    return st.lists(inner, max_size=3) | mapping | typed | encoded


bodies = st.recursive(texts, _values, max_leaves=12).map(lambda v: {"messages": [v]})


@settings(max_examples=600, deadline=None, derandomize=True)
@given(bodies)
def test_the_byte_precheck_holds_whenever_the_scan_fences(body: dict[str, Any]) -> None:
    """Random bodies of fenced fragments, escapes, look-alikes and call shapes: whenever the
    body walk and scan fence one, `may_call` says it may hold a fenced call, on the body as
    orjson and as an ASCII-escaping client write it."""
    if FENCE.scan(body_refs(body)).tainted:
        assert FENCE.may_call(orjson.dumps(body)), body
        assert FENCE.may_call(json.dumps(body).encode()), body


def test_the_precheck_and_the_scan_stay_clean_on_clean_bodies() -> None:
    body = _chat("mcp__calendar-sync__list", {"url": "https://x.example/a%20b?c=1&amp;d=2"})
    assert not FENCE.may_call(orjson.dumps(body))
    assert not FENCE.scan(body_refs(body)).tainted


# -- a body forwarded unread is read; a head is one identity across formats --------------------


def test_a_body_only_the_stdlib_reads_is_read_and_its_taint_kept() -> None:
    store = MemoryStateStore()
    body = _chat("mcp__email-gateway__x", {"q": 1})
    raw = orjson.dumps(body)[:-1] + b',"top_p":Infinity}'
    headers = {"x-factrail-session": "abc", "session_id": "codex-1"}

    def read(data: dict[str, Any]) -> Document:
        return openai_chat.parse(data["messages"])

    scan = fence_unread(FENCE, store, raw, headers, read, session_key)
    assert scan.tainted
    assert store.load(header_key("abc")) is not None
    for key in alias_keys(headers, body, read(body), "gpt-4o"):
        loaded = store.load(key)
        assert loaded is not None and loaded.taint is not None
    clean = orjson.dumps(_chat("Read", {"f": 1}))[:-1] + b',"top_p":NaN}'
    assert not fence_unread(FENCE, MemoryStateStore(), clean, headers, read, session_key).tainted


@pytest.mark.parametrize("encoding", ["identity", "gzip", "text/plain"])
def test_a_fenced_turn_forwarded_unread_keeps_the_session_fenced(
    tmp_path: Path, encoding: str
) -> None:
    """A turn the gateway forwards unread (NaN, under gzip, or sent as text/plain) holding a
    fenced call, then the same session without it: no remote judge is asked; the same turns
    without the fenced call reach it."""
    for fenced, local, expect_asked in ((True, False, False), (False, False, True)):
        gateway = Gateway(tmp_path / uuid.uuid4().hex, local)
        gateway.tmp.mkdir()
        client = str(uuid.uuid4())
        call = Call("mcp__email-gateway__search" if fenced else "Grep", {"q": "x"})
        first = f"Tidy the inbox ({client[:8]})."
        raw = orjson.dumps(build("chat", [call], first, client))[:-1] + b',"temperature":NaN}'
        headers = {"x-factrail-session": "h-" + client, "content-type": "application/json"}
        if encoding == "gzip":
            raw, headers["content-encoding"] = gzip.compress(raw), "gzip"
        elif encoding == "text/plain":
            raw, headers["content-type"] = raw.replace(b"NaN", b"0.2"), "text/plain"
        later = orjson.dumps(build("chat", [PLAIN[i % 2] for i in range(9)], first, client))
        with gateway.running() as g:
            assert g.post("/v1/chat/completions", content=raw, headers=headers).status_code == 200
            send(g, "chat", later, "h-" + client)
        assert (gateway.judge_requests > 0) is expect_asked


def test_the_head_is_one_identity_across_wire_formats() -> None:
    system, first = "You are a coding agent.\n", "Fix the build."
    chat: dict[str, Any] = {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": first}],
    }
    resp: dict[str, Any] = {
        "model": "o3",
        "instructions": system.strip(),
        "input": [{"type": "message", "role": "user", "content": f" {first}"}],
    }
    claude: dict[str, Any] = {
        "model": "claude-x",
        "system": [{"type": "text", "text": system}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": first}]}],
    }
    docs = [
        openai_chat.parse(chat["messages"]),
        responses.parse(resp["input"]),
        anthropic.parse(claude["messages"], claude["system"]),
    ]
    keys = [
        {k for k in alias_keys({}, body, doc, str(body["model"])) if k.startswith("f-")}
        for body, doc in zip((chat, resp, claude), docs, strict=True)
    ]
    assert keys[0] and keys[0] == keys[1] == keys[2]


def test_a_taint_follows_the_head_from_chat_to_anthropic(tmp_path: Path) -> None:
    """Tainted on the chat route under one header, continued on the Anthropic route under
    another with the same system text and first message: no remote judge."""
    gateway = Gateway(tmp_path / "g", False)
    gateway.tmp.mkdir()
    client = str(uuid.uuid4())
    first = f"Tidy the inbox ({client[:8]})."
    tainted = build("chat", [Call("mcp__email-gateway__x", {})], first, client)
    later = build("anthropic", [PLAIN[i % 2] for i in range(9)], first, "other")
    later["system"] = "You are a coding agent."
    with gateway.running() as g:
        send(g, "chat", orjson.dumps(tainted), "h-a" + client)
        send(g, "anthropic", orjson.dumps(later), "h-b" + client)
    assert gateway.judge_requests == 0


# -- the hook ------------------------------------------------------------------------------------


def test_hook_messages_and_requests_read_the_server_beside_the_tool() -> None:
    messages = [
        {
            "role": "assistant",
            "text": "",
            "toolUses": [
                {"tool_use_id": "t", "tool": "search", "serverLabel": "Email-Gateway", "input": {}}
            ],
        }
    ]
    assert FENCE.scan(tool_refs(hook.parse(messages).messages)).tainted  # fmt: skip
    request = {"tools": [{"tool": "search", "mcp_server_name": "email_gateway"}]}
    assert FENCE.scan(request_refs(request)).tainted
    skill = {"tools": [{"tool": "Skill", "input": {"skillName": "Email Search"}}]}
    assert FENCE.scan(request_refs(skill)).tainted
    clean = {"tools": [{"tool": "search", "mcp_server_name": CLEAN_SERVER}]}
    assert not FENCE.scan(request_refs(clean)).tainted
