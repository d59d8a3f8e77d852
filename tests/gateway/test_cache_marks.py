"""The frozen zone's cache breakpoint on Anthropic requests: the placing rules, and the marker
through the gateway (scripted and real engine)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx
from fastapi.testclient import TestClient

from factrail.core.formats.base import Document
from factrail.gateway.cache_marks import Anchor, CacheMarks, place_mark
from factrail.gateway.engine import Engine
from factrail.gateway.factory import create_app, default_engine
from factrail.session import TurnResult
from factrail.settings import Settings
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.outputs import OutputStore
from tests.gateway.support import UPSTREAM, ScriptedCompactor, make_client

ANTHROPIC = "http://anthropic.test"
MESSAGES_URL = f"{ANTHROPIC}/v1/messages"
EPHEMERAL = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}
SYSTEM = [{"type": "text", "text": "You are Claude Code.", "cache_control": EPHEMERAL}]
TOOLS = [{"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}}]


def steps(first: int, count: int, lines: int = 40) -> list[dict[str, Any]]:
    """Claude Code style steps: thinking, text and a tool use, then the tool's result."""
    out: list[dict[str, Any]] = []
    for i in range(first, first + count):
        output = [f"tests/test_mod{i}.py::test_case_{j} PASSED [{j}%]" for j in range(lines)]
        output.insert(lines // 2, f"ERROR: assertion failed in module {i}: expected 4{i}1")
        out.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"Step {i}: run it.", "signature": f"c2{i}"},
                    {"type": "text", "text": f"Running step {i}."},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i}",
                        "name": "Bash",
                        "input": {"command": f"pytest tests/test_mod{i}.py -x"},
                    },
                ],
            }
        )
        out.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{i}",
                        "content": "\n".join(output),
                    }
                ],
            }
        )
    return out


def conversation(count: int, mark: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A transcript of `count` steps whose last user message carries the client's marker."""
    prompt: dict[str, Any] = {"type": "text", "text": "Now fix it."}
    if mark is not None:
        prompt["cache_control"] = mark
    return [
        {"role": "user", "content": "Find out why the build fails and fix it."},
        *steps(0, count),
        {"role": "assistant", "content": [{"type": "text", "text": "Module 1 fails."}]},
        {"role": "user", "content": [prompt]},
    ]


def request(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": SYSTEM,
        "tools": TOOLS,
        "messages": messages,
        **extra,
    }


def answer() -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "done"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }


def mark(cache: CacheMarks, *args: Any) -> list[Any] | None:
    """The wire messages `cache` marks (None: forwarded as they are)."""
    return cache.place(*args)[0]


def marks(messages: Sequence[Any]) -> list[tuple[int, int, Any]]:
    """Every (message, block, cache_control) in a message list."""
    return [
        (i, k, block["cache_control"])
        for i, m in enumerate(messages)
        if isinstance(m["content"], list)
        for k, block in enumerate(m["content"])
        if "cache_control" in block
    ]


def settings(**extra: Any) -> Settings:
    values: dict[str, Any] = {
        "upstream_url": UPSTREAM,
        "anthropic_upstream_url": ANTHROPIC,
        "trigger_tokens": 100,
        "max_body_bytes": 1 << 20,
        "record_decisions": False,
        "price_profile": "none",  # compact at the soft line: these tests are not about cost
        **extra,
    }
    return Settings(**values)


# -- the placing rules --------------------------------------------------------------------


def tool_turn(i: int, *extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "Read"}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "x"}, *extra],
        },
    ]


def test_the_marker_goes_on_a_copy_of_the_last_block() -> None:
    messages = [{"role": "user", "content": "go"}, *tool_turn(0, {"type": "text", "text": "note"})]
    snapshot = copy.deepcopy(messages)
    placed = place_mark({}, messages, 2)
    assert placed is not None
    assert (placed.message, placed.block) == (2, 1)
    assert placed.messages[2]["content"][1] == {
        "type": "text",
        "text": "note",
        "cache_control": EPHEMERAL,
    }
    assert placed.messages[2]["content"][0] is messages[2]["content"][0]
    assert placed.messages[0] is messages[0] and placed.messages[1] is messages[1]
    assert messages == snapshot  # the client's objects are untouched
    assert marks(placed.messages) == [(2, 1, EPHEMERAL)]


