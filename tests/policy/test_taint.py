"""The taint fence: matching, scanning transcripts, sticky taint and configuration."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factrail.core.model import Message, ToolUse
from factrail.policy.taint import (
    DEFAULT_TAINT_SKILLS,
    DEFAULT_TAINT_TOOLS,
    EARLIER_SAMPLE,
    TaintFence,
    TaintScan,
    ToolRef,
    body_refs,
    merge_taint,
    taint_write,
    tool_refs,
)

EMAIL = "mcp__email-gateway__ask_email"
FENCE = TaintFence()
TAINTED = TaintScan(True, 1, (EMAIL,))

# -- matching -----------------------------------------------------------------------------------


def test_defaults() -> None:
    """The default fence is the e-mail gateway, Gmail and the email-search skill."""
    assert DEFAULT_TAINT_TOOLS == ("mcp__email-gateway__", "mcp__claude_ai_Gmail__")
    assert DEFAULT_TAINT_SKILLS == ("email-search",)
    assert TaintFence() == TaintFence(DEFAULT_TAINT_TOOLS, DEFAULT_TAINT_SKILLS)
    assert FENCE.names == (*DEFAULT_TAINT_TOOLS, *DEFAULT_TAINT_SKILLS)


@pytest.mark.parametrize(
    "tool",
    [
        EMAIL,
        "mcp__email-gateway__fetch_email_raw",
        "mcp__email-gateway__",
        "mcp__claude_ai_Gmail__authenticate",
    ],
)
def test_default_fence_taints_email_tools(tool: str) -> None:
    """Any tool starting with a fenced prefix is fenced."""
    assert FENCE.taints(tool)


@pytest.mark.parametrize(
    "tool",
    [
        "Read",
        "Bash",
        "mcp__claude-flow__memory_search",
        "email",
        "mcp__myemail-gateway__y",  # `email` does not start a token
        "mcp__github__search",
        "",
    ],
)
def test_clean_tools(tool: str) -> None:
    """Other tools and other servers are clean."""
    assert not FENCE.taints(tool)


@pytest.mark.parametrize(
    "tool",
    ["mcp__other__mcp__email-gateway__x", "mcp__email-gatewayx__y", "mcp__my-email-gateway-2__y"],
)
def test_a_fenced_server_anywhere_in_a_name_fences_it(tool: str) -> None:
    """The fence reads more rather than less: a name that holds a fenced server where a
    token starts is fenced (a false match fences a session; a miss would leak it)."""
    assert FENCE.taints(tool)


def test_skill_calls() -> None:
    """A `Skill` call of a fenced skill, by exact or plugin-qualified name."""
    assert FENCE.taints("Skill", "email-search")
    assert FENCE.taints("Skill", "agentbox:email-search")
    assert not FENCE.taints("Skill", "diagrams-as-code")
    assert not FENCE.taints("Skill", None)
    assert not FENCE.taints("Skill", "")
    assert not FENCE.taints("Other", "email-search")  # only the Skill tool loads skills
    assert FENCE.taints("skill", "email-search")  # any case


@pytest.mark.parametrize(
    ("name", "fenced"),
    [
        ("email-search", True),
        ("agentbox:email-search", True),
        ("a:b:email-search", True),
        ("email-search-extra", True),  # reads more: the skill's tokens anywhere
        ("my-email-search", True),  # a qualifier in any spelling (reads more)
        ("agentbox.Email_Search", True),
        ("email-search:agentbox", True),
        ("email-search@team-market", True),
        ("Email Search", True),
        ("/email-search invoices", True),
        ("myemail-search", False),  # `email` does not start a token
        ("email-research", False),
        ("", False),
        (None, False),
    ],
)
def test_skill_taints(name: str | None, fenced: bool) -> None:
    """The skill's tokens where a token of the name starts: qualified, with a marketplace, as
    a display name or a slash command; not inside a token."""
    assert FENCE.skill_taints(name) is fenced


def test_empty_entries_fence_nothing() -> None:
    """An empty fence, or one of empty names, matches nothing (not every tool)."""
    for fence in (TaintFence((), ()), TaintFence(("",), ("",))):
        assert not fence.taints(EMAIL)
        assert not fence.taints("Read")
        assert not fence.taints("Skill", "email-search")
        assert not fence.skill_taints(":")


# -- scanning -----------------------------------------------------------------------------------


def test_scan_counts_and_samples() -> None:
    """Every fenced call counts; the sample is the first three distinct fenced tools."""
    clean = [ToolRef("Read")] * 100
    assert FENCE.scan(clean) == TaintScan()
    assert FENCE.scan([]) == TaintScan()
    assert FENCE.scan([*clean[:50], ToolRef(EMAIL), *clean[50:]]) == TAINTED
    assert FENCE.scan([*clean, ToolRef("Skill", "email-search")]) == TaintScan(True, 1, ("Skill",))
    a, b, c, d = (f"mcp__email-gateway__{n}" for n in "abcd")
    five = FENCE.scan([ToolRef(t) for t in (a, a, b, "Read", c, d)])
    assert five == TaintScan(True, 5, (a, b, c))
    assert not five.sticky


def test_detail() -> None:
    """The verdict detail: the count and the sample."""
    assert TAINTED.detail == f"1 call(s): {EMAIL}"
    assert TaintScan(True, 5, ("a", "b", "c")).detail == "5 call(s): a, b, c"


@given(st.lists(st.sampled_from(["Read", EMAIL, "mcp__email-gateway__x", "Skill", "Bash"])))
def test_scan_counts_exactly_the_fenced_calls(tools: list[str]) -> None:
    """count = the number of fenced refs; the sample is distinct, ≤ 3, and all fenced."""
    scan = FENCE.scan(ToolRef(t, "email-search" if t == "Skill" else None) for t in tools)
    fenced = [t for t in tools if t not in ("Read", "Bash")]
    assert scan.count == len(fenced)
    assert scan.tainted == bool(fenced)
    assert list(scan.sample) == list(dict.fromkeys(fenced))[:3]


def test_tool_refs_from_messages() -> None:
    """Tool uses in order; a Skill's skill from `input.skill`, else `input.name`."""
    messages = [
        Message(
            "assistant",
            tool_uses=[
                ToolUse("u1", "Read", {"file_path": "a.py", "skill": "email-search"}),
                ToolUse("u2", "Skill", {"skill": "email-search"}),
                ToolUse("u3", "Skill", {"name": "diagrams-as-code"}),
                ToolUse("u4", "Skill", {"skill": 5, "name": "email-search"}),
                ToolUse("u5", "Skill", {"skill": "", "name": "x"}),
                ToolUse("u6", "Skill", {"skill": ["email-search"]}),
                ToolUse("u7", "Skill", {}),
            ],
        ),
    ]
    assert tool_refs(messages) == [
        ToolRef("Read", None),
        ToolRef("Skill", "email-search"),
        ToolRef("Skill", "diagrams-as-code"),
        ToolRef("Skill", "email-search"),
        ToolRef("Skill", "x"),
        ToolRef("Skill", None),
        ToolRef("Skill", None),
    ]
    # reads more: the fenced skill's name anywhere in a call's input fences it (u1, u6)
    assert FENCE.scan(tool_refs(messages)) == TaintScan(True, 4, ("Read", "Skill"))


