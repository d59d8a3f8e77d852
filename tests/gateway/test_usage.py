"""The upstream's own usage, read on the way past in every wire format, streamed or not, and
what the gateway makes of it: input tokens by kind, calibration, cache breaks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import orjson
import pytest
import respx
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from factrail.gateway.sessions import bill
from factrail.gateway.usage import Usage
from factrail.policy.cost import ANTHROPIC as ANTHROPIC_PRICES
from factrail.session import TurnResult
from factrail.settings import Settings
from factrail.stores.outputs import OutputStore
from tests.gateway.support import UPSTREAM, ScriptedCompactor, make_client

ANTHROPIC = "http://anthropic.test"
CHAT = f"{UPSTREAM}/chat/completions"
RESPONSES = f"{UPSTREAM}/responses"
MESSAGES = f"{ANTHROPIC}/v1/messages"
SSE = {"content-type": "text/event-stream"}


class Chunks(httpx.AsyncByteStream):
    """An upstream body arriving in the given reads."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def split(stream: bytes, size: int = 7) -> list[bytes]:
    """`stream` in reads of `size` bytes: events and their JSON cut anywhere."""
    return [stream[i : i + size] for i in range(0, len(stream), size)]


def streamed(stream: bytes) -> httpx.Response:
    return httpx.Response(200, headers=SSE, stream=Chunks(split(stream)))


def data(*events: dict[str, Any], done: bool = False) -> bytes:
    lines = [b"data: " + orjson.dumps(e) + b"\n\n" for e in events]
    return b"".join(lines) + (b"data: [DONE]\n\n" if done else b"")


def anthropic_sse(*events: dict[str, Any]) -> bytes:
    return b"".join(
        b"event: " + e["type"].encode() + b"\r\ndata: " + orjson.dumps(e) + b"\r\n\r\n"
        for e in events
    )


def chat(**extra: Any) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "Run the tests please."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "FAILED test_x " * 40},
        {"role": "user", "content": "Fix it."},
    ]
    return {"model": "gpt-4o", "messages": messages, **extra}


def responses_body(**extra: Any) -> dict[str, Any]:
    items = [
        {"role": "user", "content": "Run the tests please."},
        {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "FAILED test_x " * 40},
    ]
    return {"model": "gpt-5", "input": items, **extra}


def anthropic_body(**extra: Any) -> dict[str, Any]:
    messages = [
        {"role": "user", "content": "Run the tests please."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "FAILED test_x " * 40}]},
    ]  # fmt: skip
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages, **extra}


def metric(client: TestClient, name: str, **labels: str) -> float:
    """The value of one sample on `/metrics` (0 when it is not there)."""
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def input_tokens(client: TestClient) -> tuple[float, float, float]:
    name = "factrail_upstream_input_tokens_total"
    return (
        metric(client, name, kind="uncached"),
        metric(client, name, kind="cached"),
        metric(client, name, kind="cache_write"),
    )


@pytest.fixture
def client(
    router: respx.MockRouter, compactor: ScriptedCompactor, outputs: OutputStore
) -> Iterator[TestClient]:
    settings = Settings(
        upstream_url=UPSTREAM,
        anthropic_upstream_url=ANTHROPIC,
        trigger_tokens=100,
        max_body_bytes=64 * 1024,
    )
    with make_client(settings, router, compactor, outputs) as c:
        yield c


CHAT_USAGE = {"prompt_tokens": 1000, "completion_tokens": 5,
              "prompt_tokens_details": {"cached_tokens": 768}}  # fmt: skip
RESPONSES_USAGE = {"input_tokens": 2000, "output_tokens": 9,
                   "input_tokens_details": {"cached_tokens": 1536}}  # fmt: skip
# From the GPT-5.6 family on, OpenAI also reports the tokens it wrote to the cache (at 1.25×).
CHAT_WRITE_USAGE = {"prompt_tokens": 9657, "completion_tokens": 78,
                    "prompt_tokens_details": {"cached_tokens": 0,
                                              "cache_write_tokens": 9654}}  # fmt: skip
RESPONSES_WRITE_USAGE = {"input_tokens": 18014, "output_tokens": 9,
                         "input_tokens_details": {"cache_write_tokens": 2003,
                                                  "cached_tokens": 16008}}  # fmt: skip