@pytest.mark.parametrize(
    ("content", "block"),
    [
        (
            [
                {"type": "text", "text": "a"},
                {"type": "thinking", "thinking": "t", "signature": "s"},
            ],
            0,
        ),
        ([{"type": "tool_use", "id": "t"}, {"type": "redacted_thinking", "data": "x"}], 0),
        ([{"type": "image", "source": {}}, {"type": "text", "text": " "}], 0),
        ([{"type": "document", "source": {}}, {"type": "server_tool_use", "id": "s"}], 0),
        ([{"type": "thinking", "thinking": "t"}, {"type": "text", "text": ""}], None),
        ([{"type": "redacted_thinking", "data": "x"}], None),
        ([], None),
    ],
)
def test_blocks_that_cannot_carry_a_marker_are_skipped(
    content: list[dict[str, Any]], block: int | None
) -> None:
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": content}]
    placed = place_mark({}, messages, 1)
    assert (placed.block if placed else None) == block


def test_nothing_is_placed_without_a_frozen_message() -> None:
    messages = [{"role": "user", "content": "go"}, *tool_turn(0)]
    assert place_mark({}, messages, None) is None
    assert place_mark({}, messages, 3) is None
    assert place_mark({}, messages, -1) is None
    assert place_mark({}, messages, 0) is None  # a string content has no block to mark


@pytest.mark.parametrize(
    "message",
    [
        tool_turn(0, {"type": "text", "text": "note", "cache_control": EPHEMERAL})[1],
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t0", "content": "x", "cache_control": HOUR}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t0",
                    "content": [{"type": "text", "text": "x", "cache_control": EPHEMERAL}],
                }
            ],
        },
    ],
)
def test_a_message_the_client_marked_is_left_alone(message: dict[str, Any]) -> None:
    messages = [{"role": "user", "content": "go"}, tool_turn(0)[0], message]
    assert place_mark({}, messages, 2) is None


def test_never_more_than_four_markers() -> None:
    body = {
        "tools": [{"name": "A", "cache_control": EPHEMERAL}, {"name": "B"}],
        "system": [
            {"type": "text", "text": "one", "cache_control": EPHEMERAL},
            {"type": "text", "text": "two", "cache_control": EPHEMERAL},
        ],
    }
    messages = [{"role": "user", "content": "go"}, *tool_turn(0), *tool_turn(1)]
    assert place_mark(body, messages, 2) is not None  # three markers: room for one more
    last = messages[4]["content"][0]
    messages[4] = {"role": "user", "content": [{**last, "cache_control": EPHEMERAL}]}
    assert place_mark(body, messages, 2) is None
    nested = {"type": "text", "text": "x", "cache_control": EPHEMERAL}
    messages[4] = {"role": "user", "content": [{**last, "content": [nested]}]}
    assert place_mark(body, messages, 2) is None  # a marker inside a tool result counts too
    messages[4] = {"role": "user", "content": [last]}
    assert place_mark({**body, "cache_control": EPHEMERAL}, messages, 2) is None  # automatic


@pytest.mark.parametrize(
    ("system", "last", "top", "expected"),
    [
        (None, None, None, EPHEMERAL),
        (EPHEMERAL, EPHEMERAL, None, EPHEMERAL),
        (HOUR, HOUR, None, HOUR),  # Claude Code with the hour-long cache
        (HOUR, EPHEMERAL, None, EPHEMERAL),
        (HOUR, {"type": "ephemeral", "ttl": "5m"}, None, EPHEMERAL),
        (None, HOUR, None, HOUR),
        (HOUR, None, None, EPHEMERAL),
        (EPHEMERAL, HOUR, None, None),  # no TTL fits between them
        ({"type": "ephemeral", "ttl": "5m"}, HOUR, None, None),
        (HOUR, None, HOUR, HOUR),  # automatic caching marks the end
        (None, {"type": "ephemeral", "ttl": "2h"}, None, None),  # a TTL we do not know
        ("ephemeral", None, None, None),
    ],
)
def test_the_ttl_keeps_longer_lived_markers_first(
    system: Any, last: Any, top: Any, expected: dict[str, str] | None
) -> None:
    body: dict[str, Any] = {"system": [{"type": "text", "text": "s"}]}
    if system is not None:
        body["system"][0]["cache_control"] = system
    if top is not None:
        body["cache_control"] = top
    prompt: dict[str, Any] = {"type": "text", "text": "now"}
    if last is not None:
        prompt["cache_control"] = last
    messages = [
        {"role": "user", "content": "go"},
        *tool_turn(0),
        {"role": "user", "content": [prompt]},
    ]
    placed = place_mark(body, messages, 2)
    assert (placed.messages[2]["content"][0]["cache_control"] if placed else None) == expected