def test_slash_commands_in_user_turns() -> None:
    """`<command-name>/skill</command-name>` in a user turn, or a user turn that starts with
    `/skill`, is a Skill reference."""
    messages = [
        Message("user", "<command-name>/agentbox:email-search</command-name> find invoices"),
        Message("user", "<command-name>review</command-name><command-name>/b</command-name>"),
        Message("assistant", "<command-name>/email-search</command-name>"),  # not a user turn
        Message("user", "<command-name>/two words</command-name> <command-name></command-name>"),
        Message("user", "/email-search typed without the tags"),
    ]
    assert tool_refs(messages) == [
        ToolRef("Skill", "/agentbox:email-search"),
        ToolRef("Skill", "review"),
        ToolRef("Skill", "/b"),
        ToolRef("Skill", "/two words"),
        ToolRef("Skill", "/email-search"),
    ]
    assert FENCE.scan(tool_refs(messages)) == TaintScan(True, 2, ("Skill",))


def test_a_user_command_precedes_the_turns_tool_uses() -> None:
    """A user turn's command comes before any tool use in the same message."""
    turn = Message(
        "user",
        "<command-name>/email-search</command-name>",
        tool_uses=[ToolUse("u1", "Read", {})],
    )
    assert tool_refs([turn]) == [ToolRef("Skill", "/email-search"), ToolRef("Read")]


