"""Session keys: the client's own session wherever it names one, in a fixed order of sources."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
from starlette.datastructures import Headers

from factrail.core.formats import openai_chat
from factrail.core.formats.base import Document
from factrail.session import session_key
from factrail.session.keys import FENCE_HEAD, alias_keys, client_id, client_ids


def doc(system: str = "You are a coding agent.", prompt: str = "Fix the build.") -> Document:
    return openai_chat.parse(
        [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    )


def key(headers: Mapping[str, str] | None = None, model: str = "gpt-4o", /, **body: Any) -> str:
    """The session key of a request with these headers, model and body fields."""
    return session_key(Headers(headers or {}), body, doc(), model)


def claude_user(session: str, account: str = "") -> str:
    """Claude Code's legacy `metadata.user_id`, built at run time."""
    return f"user_{'ab' * 32}_account_{account}_session_{session}"


SESSION_A, SESSION_B = str(uuid.uuid4()), str(uuid.uuid4())


def test_every_key_is_hashed_and_names_its_source() -> None:
    cases = {
        "h-": key({"X-Factrail-Session": "mine"}),
        "c-": key(prompt_cache_key="pck-1"),
        "r-": key(previous_response_id="resp_unknown"),
        "s-": key(),
    }
    for prefix, found in cases.items():
        assert found.startswith(prefix) and len(found) == len(prefix) + 24
    assert "mine" not in cases["h-"] and "pck" not in cases["c-"]


def test_the_head_hash_is_stable_within_a_model_family() -> None:
    assert key() == key(None, "gpt-4o-mini") != key(None, "claude-3")
    assert key() != session_key(Headers({}), {}, doc(prompt="Other task."), "gpt-4o")


def test_the_factrail_header_wins_and_is_trimmed() -> None:
    body = {"prompt_cache_key": "pck", "metadata": {"user_id": claude_user(SESSION_A)}}
    assert key({"x-factrail-session": " abc "}, **body) == key({"X-Factrail-Session": "abc"})
    assert key({"x-factrail-session": "abc"}, "claude-3") == key({"x-factrail-session": "abc"})


def test_claude_codes_session_part_of_the_user_id() -> None:
    a = key(metadata={"user_id": claude_user(SESSION_A)})
    assert a == key(metadata={"user_id": claude_user(SESSION_A, account=str(uuid.uuid4()))})
    assert a != key(metadata={"user_id": claude_user(SESSION_B)})
    assert client_id({}, {"metadata": {"user_id": claude_user(SESSION_A)}}) == SESSION_A
    as_json = orjson.dumps({"device_id": "d" * 64, "session_id": SESSION_A}).decode()
    assert key(metadata={"user_id": as_json}) == a


def test_a_user_id_without_a_session_part_counts_whole() -> None:
    assert client_id({}, {"metadata": {"user_id": "user-42"}}) == "user-42"
    assert client_id({}, {"metadata": {"user_id": "{not json"}}) == "{not json"
    assert key(metadata={"user_id": "user-42"}) != key(metadata={"user_id": "user-43"})


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({}, {"prompt_cache_key": "conv-1"}),
        ({"session_id": "conv-1"}, {}),
        ({"Session-Id": "conv-1"}, {}),
        ({"conversation_id": "conv-1"}, {}),
        ({"x-session-id": "conv-1"}, {}),
        ({"x-claude-code-session-id": "conv-1"}, {}),
        ({}, {"client_metadata": {"session_id": "conv-1", "x-codex-window-id": "w:0"}}),
        ({}, {"client_metadata": {"thread_id": "conv-1"}}),
    ],
)
def test_each_client_id_source_names_the_same_session(
    headers: dict[str, str], body: dict[str, Any]
) -> None:
    """Codex sends one conversation id as `prompt_cache_key`, `session_id` header and
    `client_metadata`: whichever a request carries, the session is the same."""
    assert key(headers, **body) == key(prompt_cache_key="conv-1") != key()


def test_client_ids_in_order() -> None:
    user = {"user_id": claude_user(SESSION_A)}
    metadata = {"client_metadata": {"session_id": "meta"}}
    assert key({"session_id": "hdr"}, metadata=user, prompt_cache_key="pck") == key(metadata=user)
    assert key({"session_id": "hdr"}, prompt_cache_key="pck", **metadata) == key(
        prompt_cache_key="pck"
    )
    assert key({"session_id": "hdr"}, **metadata) == key({"session_id": "hdr"})
    assert key(**metadata) == key(prompt_cache_key="meta")
    assert key({"session_id": "  "}, prompt_cache_key="") == key()


def test_one_client_session_keeps_its_subagents_apart() -> None:
    """A Task subagent shares the client's session id but has its own system prompt and task."""
    body = {"metadata": {"user_id": claude_user(SESSION_A)}}
    main = session_key(Headers({}), body, doc(), "claude-sonnet-4-5")
    agent = session_key(Headers({}), body, doc("You are a search agent.", "Find X."), "claude-3")
    assert main != agent and main.startswith("c-") and agent.startswith("c-")