ANTHROPIC_USAGE = {"input_tokens": 5, "cache_read_input_tokens": 700,
                   "cache_creation_input_tokens": 40, "output_tokens": 3}  # fmt: skip
RESPONSE = {"id": "resp_1", "object": "response", "status": "completed", "output": []}


def chat_stream(usage: dict[str, Any] | None) -> bytes:
    delta = {"id": "c", "choices": [{"index": 0, "delta": {"content": "Hi"}}]}
    last = [{"id": "c", "choices": [], "usage": usage}] if usage else []
    return data(delta, *last, done=True)


def responses_stream(usage: dict[str, Any] = RESPONSES_USAGE) -> bytes:
    created = {**RESPONSE, "status": "in_progress", "usage": None}
    return data(
        {"type": "response.created", "sequence_number": 0, "response": created},
        {"type": "response.output_text.delta", "sequence_number": 1, "delta": "Hi"},
        {"type": "response.completed", "sequence_number": 2,
         "response": {**RESPONSE, "usage": usage}},
    )  # fmt: skip


def anthropic_stream(delta_usage: dict[str, int]) -> bytes:
    start = {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
             "usage": {"input_tokens": 9, "cache_read_input_tokens": 1000,
                       "cache_creation_input_tokens": 50, "output_tokens": 1}}  # fmt: skip
    return anthropic_sse(
        {"type": "message_start", "message": start},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": delta_usage},
        {"type": "message_stop"},
    )


@pytest.mark.parametrize(
    ("path", "url", "body", "answer", "expected"),
    [
        pytest.param(
            "/v1/chat/completions", CHAT, chat(),
            httpx.Response(200, json={"id": "c", "choices": [], "usage": CHAT_USAGE}),
            (232, 768, 0), id="chat",
        ),
        pytest.param(
            "/v1/chat/completions", CHAT,
            chat(stream=True, stream_options={"include_usage": True}),
            chat_stream(CHAT_USAGE), (232, 768, 0), id="chat-stream",
        ),
        pytest.param(
            "/v1/responses", RESPONSES, responses_body(),
            httpx.Response(200, json={**RESPONSE, "usage": RESPONSES_USAGE}),
            (464, 1536, 0), id="responses",
        ),
        pytest.param(
            "/v1/responses", RESPONSES, responses_body(stream=True),
            responses_stream(), (464, 1536, 0), id="responses-stream",
        ),
        pytest.param(
            "/v1/chat/completions", CHAT,
            chat(stream=True, stream_options={"include_usage": True}),
            chat_stream(CHAT_WRITE_USAGE), (3, 0, 9654), id="chat-stream-cache-write",
        ),
        pytest.param(
            "/v1/responses", RESPONSES, responses_body(),
            httpx.Response(200, json={**RESPONSE, "usage": RESPONSES_WRITE_USAGE}),
            (3, 16008, 2003), id="responses-cache-write",
        ),
        pytest.param(
            "/v1/responses", RESPONSES, responses_body(stream=True),
            responses_stream(RESPONSES_WRITE_USAGE), (3, 16008, 2003),
            id="responses-stream-cache-write",
        ),
        pytest.param(
            "/v1/messages", MESSAGES, anthropic_body(),
            httpx.Response(200, json={"id": "msg_1", "type": "message", "content": [],
                                      "usage": ANTHROPIC_USAGE}),
            (5, 700, 40), id="anthropic",
        ),
        pytest.param(
            "/v1/messages", MESSAGES, anthropic_body(stream=True),
            anthropic_stream({"output_tokens": 4}), (9, 1000, 50),
            id="anthropic-stream",
        ),
        pytest.param(
            "/v1/messages", MESSAGES, anthropic_body(stream=True),
            anthropic_stream({"input_tokens": 9, "cache_read_input_tokens": 1000,
                              "cache_creation_input_tokens": 80, "output_tokens": 4}),
            (9, 1000, 80), id="anthropic-stream-delta-usage",
        ),
    ],
)  # fmt: skip
def test_the_upstreams_usage_is_counted_by_kind_and_calibrates_the_session(
    client: TestClient,
    router: respx.MockRouter,
    compactor: ScriptedCompactor,
    path: str,
    url: str,
    body: dict[str, Any],
    answer: httpx.Response | bytes,
    expected: tuple[int, int, int],
) -> None:
    """A streamed answer (bytes) arrives in 7-byte reads, every event and its JSON cut up."""
    upstream = streamed(answer) if isinstance(answer, bytes) else answer
    router.post(url).mock(return_value=upstream)
    with client.stream("POST", path, json=body) as r:
        relayed = r.read()
        assert r.headers["x-factrail"] == "compacted"
    assert relayed == (answer if isinstance(answer, bytes) else answer.content)
    assert input_tokens(client) == expected
    session = compactor.calls[-1][0]
    assert compactor.usage == [(session, sum(expected), 250)]
    # The scripted step estimates 1000 tokens in, 250 out: 3 removed for every token sent.
    removed = metric(client, "factrail_input_tokens_removed_total")
    assert removed == 3 * sum(expected)