# -- sticky taint -------------------------------------------------------------------------------


def test_sticky_taint_survives_a_clean_scan() -> None:
    """A stored taint turns a clean scan into a sticky tainted one."""
    record = {"tainted": True, "count": 2, "sample": [EMAIL], "at": 5}
    assert merge_taint(record, TaintScan()) == TaintScan(True, 2, (EMAIL,), sticky=True)


def test_a_tainted_scan_wins_over_the_record() -> None:
    """A fresh tainted scan is returned as is (not sticky), whatever is stored."""
    fresh = TaintScan(True, 3, ("x",))
    for record in (None, {"tainted": True, "count": 9, "sample": ["y"]}, "garbage"):
        assert merge_taint(record, fresh) is fresh


@pytest.mark.parametrize(
    "record",
    [None, {}, {"tainted": False}, {"tainted": "true"}, {"tainted": 1}, "garbage", [1], 3],
)
def test_only_a_json_true_record_is_sticky(record: Any) -> None:
    """Anything but an object with `tainted: true` leaves a clean scan clean."""
    clean = TaintScan()
    assert merge_taint(record, clean) == clean
    assert taint_write(record, TAINTED, 7) is not None  # nor does it block the first write


@pytest.mark.parametrize(
    ("stored", "count", "sample"),
    [
        ({}, 1, (EARLIER_SAMPLE,)),
        ({"count": 4, "sample": ["a", "b", "c", "d"]}, 4, ("a", "b", "c")),
        ({"count": 2.9, "sample": [7, None]}, 2, ("7", "None")),
        ({"count": 0.5}, 1, (EARLIER_SAMPLE,)),
        ({"count": 0}, 1, (EARLIER_SAMPLE,)),
        ({"count": -3}, 1, (EARLIER_SAMPLE,)),
        ({"count": "4"}, 1, (EARLIER_SAMPLE,)),
        ({"count": 2**63}, 1, (EARLIER_SAMPLE,)),
        ({"count": float("nan")}, 1, (EARLIER_SAMPLE,)),
        ({"count": float("inf")}, 1, (EARLIER_SAMPLE,)),
        ({"sample": []}, 1, (EARLIER_SAMPLE,)),
        ({"sample": "abc"}, 1, (EARLIER_SAMPLE,)),
        ({"sample": {"a": 1}}, 1, (EARLIER_SAMPLE,)),
    ],
)
def test_malformed_stored_records(
    stored: dict[str, Any], count: int, sample: tuple[str, ...]
) -> None:
    """A stored count outside [1, 2**63) reads as 1; a missing or empty sample as a placeholder."""
    merged = merge_taint({"tainted": True, **stored}, TaintScan())
    assert merged == TaintScan(True, count, sample, sticky=True)


def test_taint_write_only_on_the_first_tainted_scan() -> None:
    """The first tainted scan is stored with its time; later ones keep the first record."""
    scan = TaintScan(True, 2, (EMAIL, "Skill"))
    record = taint_write(None, scan, 7)
    assert record == {"v": 2, "tainted": True, "count": 2, "sample": [EMAIL, "Skill"], "at": 7}
    assert taint_write(record, scan, 9) is None
    assert taint_write(record, TaintScan(True, 5, ("z",)), 9) is None
    assert taint_write(None, TaintScan(), 7) is None
    assert taint_write(record, TaintScan(), 7) is None