def test_automatic_caching_keeps_the_last_message() -> None:
    messages = [{"role": "user", "content": "go"}, *tool_turn(0)]
    assert place_mark({"cache_control": EPHEMERAL}, messages, 2) is None
    assert place_mark({}, messages, 2) is not None


def test_a_compaction_turn_keeps_the_marker_the_provider_holds() -> None:
    cache = CacheMarks()
    turns = [{"role": "user", "content": "go"}, *tool_turn(0), *tool_turn(1), *tool_turn(2)]
    first = mark(cache, "s", "reapplied", {}, turns, 2)
    assert first is not None and marks(first) == [(2, 0, EPHEMERAL)]
    again = mark(cache, "s", "compacted", {}, turns, 6)  # the zone grew: the old end stays
    assert again is not None and marks(again) == [(2, 0, EPHEMERAL)]
    after = mark(cache, "s", "reapplied", {}, turns, 6)  # from the next turn on, the new end
    assert after is not None and marks(after) == [(6, 0, EPHEMERAL)]
    assert marks(mark(cache, "t", "compacted", {}, turns, 6) or []) == [(6, 0, EPHEMERAL)]
    changed = [*turns[:2], *tool_turn(9), *turns[4:]]
    mark(cache, "u", "reapplied", {}, turns, 2)
    moved = mark(cache, "u", "compacted", {}, changed, 6)  # the anchored message changed
    assert moved is not None and marks(moved) == [(6, 0, EPHEMERAL)]


def test_an_anchor_travels_through_the_state_store_as_a_record() -> None:
    anchor = Anchor(6, 1, bytes(range(16)))
    assert Anchor.from_record(anchor.record()) == anchor
    for bad in (None, {}, {"m": 6, "b": 1}, {"m": "6", "b": 1, "f": "00"},
                {"m": 6, "b": 1, "f": "not hex"}):  # fmt: skip
        assert Anchor.from_record(bad) is None
    cache = CacheMarks()
    turns = [{"role": "user", "content": "go"}, *tool_turn(0), *tool_turn(1), *tool_turn(2)]
    stored = cache.place("s", "reapplied", {}, turns, 2)[1]
    assert stored is not None
    other = CacheMarks()  # another worker: the stored anchor, not its own memory, decides
    assert marks(mark(other, "s", "compacted", {}, turns, 6, stored) or []) == [(2, 0, EPHEMERAL)]


def test_switched_off_or_broken_it_forwards_the_messages_as_they_are() -> None:
    turns = [{"role": "user", "content": "go"}, *tool_turn(0)]
    assert mark(CacheMarks(enabled=False), "s", "compacted", {}, turns, 2) is None
    assert mark(CacheMarks(), "s", "compacted", {}, {"not": "a list"}, 2) is None
    unserialisable = [
        *turns[:2],
        {"role": "user", "content": [{"type": "text", "text": "x"}], "x": {1}},
    ]
    assert mark(CacheMarks(), "s", "compacted", {}, unserialisable, 2) is None


# -- through the gateway, with a scripted engine -------------------------------------------


@dataclasses.dataclass
class FrozenCompactor(ScriptedCompactor):
    """The scripted engine, reporting a frozen zone."""

    frozen_through: int | None = None

    async def compact(self, session: str, doc: Document, **asked: Any) -> TurnResult:
        result = await super().compact(session, doc, **asked)
        result.frozen_through = self.frozen_through
        return result