def test_the_responses_chain() -> None:
    known = {"resp_1": "c-known"}
    body = {"previous_response_id": "resp_1", "prompt_cache_key": "pck"}
    assert session_key(Headers({}), body, doc(), "gpt-5", known.get) == "c-known"
    assert session_key(Headers({"x-factrail-session": "s"}), body, doc(), "gpt-5", known.get) == (
        key({"x-factrail-session": "s"})
    )
    unknown = {"previous_response_id": "resp_2"}
    assert session_key(Headers({}), unknown, doc(), "gpt-5", known.get) == key(**unknown)
    assert key(**unknown) != key(previous_response_id="resp_3")
    assert key(prompt_cache_key="pck", **unknown) == key(prompt_cache_key="pck")


def test_an_anthropic_thread_continues_its_session_like_a_responses_chain() -> None:
    """A thread continued names the message it follows; one being created names nothing."""
    known = {"msg_1": "s-known"}
    go_on = {"thread": {"type": "continue", "previous_message_id": "msg_1"}}
    assert session_key(Headers({}), go_on, doc(), "claude-opus-5", known.get) == "s-known"
    unknown = {"thread": {"type": "continue", "previous_message_id": "msg_2"}}
    assert key(**unknown) == key(previous_response_id="msg_2")
    assert key(**unknown).startswith("r-")
    assert key(thread={"type": "create"}) == key()


def narrow(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The aliases but the fence's head as every wire format spells it."""
    return tuple(k for k in keys if not k.startswith(FENCE_HEAD))


def run_doc(call_id: str, steps: int = 1, answer: str = "Looking.") -> Document:
    """A run of the default prompt, `steps` calls in: its first answer names `call_id`."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the build."},
    ]
    for i in range(steps):
        cid = call_id if i == 0 else f"{call_id}-{i}"
        call = {"id": cid, "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": answer if i == 0 else "More.",
                         "tool_calls": [call]})  # fmt: skip
        messages.append({"role": "tool", "tool_call_id": cid, "content": f"out {i}"})
    return openai_chat.parse(messages)


def test_runs_of_one_prompt_that_name_no_session_part_at_their_first_answer() -> None:
    """Two runs of the same prompt at once (a pass@k evaluation) must not share a plan: without
    a session id they share the head, so the first answer (its text and the provider's call
    ids) is in the key; a run's key stays the same as it grows; the first request, which has
    no answer yet, is keyed by the head."""

    def s_key(d: Document) -> str:
        return session_key(Headers({}), {}, d, "gpt-4o")

    run_a, run_b = run_doc("call_Ab3"), run_doc("call_Zq9")
    assert s_key(run_a) != s_key(run_b) and s_key(run_a).startswith("s-")
    assert s_key(run_a) == s_key(run_doc("call_Ab3", steps=5))
    assert s_key(run_a) != s_key(run_doc("call_Ab3", answer="Reading."))
    assert key() not in (s_key(run_a), s_key(run_b))
    # The fence keeps a run's taint under the head too: the key of the first request of
    # every run of this prompt, which a client trimming its oldest turns keeps; and under the
    # head as every wire format spells it (`f-`, the same for both runs).
    wide = alias_keys(Headers({}), {}, run_a, "gpt-4o", session=s_key(run_a))
    assert narrow(wide) == (key(),) and wide[-1].startswith(FENCE_HEAD)
    other = alias_keys(Headers({}), {}, run_b, "gpt-4o", session=s_key(run_b))
    assert other == wide
    # No answer: the key is the head, never its own alias.
    assert narrow(alias_keys(Headers({}), {}, doc(), "gpt-4o", session=key())) == ()
    named = narrow(alias_keys(Headers({}), {"prompt_cache_key": "pck"}, run_a, "gpt-4o"))
    assert len(named) == 2 and named[0].startswith("a-") and named[1] == key()
    mine = alias_keys(Headers({"x-factrail-session": "mine"}), {}, run_a, "gpt-4o")
    assert narrow(mine) == (key(),)


def test_every_identity_a_request_carries_is_an_alias() -> None:
    """Each client id (every source, each once), the session of the answer it continues, and
    the head: a change of any one leaves the others to carry the taint."""
    user = claude_user(SESSION_A)
    headers = Headers({"session_id": SESSION_B, "x-factrail-session": "mine"})
    body = {
        "metadata": {"user_id": user},
        "prompt_cache_key": SESSION_B,
        "client_metadata": {"thread_id": "t-1", "session_id": SESSION_A},
    }
    found = alias_keys(headers, body, doc(), "gpt-4o")
    assert client_ids(headers, body) == (SESSION_A, SESSION_B, "t-1")
    assert len(found) == 5 and all(k.startswith("a-") for k in found[:3]) and found[3] == key()
    assert found[4].startswith(FENCE_HEAD)
    assert not any(s in k for k in found for s in (SESSION_A, SESSION_B, "t-1"))
    own = key({"x-factrail-session": "mine"})
    assert own not in found  # the header names the session's own key
    assert alias_keys(headers, body, doc(), "gpt-4o", session=found[0]) == found[1:]
    chained = {"previous_response_id": "resp_1"}
    known = alias_keys(Headers({}), chained, doc(), "gpt-4o", {"resp_1": own}.get)
    assert known == (own,)  # the head of a continued chain is not its session's head
    assert alias_keys(Headers({}), {}, openai_chat.parse([]), "gpt-4o") == ()