def test_a_written_record_round_trips() -> None:
    """What taint_write stores, merge_taint reads back as the same taint, sticky."""
    scan = TaintScan(True, 5, ("a", "b", "c"))
    record = taint_write(None, scan, 1)
    assert merge_taint(record, TaintScan()) == TaintScan(True, 5, ("a", "b", "c"), sticky=True)


# -- configuration ------------------------------------------------------------------------------


def test_configured_adds_to_the_defaults() -> None:
    """The operator's entries extend the defaults, which stay fenced."""
    fence = TaintFence.configured(["mcp__codebase-memory__"], ["secrets"])
    assert fence.tools == (*DEFAULT_TAINT_TOOLS, "mcp__codebase-memory__")
    assert fence.skills == (*DEFAULT_TAINT_SKILLS, "secrets")
    assert fence.taints(EMAIL)
    assert fence.taints("mcp__codebase-memory__search_graph")
    assert fence.taints("Skill", "vault:secrets")
    assert fence.taints("Skill", "email-search")


def test_configured_can_replace_the_defaults() -> None:
    """With replace_defaults only the operator's entries are fenced."""
    fence = TaintFence.configured(["mcp__x__"], ["secrets"], replace_defaults=True)
    assert fence == TaintFence(("mcp__x__",), ("secrets",))
    assert fence.taints("mcp__x__y")
    assert not fence.taints(EMAIL)
    assert not fence.taints("Skill", "email-search")
    assert TaintFence.configured([], [], replace_defaults=True).names == ()


def test_configured_drops_empty_names_and_duplicates() -> None:
    """Empty names and repeats are dropped, first occurrence order kept."""
    fence = TaintFence.configured(
        ["", "mcp__email-gateway__", "mcp__x__", "mcp__x__"], ["", "b", "email-search", "b"]
    )
    assert fence.tools == (*DEFAULT_TAINT_TOOLS, "mcp__x__")
    assert fence.skills == ("email-search", "b")
    assert fence.names == (*DEFAULT_TAINT_TOOLS, "mcp__x__", "email-search", "b")
    assert TaintFence.configured([], []) == FENCE
    replaced = TaintFence.configured(["", "a", "a"], ["", ""], replace_defaults=True)
    assert replaced == TaintFence(("a",), ())
    assert not replaced.taints("Read")  # a dropped empty prefix does not fence everything


def test_configured_accepts_any_iterable() -> None:
    """Generators and tuples work as well as lists."""
    fence = TaintFence.configured((t for t in ["mcp__y__"]), ("s",), replace_defaults=True)
    assert fence.names == ("mcp__y__", "s")


# -- one matcher for every spelling ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "skill", "server"),
    [
        ("mcp__Email-Gateway__ask_email", None, None),
        ("mcp__email_gateway__ask_email", None, None),
        ("MCP__EMAIL-GATEWAY__ask_email", None, None),
        ("mcp__email-gateway", None, None),
        ("email-gateway__ask_email", None, None),  # Codex and Gemini CLI name MCP tools so
        ("mcp__plugin_mail_email-gateway__ask", None, None),  # Claude Code plugin MCP servers
        ("ask_email", None, "email-gateway"),  # Anthropic mcp_tool_use.server_name
        ("ask_email", None, "Email_Gateway"),  # Responses mcp_call.server_label
        ("", None, "email-gateway"),
        ("Skill", "email-search", None),
        ("Skill", "Email-Search", None),
        ("Skill", "/email-search", None),
        ("Skill", "/email_search some arguments", None),
        ("Skill", "agentbox:email-search", None),
        ("skill", "email-search", None),
        ("SKILL", "plugin/email-search", None),
        ("email-search", None, None),  # a skill exposed as a tool
        ("mcp__claude_ai_gmail__search", None, None),
    ],
)
def test_every_spelling_of_a_fenced_name_is_fenced(
    tool: str, skill: str | None, server: str | None
) -> None:
    """Case-folded, `-` and `_` alike, the server wherever the formats put it, skills by any of
    their spellings."""
    assert FENCE.taints(tool, skill, server)