@pytest.fixture
def router() -> respx.MockRouter:
    return respx.MockRouter(assert_all_called=False)


def scripted(router: respx.MockRouter, tmp_path: Path, compactor: FrozenCompactor) -> TestClient:
    return make_client(settings(), router, compactor, OutputStore(tmp_path / "outputs"))


def test_a_compacted_body_gets_the_marker_and_keeps_the_clients(
    router: respx.MockRouter, tmp_path: Path
) -> None:
    route = router.post(MESSAGES_URL).mock(return_value=httpx.Response(200, json=answer()))
    original = request(conversation(3, EPHEMERAL))
    with scripted(router, tmp_path, FrozenCompactor(frozen_through=4)) as c:
        r = c.post("/v1/messages", json=original)
    assert r.headers["x-factrail"] == "compacted"
    sent = orjson.loads(route.calls.last.request.content)
    assert sent["system"] == SYSTEM and sent["tools"] == TOOLS
    assert marks(sent["messages"]) == [(4, 0, EPHEMERAL), (8, 0, EPHEMERAL)]
    assert sent["messages"][4]["content"][0]["content"] == "REDUCED"


def test_a_passthrough_turn_with_a_frozen_zone_is_rewritten_only_by_the_marker(
    router: respx.MockRouter, tmp_path: Path
) -> None:
    route = router.post(MESSAGES_URL).mock(return_value=httpx.Response(200, json=answer()))
    original = request(conversation(3, EPHEMERAL))
    engine = FrozenCompactor(outcome="passthrough", frozen_through=4)
    with scripted(router, tmp_path, engine) as c:
        r = c.post("/v1/messages", json=original)
    assert r.headers["x-factrail"] == "passthrough"  # the outcome the engine reported
    sent = orjson.loads(route.calls.last.request.content)
    expected = copy.deepcopy(original)
    expected["messages"][4]["content"][0]["cache_control"] = EPHEMERAL
    assert sent == expected


def test_four_client_markers_leave_no_room(router: respx.MockRouter, tmp_path: Path) -> None:
    route = router.post(MESSAGES_URL).mock(return_value=httpx.Response(200, json=answer()))
    system = [
        {"type": "text", "text": "You are Claude Code.", "cache_control": EPHEMERAL},
        {"type": "text", "text": "Project notes.", "cache_control": EPHEMERAL},
    ]
    tools = [{**TOOLS[0], "cache_control": EPHEMERAL}]
    original = request(conversation(3, EPHEMERAL), system=system, tools=tools)
    engine = FrozenCompactor(outcome="passthrough", frozen_through=4)
    with scripted(router, tmp_path, engine) as c:
        raw = orjson.dumps(original)
        r = c.post("/v1/messages", content=raw)
    assert r.headers["x-factrail"] == "passthrough"
    assert route.calls.last.request.content == raw


def test_without_a_frozen_zone_the_body_is_forwarded_as_sent(
    router: respx.MockRouter, tmp_path: Path
) -> None:
    route = router.post(MESSAGES_URL).mock(return_value=httpx.Response(200, json=answer()))
    raw = orjson.dumps(request(conversation(3, EPHEMERAL)))
    with scripted(router, tmp_path, FrozenCompactor(outcome="passthrough")) as c:
        r = c.post("/v1/messages", content=raw)
    assert r.headers["x-factrail"] == "passthrough"
    assert route.calls.last.request.content == raw