@pytest.mark.parametrize("stream", [False, True])
def test_what_usage_teaches_is_stored_off_the_event_loop(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor, stream: bool
) -> None:
    """The state store's write (SQLite waiting on another worker's lock, Redis on the network)
    never runs on the event loop, which serves every other request and stream meanwhile."""
    body = {"choices": [], "usage": CHAT_USAGE}
    answer = streamed(chat_stream(CHAT_USAGE)) if stream else httpx.Response(200, json=body)
    router.post(CHAT).mock(return_value=answer)
    with client.stream("POST", "/v1/chat/completions", json=chat(stream=stream)) as r:
        r.read()
    assert [u[1] for u in compactor.usage] == [1000]
    assert compactor.threads["observe_usage"] != compactor.threads["compact"]


def test_a_stream_without_usage_counts_nothing_and_leaves_the_estimate_alone(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    router.post(CHAT).mock(return_value=streamed(chat_stream(None)))
    with client.stream("POST", "/v1/chat/completions", json=chat(stream=True)) as r:
        assert r.read() == chat_stream(None)
    assert input_tokens(client) == (0, 0, 0)
    assert compactor.usage == []


def test_the_fast_path_counts_usage_but_knows_no_session(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    usage = {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 0}}
    router.post(CHAT).mock(return_value=httpx.Response(200, json={"usage": usage}))
    r = client.post("/v1/chat/completions", content=b'{"model":"m","messages":[]}')
    assert r.headers["x-factrail"] == "passthrough"
    assert compactor.calls == [] and compactor.usage == []
    assert input_tokens(client) == (10, 0, 0)


def test_pass_through_paths_are_not_counted(client: TestClient, router: respx.MockRouter) -> None:
    router.post(f"{MESSAGES}/count_tokens").mock(
        return_value=httpx.Response(200, json={"input_tokens": 42})
    )
    assert client.post("/v1/messages/count_tokens", json=anthropic_body()).status_code == 200
    assert input_tokens(client) == (0, 0, 0)


def test_a_turn_not_compacted_that_reads_less_cache_is_a_cache_break(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    cached = iter([1000, 500, 100, 2000, 10])

    def answer(_: httpx.Request) -> httpx.Response:
        usage = {"prompt_tokens": 3000, "prompt_tokens_details": {"cached_tokens": next(cached)}}
        return httpx.Response(200, json={"usage": usage})

    router.post(CHAT).mock(side_effect=answer)
    breaks = "factrail_cache_breaks_total"

    def turn(outcome: str, session: str = "one") -> float:
        compactor.outcome = outcome
        r = client.post(
            "/v1/chat/completions", json=chat(), headers={"x-factrail-session": session}
        )
        assert r.headers["x-factrail"] == outcome
        return metric(client, breaks)

    assert turn("passthrough") == 0  # the session's first turn: nothing to compare with
    assert turn("passthrough") == 1  # 1000 → 500 cached, and factrail changed nothing
    assert turn("compacted") == 1  # 500 → 100, but factrail's compaction re-bills the cache
    assert turn("passthrough") == 1  # 100 → 2000
    assert turn("passthrough", session="two") == 1  # another session, seen first


def test_a_cache_break_is_judged_against_the_sessions_previous_turn_on_any_worker(
    settings: Settings, router: respx.MockRouter, outputs: OutputStore
) -> None:
    """Two workers share the state store, and a session's turns alternate between them: each
    turn is compared with the session's previous turn, not with the last one its worker saw
    (which, before a compaction elsewhere, read more than the session now can)."""
    shared = ScriptedCompactor()
    workers = [ScriptedCompactor(state=shared.state), ScriptedCompactor(state=shared.state)]
    cached = iter([1000, 300, 500, 200])

    def answer(_: httpx.Request) -> httpx.Response:
        usage = {"prompt_tokens": 3000, "prompt_tokens_details": {"cached_tokens": next(cached)}}
        return httpx.Response(200, json={"usage": usage})

    router.post(CHAT).mock(side_effect=answer)
    with (
        make_client(settings, router, workers[0], outputs) as a,
        make_client(settings, router, workers[1], outputs) as b,
    ):

        def turn(client: TestClient, worker: ScriptedCompactor, outcome: str) -> None:
            worker.outcome = outcome
            headers = {"x-factrail-session": "s"}
            client.post("/v1/chat/completions", json=chat(), headers=headers)

        turn(a, workers[0], "passthrough")  # 1000
        turn(b, workers[1], "compacted")  # 300: the compaction's own cost, no break
        turn(a, workers[0], "passthrough")  # 500 after 300: no break (A last saw 1000)
        turn(b, workers[1], "passthrough")  # 200 after 500: a break
        assert metric(a, "factrail_cache_breaks_total") == 0
        assert metric(b, "factrail_cache_breaks_total") == 1


def test_a_compaction_turn_measures_how_far_the_providers_cache_reached(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    """On a compaction turn the provider should read the prefix before the first change from
    its cache; what share it read (its reach) goes to the session's state, which prices its
    next compactions on every worker. Measured only on compactions the gate let through on a
    warm cache, from a prefix long enough to be cacheable, and only where the provider says
    what it read."""
    usages = iter([
        {"prompt_tokens": 10_000, "prompt_tokens_details": {"cached_tokens": 2000}},
        {"prompt_tokens": 10_000, "prompt_tokens_details": {"cached_tokens": 0}},
        {"prompt_tokens": 10_000},  # says nothing of its cache
        {"prompt_tokens": 10_000, "prompt_tokens_details": {"cached_tokens": 0}},
        {"prompt_tokens": 10_000, "prompt_tokens_details": {"cached_tokens": 9000}},
        {"prompt_tokens": 10_000, "prompt_tokens_details": {"cached_tokens": 0}},
    ])  # fmt: skip
    router.post(CHAT).mock(side_effect=lambda _: httpx.Response(200, json={"usage": next(usages)}))
    compactor.tokens_after, compactor.invalidated_tokens = 10_000, 2000  # 8000 unchanged

    def turn(outcome: str, decision: str | None) -> None:
        compactor.outcome, compactor.decision = outcome, decision
        r = client.post("/v1/chat/completions", json=chat(), headers={"x-factrail-session": "s"})
        assert r.headers["x-factrail"] == outcome

    turn("compacted", "pays")  # read 2000 of 8000
    turn("passthrough", None)  # a turn that did not compact measures nothing
    turn("compacted", "pays")  # no cache figure: nothing learnt
    turn("compacted", "cold")  # a cold cache reads nothing whatever it could
    turn("compacted", "forced")  # read 9000 of 8000: all of it
    compactor.invalidated_tokens = 7000  # 3000 unchanged: too short to tell
    turn("compacted", "pays")
    assert compactor.reaches == [0.25, None, None, None, 1.0, None]
    name = "factrail_compaction_cache_reach"
    assert metric(client, name + "_count") == 2  # the two measurements
    assert metric(client, name + "_sum") == 1.25
    assert metric(client, name + "_bucket", le="0.25") == 1


def test_each_compaction_observes_the_tokens_it_invalidated(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    router.post(CHAT).mock(return_value=httpx.Response(200, json={"choices": []}))
    client.post("/v1/chat/completions", json=chat())
    compactor.outcome = "passthrough"
    client.post("/v1/chat/completions", json=chat())
    name = "factrail_compaction_invalidated_tokens"
    assert metric(client, name + "_count") == 1
    assert metric(client, name + "_sum") == 600
    assert metric(client, name + "_bucket", le="1000.0") == 1


def test_a_responses_id_chains_the_next_request_to_its_session(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    ids = iter(["resp_a", "resp_b", "resp_c", "resp_d"])

    def answer(request: httpx.Request) -> httpx.Response:
        if orjson.loads(request.content).get("stream"):
            return streamed(responses_stream().replace(b"resp_1", next(ids).encode()))
        return httpx.Response(200, json={**RESPONSE, "id": next(ids), "usage": RESPONSES_USAGE})

    router.post(RESPONSES).mock(side_effect=answer)
    other = [{"role": "user", "content": "Something else entirely."}]
    client.post("/v1/responses", json=responses_body())
    with client.stream(
        "POST", "/v1/responses", json=responses_body(previous_response_id="resp_a", stream=True)
    ) as r:
        r.read()
    client.post("/v1/responses", json=responses_body(input=other, previous_response_id="resp_b"))
    client.post("/v1/responses", json=responses_body(input=other, previous_response_id="resp_x"))
    first, streamed_turn, chained, unknown = (call[0] for call in compactor.calls)
    assert first == streamed_turn == chained
    assert unknown.startswith("r-") and unknown != first


def iteration(kind: str, uncached: int, read: int, written: int) -> dict[str, Any]:
    return {"type": kind, "input_tokens": uncached, "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written, "output_tokens": 7}  # fmt: skip


def anthropic_usage(*iterations: dict[str, Any]) -> dict[str, Any]:
    """Usage of a response that ran `iterations`: the top level adds up the `message` ones."""
    messages = [i for i in iterations if i["type"] == "message"]
    top = {k: sum(i[k] for i in messages) for k in ANTHROPIC_USAGE}
    return {**top, "iterations": list(iterations)}


SERVER_TOOL_LOOP = anthropic_usage(
    iteration("message", 9, 1000, 50),  # the prompt factrail sent: 1059
    iteration("message", 300, 1059, 0),  # the same, with the server tool's result
)
COMPACTED_FIRST = anthropic_usage(
    iteration("compaction", 3000, 0, 0), iteration("message", 5, 0, 900)
)


def anthropic_iterations_stream(usage: dict[str, Any]) -> bytes:
    """A stream whose `message_start` reports the first sampling and whose `message_delta`
    reports the whole response, iterations and all."""
    first = next(i for i in usage["iterations"] if i["type"] == "message")
    start = {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
             "usage": {k: first[k] for k in ANTHROPIC_USAGE}}  # fmt: skip
    return anthropic_sse(
        {"type": "message_start", "message": start},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage},
        {"type": "message_stop"},
    )


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_a_server_tool_loop_calibrates_from_the_prompt_as_sent_and_bills_every_iteration(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor, stream: bool
) -> None:
    """Anthropic adds up a server tool loop's `message` iterations at the top of `usage`: the
    metrics count all of it, while the session is calibrated (and its cache read compared)
    from the first iteration, the prompt factrail sent. The provider's own compaction is billed
    beside the top-level figures; when it ran before the first sampling, no figure is the
    prompt as sent, so nothing is calibrated."""
    answers = iter([SERVER_TOOL_LOOP, COMPACTED_FIRST])

    def answer(_: httpx.Request) -> httpx.Response:
        usage = next(answers)
        if stream:
            return streamed(anthropic_iterations_stream(usage))
        return httpx.Response(200, json={"id": "m", "type": "message", "usage": usage})

    router.post(MESSAGES).mock(side_effect=answer)
    for _ in range(2):
        with client.stream("POST", "/v1/messages", json=anthropic_body(stream=stream)) as r:
            r.read()
    assert input_tokens(client) == (9 + 300 + 3000 + 5, 1000 + 1059, 50 + 900)
    session = compactor.calls[0][0]
    assert compactor.usage == [(session, 1059, 250)]


def test_a_server_tool_loops_cache_read_is_that_of_the_prompt_as_sent(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    """Its second sampling reads its first from the cache: that read is no measure of what
    the cache kept of the session, so a turn whose loop was shorter is no cache break."""
    loops = iter([
        anthropic_usage(iteration("message", 9, 1000, 50), iteration("message", 300, 1059, 0)),
        anthropic_usage(iteration("message", 9, 1059, 60)),
    ])  # fmt: skip
    router.post(MESSAGES).mock(
        side_effect=lambda _: httpx.Response(200, json={"type": "message", "usage": next(loops)})
    )
    compactor.outcome = "passthrough"
    for _ in range(2):
        client.post("/v1/messages", json=anthropic_body(), headers={"x-factrail-session": "s"})
    assert metric(client, "factrail_cache_breaks_total") == 0


def test_an_anthropic_thread_chains_the_next_request_to_its_session(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    """A message answering a request that keeps a thread is remembered (streamed or not), so
    the request continuing it joins that session; the id of a message answering a request
    without a thread is not kept (nothing can continue it)."""
    ids = iter(["msg_a", "msg_b", "msg_c", "msg_z", "msg_e"])

    def answer(request: httpx.Request) -> httpx.Response:
        if orjson.loads(request.content).get("stream"):
            return streamed(
                anthropic_stream({"output_tokens": 4}).replace(b"msg_1", next(ids).encode())
            )
        body = {"id": next(ids), "type": "message", "content": [], "usage": ANTHROPIC_USAGE}
        return httpx.Response(200, json=body)

    def go_on(previous: str) -> dict[str, Any]:
        return {"type": "continue", "previous_message_id": previous}

    router.post(MESSAGES).mock(side_effect=answer)
    other = [{"role": "user", "content": "Something else entirely."}]
    client.post("/v1/messages", json=anthropic_body(thread={"type": "create"}))
    with client.stream(
        "POST", "/v1/messages", json=anthropic_body(thread=go_on("msg_a"), stream=True)
    ) as r:
        r.read()
    client.post("/v1/messages", json=anthropic_body(messages=other, thread=go_on("msg_b")))
    client.post("/v1/messages", json=anthropic_body(messages=other))  # answered by msg_z
    client.post("/v1/messages", json=anthropic_body(messages=other, thread=go_on("msg_z")))
    first, streamed_turn, chained, plain, unknown = (call[0] for call in compactor.calls)
    assert first == streamed_turn == chained
    assert plain != first and unknown.startswith("r-")


def test_a_request_for_the_providers_summary_is_its_transcripts_last_turn(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    """Anthropic's `compaction` parameter asks for a summary in place of the transcript, and so
    does a Responses `compaction_trigger` item, which must be the input's last."""
    router.post(MESSAGES).mock(return_value=httpx.Response(200, json={"type": "message"}))
    client.post("/v1/messages", json=anthropic_body())
    client.post("/v1/messages", json=anthropic_body(compaction={"type": "summarize"}))
    assert compactor.lasts == [False, True]
    # a Responses input that ends with a `compaction_trigger` item asks the same
    router.post(RESPONSES).mock(return_value=httpx.Response(200, json=RESPONSE))
    items = responses_body()["input"]
    client.post(
        "/v1/responses", json=responses_body(input=[*items, {"type": "compaction_trigger"}])
    )
    client.post(
        "/v1/responses", json=responses_body(input=[{"type": "compaction_trigger"}, *items])
    )
    assert compactor.lasts == [False, True, True, False]


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_tokens_the_providers_context_editing_cleared_count_as_sent(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor, stream: bool
) -> None:
    """Anthropic's `context_management` clears old tool results (and thinking) before the
    model sees the prompt and reports what it cleared: those tokens were sent, so they count
    in the prompt that calibrates the session, though not in what was billed."""
    managed = {"applied_edits": [
        {"type": "clear_thinking_20251015", "cleared_thinking_turns": 2,
         "cleared_input_tokens": 300},
        {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 4, "cleared_input_tokens": 5000},
    ]}  # fmt: skip
    if stream:
        start = {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                 "usage": ANTHROPIC_USAGE}  # fmt: skip
        answer = streamed(anthropic_sse(
            {"type": "message_start", "message": start},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": ANTHROPIC_USAGE, "context_management": managed},
            {"type": "message_stop"},
        ))  # fmt: skip
    else:
        body = {"type": "message", "usage": ANTHROPIC_USAGE, "context_management": managed}
        answer = httpx.Response(200, json=body)
    router.post(MESSAGES).mock(return_value=answer)
    with client.stream("POST", "/v1/messages", json=anthropic_body(stream=stream)) as r:
        r.read()
    assert input_tokens(client) == (5, 700, 40)
    assert compactor.usage == [(compactor.calls[0][0], 745 + 5300, 250)]


def test_the_providers_cache_miss_diagnosis_is_counted_by_reason_and_outcome(
    client: TestClient, router: respx.MockRouter, compactor: ScriptedCompactor
) -> None:
    """A client that asks Anthropic for cache diagnostics (Claude Code can) gets the reason the
    prompt cache missed: in the body, or in a stream's `message_start` (`null` while pending)
    and `message_delta`. factrail counts each by reason and by what it did to the turn."""
    usage = {"input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 1}
    changed = {"type": "messages_changed", "cache_missed_input_tokens": 7000}
    start = {"id": "msg_1", "type": "message", "usage": usage, "diagnostics": None}
    stream = anthropic_sse(
        {"type": "message_start", "message": start},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "diagnostics": {"cache_miss_reason": changed}},
            "usage": usage,
        },
        {"type": "message_stop"},
    )

    def answer(reason: dict[str, Any] | None) -> httpx.Response:
        diagnostics = None if reason is None else {"cache_miss_reason": reason}
        body = {"id": "msg_2", "type": "message", "usage": usage, "diagnostics": diagnostics}
        return httpx.Response(200, json=body)

    answers = iter([
        answer(changed), streamed(stream), answer({"type": "tools_changed"}),
        answer({"type": "new_kind"}), answer(None),
    ])  # fmt: skip
    router.post(MESSAGES).mock(side_effect=lambda _: next(answers))
    compactor.outcome = "compacted"
    client.post("/v1/messages", json=anthropic_body())
    with client.stream("POST", "/v1/messages", json=anthropic_body(stream=True)) as r:
        r.read()
    compactor.outcome = "passthrough"
    for _ in range(3):
        client.post("/v1/messages", json=anthropic_body())
    misses = "factrail_upstream_cache_misses_total"
    missed = "factrail_upstream_cache_missed_tokens_total"
    assert metric(client, misses, reason="messages_changed", outcome="compacted") == 2
    assert metric(client, missed, reason="messages_changed", outcome="compacted") == 14_000
    assert metric(client, misses, reason="tools_changed", outcome="passthrough") == 1
    assert metric(client, missed, reason="tools_changed", outcome="passthrough") == 0
    assert metric(client, misses, reason="other", outcome="passthrough") == 1
    assert metric(client, misses, reason="messages_changed", outcome="passthrough") == 0


@pytest.mark.parametrize(
    ("outcome", "decision", "expected"),
    [
        ("passthrough", None, 300.0),  # kept 3000 out, each a cache read sent whole
        ("compacted", "pays", 300.0 - 1.15 * 1300),  # and re-wrote all it did not read
        ("compacted", "forced", 300.0 - 1.15 * 1300),
        ("compacted", "cold", 300.0),  # the cache was cold: sent whole, all was written too
    ],
)
def test_what_a_turn_adds_to_its_session_s_bill(
    outcome: str, decision: str | None, expected: float
) -> None:
    usage = Usage(uncached=300, cached=8700, cache_write=1000)
    result = TurnResult(outcome, decision=decision, prices=ANTHROPIC_PRICES)  # type: ignore[arg-type]
    added = bill(usage, 3000, result)
    assert added is not None
    assert added.billed == pytest.approx(300 + 870 + 1250)
    assert added.spared == pytest.approx(expected)


def test_a_turn_without_prices_or_cache_figures_adds_nothing_to_the_bill() -> None:
    priced = TurnResult("passthrough", prices=ANTHROPIC_PRICES)
    assert bill(Usage(100, 0, 0, reports_cache=False), 0, priced) is None
    assert bill(Usage(100, 0, 0), 0, TurnResult("passthrough")) is None