def test_operator_entries_of_every_form() -> None:
    """A bare server name, `<server>__` and a tool prefix under a server all fence."""
    fence = TaintFence.configured(["crm", "billing__", "mcp__vault__read_"], [])
    assert fence.taints("mcp__CRM__lookup")
    assert fence.taints("crm__lookup")
    assert fence.taints("crm-export")  # a plain-name prefix too
    assert fence.taints("mcp__billing__x")
    assert fence.taints("mcp__vault__read_secret")
    assert not fence.taints("mcp__vault__list")
    assert not fence.taints("mcp__other__lookup")


def _decoded(body: dict[str, Any]) -> list[ToolRef]:
    return body_refs(body)


def test_body_refs_read_every_wire_format() -> None:
    """Chat tool calls, Anthropic tool_use and mcp_tool_use, Responses function_call and
    mcp_call: every call of a decoded body, and no tool declaration."""
    chat = {
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "Skill", "arguments": '{"command": "/email-search"}'},
                    }
                ],
            }
        ],
        "tools": [{"type": "function", "function": {"name": EMAIL, "parameters": {}}}],
    }
    assert _decoded(chat) == [ToolRef("Skill", "/email-search")]
    anthropic = {
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {}},
                    {
                        "type": "mcp_tool_use",
                        "id": "t2",
                        "name": "ask",
                        "server_name": "email-gateway",
                        "input": {},
                    },
                ],
            }
        ],
        "tools": [{"name": EMAIL, "input_schema": {}}],
        "mcp_servers": [{"name": "email-gateway", "type": "url", "url": "https://x"}],
    }
    assert _decoded(anthropic) == [ToolRef("Read"), ToolRef("ask", None, "email-gateway")]
    responses = {
        "input": [
            {"type": "function_call", "name": "Skill", "arguments": '{"name": "email-search"}'},
            {"type": "mcp_call", "name": "ask", "server_label": "email-gateway", "arguments": "{}"},
            {"type": "mcp_list_tools", "server_label": "email-gateway", "tools": []},
        ],
        "tools": [{"type": "mcp", "server_label": "email-gateway"}],
    }
    assert _decoded(responses) == [
        ToolRef("Skill", "email-search"),
        ToolRef("ask", None, "email-gateway"),
    ]
    for body in (chat, anthropic, responses):
        assert FENCE.scan(_decoded(body)).tainted


def test_body_refs_stop_at_the_depth_bound() -> None:
    """A hostile body nested past the bound is walked without recursion, and its depths past
    the bound are not read."""
    deep: Any = {"type": "tool_use", "name": EMAIL, "input": {}}
    for _ in range(5000):
        deep = [deep]
    assert body_refs({"messages": deep}) == []
    shallow: Any = {"type": "tool_use", "name": EMAIL, "input": {}}
    for _ in range(10):
        shallow = [shallow]
    assert body_refs({"messages": shallow}) == [ToolRef(EMAIL)]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"name": "mcp__Email-Gateway__x"}',
        b'{"name": "mcp__\\u0065mail-gateway__x"}',
        b'{"name": "mcp__EMAIL_GATEWAY__x"}',
        b'{"skill": "/Email-Search"}',
        b'{"name": "mcp__\\u0065mail-gateway__x", "broken": ',  # undecodable: may hold anything
    ],
)
def test_the_byte_precheck_sees_every_spelling(raw: bytes) -> None:
    """The gateway's byte pre-check never lets a fenced spelling skip the scan."""
    assert FENCE.may_call(raw)


def test_the_byte_precheck_passes_clean_bodies() -> None:
    assert not FENCE.may_call(b'{"messages": [{"role": "user", "content": "hello \\u00e9"}]}')
    assert not TaintFence((), ()).may_call(b'{"name": "mcp__email-gateway__x"}')