def test_openai_routes_get_no_marker(router: respx.MockRouter, tmp_path: Path) -> None:
    chat = router.post(f"{UPSTREAM}/chat/completions").mock(
        return_value=httpx.Response(200, json={"choices": []})
    )
    calls: list[dict[str, Any]] = [
        {"id": f"call_{i}", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
        for i in range(3)
    ]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coder."}]
    for i, call in enumerate(calls):
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": f"out {i} " * 50})
    messages.append({"role": "user", "content": "go on"})
    with scripted(router, tmp_path, FrozenCompactor(frozen_through=2)) as c:
        r = c.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": messages})
    assert r.headers["x-factrail"] == "compacted"
    assert b"cache_control" not in chat.calls.last.request.content


# -- through the gateway, with the real engine ----------------------------------------------


class Recording:
    """The real compactor, keeping every turn's result."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.results: list[TurnResult] = []

    async def compact(self, session: str, doc: Document, **asked: Any) -> TurnResult:
        result: TurnResult = await self.inner.compact(session, doc, **asked)
        self.results.append(result)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # observe_usage, transcript_tokens, close


@pytest.fixture
def real(router: respx.MockRouter, tmp_path: Path) -> Iterator[tuple[TestClient, Recording]]:
    recording: list[Recording] = []

    def factory(*args: Any) -> Engine:
        engine = default_engine(*args)
        recording.append(Recording(engine.compactor))
        return dataclasses.replace(engine, compactor=recording[0])

    upstream = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    app = create_app(
        settings(trigger_tokens=1500, preserve_recent=2, outputs_dir=str(tmp_path)),
        client=upstream,
        state=MemoryStateStore(),
        engine_factory=factory,
    )
    with TestClient(app) as c:
        yield c, recording[0]


def send(
    c: TestClient, route: respx.Route, messages: list[dict[str, Any]]
) -> tuple[str, dict[str, Any]]:
    r = c.post("/v1/messages", json=request(messages), headers={"x-factrail-session": "cc"})
    assert r.status_code == 200
    sent: dict[str, Any] = orjson.loads(route.calls.last.request.content)
    return r.headers["x-factrail"], sent


def added(sent: list[dict[str, Any]], client: list[dict[str, Any]]) -> list[tuple[int, int, Any]]:
    """The markers in `sent` that the client did not send."""
    return [m for m in marks(sent) if m not in marks(client)]


def test_real_compaction_marks_the_end_of_the_frozen_zone(
    router: respx.MockRouter, real: tuple[TestClient, Recording]
) -> None:
    route = router.post(MESSAGES_URL).mock(return_value=httpx.Response(200, json=answer()))
    c, engine = real
    turn1 = conversation(12, EPHEMERAL)
    outcome, sent = send(c, route, turn1)
    assert outcome == "compacted"
    frozen = engine.results[-1].frozen_through
    assert frozen is not None and 0 < frozen < len(turn1) - 1
    assert added(sent["messages"], turn1) == [(frozen, 0, EPHEMERAL)]
    assert sent["messages"][frozen]["content"][0]["type"] == "tool_result"
    assert marks(sent["messages"])[-1] == (len(turn1) - 1, 0, EPHEMERAL)  # the client's, kept
    assert sent["system"] == SYSTEM and sent["tools"] == TOOLS
    for m in sent["messages"]:
        for block in m["content"] if isinstance(m["content"], list) else []:
            assert (
                block["type"] not in ("thinking", "redacted_thinking")
                or "cache_control" not in block
            )

    # The next turn: the client moves its own marker to its new last message; the frozen zone
    # has not moved, so the marker is where it was and everything before the old last message
    # is byte for byte what the provider cached.
    turn2 = [*conversation(12), *steps(12, 1)]
    turn2[-1]["content"].append({"type": "text", "text": "Go on.", "cache_control": EPHEMERAL})
    outcome2, sent2 = send(c, route, turn2)
    assert outcome2 == "reapplied"
    assert engine.results[-1].frozen_through == frozen
    assert added(sent2["messages"], turn2) == [(frozen, 0, EPHEMERAL)]
    prefix = len(turn1) - 1
    assert orjson.dumps(sent2["messages"][:prefix]) == orjson.dumps(sent["messages"][:prefix])


def grow(
    c: TestClient, route: respx.Route, counts: range
) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """The conversation sent at each count of steps until a turn compacts: each turn's outcome,
    what the upstream got and what the client sent."""
    turns = []
    for count in counts:
        turn = conversation(count, EPHEMERAL)
        outcome, sent = send(c, route, turn)
        turns.append((outcome, sent, turn))
        if outcome == "compacted":
            break
    return turns


def test_real_compactions_read_the_prefix_the_last_marker_cached(
    router: respx.MockRouter, real: tuple[TestClient, Recording]
) -> None:
    route = router.post(MESSAGES_URL).mock(return_value=httpx.Response(200, json=answer()))
    c, engine = real
    assert send(c, route, conversation(12, EPHEMERAL))[0] == "compacted"
    first = engine.results[-1].frozen_through
    *between, (outcome, sent, turn) = grow(c, route, range(13, 40))  # until the next compaction
    for passed, upstream, client in between:
        assert passed == "reapplied"
        assert added(upstream["messages"], client) == [(first, 0, EPHEMERAL)]
    assert outcome == "compacted"
    later = engine.results[-1].frozen_through
    assert first is not None and later is not None and later > first
    assert added(sent["messages"], turn) == [(first, 0, EPHEMERAL)]  # what is cached
    outcome, sent = send(c, route, turn)  # the same turn again, now under the soft line
    assert outcome == "reapplied" and engine.results[-1].frozen_through == later
    assert added(sent["messages"], turn) == [(later, 0, EPHEMERAL)]  # from now on, the new end


def test_a_compaction_on_another_worker_marks_the_prefix_the_provider_holds(
    router: respx.MockRouter, tmp_path: Path
) -> None:
    """Two workers share the state store; the session's next compaction runs on the one that
    never saw it. It finds where the other put the marker (the prefix the provider holds) and
    keeps it there, as one worker alone does."""
    route = router.post(MESSAGES_URL).mock(return_value=httpx.Response(200, json=answer()))

    def worker(store: MemoryStateStore) -> TestClient:
        upstream = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
        config = settings(trigger_tokens=1500, preserve_recent=2, outputs_dir=str(tmp_path))
        app = create_app(config, client=upstream, state=store, engine_factory=default_engine)
        return TestClient(app)

    with worker(MemoryStateStore()) as alone:  # which turn compacts next
        assert send(alone, route, conversation(12, EPHEMERAL))[0] == "compacted"
        turns = grow(alone, route, range(13, 40))
        assert turns[-1][0] == "compacted" and len(turns) > 1
    shared = MemoryStateStore()
    with worker(shared) as a, worker(shared) as b:
        assert send(a, route, conversation(12, EPHEMERAL))[0] == "compacted"
        *_, (outcome, sent, turn) = grow(a, route, range(13, 12 + len(turns)))
        assert outcome == "reapplied"  # the turn before the compaction, on worker a
        held = added(sent["messages"], turn)
        assert len(held) == 1
        last = turns[-1][2]
        outcome, sent = send(b, route, last)
        assert outcome == "compacted"
        assert added(sent["messages"], last) == held


def test_before_the_first_compaction_the_head_is_marked_once_it_is_in_sight(
    router: respx.MockRouter, real: tuple[TestClient, Recording]
) -> None:
    """Far from the trigger the body goes as the client sent it; past half of it the marker
    goes on the head that no compaction changes (here the first call, whose result is next),
    and the first compaction keeps it there: the provider reads the head from its cache."""
    route = router.post(MESSAGES_URL).mock(return_value=httpx.Response(200, json=answer()))
    c, engine = real
    head = (1, 2, EPHEMERAL)  # the first assistant message's tool_use block
    small = [*conversation(0)[:1], *steps(0, 1, lines=5), *conversation(0, EPHEMERAL)[-1:]]
    outcome, sent = send(c, route, small)  # a tenth of the trigger, a call in its head
    assert outcome == "passthrough" and sent == request(small)  # as the client sent it
    marked: list[list[tuple[int, int, Any]]] = []
    *between, (outcome, sent, turn) = grow(c, route, range(1, 40))  # until the first compaction
    for passed, upstream, client in between:
        assert passed == "passthrough"
        assert upstream == request(client) or added(upstream["messages"], client) == [head]
        marked.append(added(upstream["messages"], client))
    assert outcome == "compacted"
    assert added(sent["messages"], turn) == [head]
    since = marked.index([head])
    assert all(m == [head] for m in marked[since:])  # and from then on, the same marker
    frozen = engine.results[-1].frozen_through
    assert frozen is not None and frozen > head[0]
