"""No secret of a reduced result reaches the state store, and the plan still re-applies byte
for byte: a session compacts results holding a Slack bot token, a postgres URL's password, a
Datadog key and a lower-case `password=`; the raw bytes of the SQLite file (and every value of a
Redis server) hold none of them, and the next turn, on a fresh store, sends what was sent.

Every secret is assembled at run time from a seeded generator.
"""

from __future__ import annotations

import asyncio
import random
import string
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis

from factrail.core.formats import openai_chat
from factrail.core.model import Message, ToolResult, ToolUse
from factrail.core.reapply import BLANK, plan_entry, reapply_plan, seal, text_hash, unseal
from factrail.judges.rules import RulesJudge
from factrail.session import SessionCompactor
from factrail.stores import open_state_store
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.outputs import OutputStore
from factrail.stores.sqlite_state import SqliteStateStore
from factrail.stores.state import SessionState, StateStore, decode_state, encode_state
from tests.options import engine_options
from tests.redis_server import RedisServer

_RNG = random.Random(20261207)
ALNUM = string.ascii_letters + string.digits


def rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def leaks() -> dict[str, tuple[str, str]]:
    """name -> (the line a tool prints, the secret in it)."""
    slack = "xox" + "b-" + rand(12, string.digits) + "-" + rand(12, string.digits) + "-" + rand(24)
    pg = rand(18)
    datadog = rand(32, "0123456789abcdef")
    password = rand(14)
    return {
        "slack": (f"SLACK_BOT_TOKEN={slack}", slack),
        "postgres": (f"DATABASE_URL=postgres://app:{pg}@db.internal:5432/app", pg),
        "datadog": (f"DD_API_KEY={datadog}", datadog),
        "password": (f"password={password}", password),
    }


LEAKS = leaks()


def transcript(extra: int = 0) -> list[dict[str, Any]]:
    """24 `cat .env`-like calls, each output holding one leak at its head, middle and tail."""
    lines = [line for line, _ in LEAKS.values()]
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Debug the failing service."}]
    for i in range(24):
        cid = f"call_{i:02d}"
        body = [f"log line {j}: request req-{i:03d}{j:04d} handled" for j in range(150)]
        leak = lines[i % len(lines)]
        body[0:0], body[75:75] = [leak], [leak]
        body.append(leak)
        call = {"name": "Bash", "arguments": '{"command": "cat .env"}'}
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": cid, "type": "function", "function": call}],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": cid, "content": "\n".join(body)})
    msgs.append({"role": "user", "content": "Keep going."})
    for n in range(extra):
        msgs += [
            {"role": "assistant", "content": f"Reading {n}."},
            {"role": "user", "content": "ok"},
        ]
    return msgs


def compactor(state: StateStore, outputs: Path) -> SessionCompactor:
    options = engine_options(trigger_tokens=4000, trigger_percent=0.0, price_profile="none")
    return SessionCompactor(options, state=state, outputs=OutputStore(outputs), judge=RulesJudge())


def two_turns(make_store: Callable[[], StateStore], outputs: Path) -> list[Any]:
    """Turn 1 compacts on one store; turn 2 re-applies on a fresh one over the same storage.
    Returns what turn 1 sent, after checking that it held every secret (so the state would
    have too) and that turn 2 sent it again, byte for byte."""
    wire = transcript()
    first = asyncio.run(compactor(make_store(), outputs).compact("s", openai_chat.parse(wire)))
    assert first.outcome == "compacted" and first.reduced > 0 and first.document is not None
    sent = orjson.dumps(first.document).decode()
    for name, (_, secret) in LEAKS.items():
        assert secret in sent, name  # the reduced results keep the secret lines
    later = transcript(extra=1)
    second = asyncio.run(compactor(make_store(), outputs).compact("s", openai_chat.parse(later)))
    assert second.outcome == "reapplied" and second.document is not None
    assert second.document[: len(wire)] == first.document
    return list(first.document)


def assert_clean(raw: bytes, where: str) -> None:
    for name, (_, secret) in LEAKS.items():
        assert secret.encode() not in raw, f"{name} in {where}"


def test_the_sqlite_file_holds_no_secret_of_a_reduced_result(tmp_path: Path) -> None:
    db = tmp_path / "state" / "state.db"
    two_turns(lambda: SqliteStateStore(db), tmp_path / "out")
    files = sorted(db.parent.glob("state.db*"))
    assert files
    assert_clean(b"".join(p.read_bytes() for p in files), "the SQLite files")
    # the plan is there, sealed: blanked secrets and where to find them again
    stored = SqliteStateStore(db).load("s")
    assert stored is not None and stored.plan
    assert any(e.sealed and BLANK * 8 in e.reduced_text for e in stored.plan.values())


def test_the_memory_store_holds_no_secret_either(tmp_path: Path) -> None:
    store = MemoryStateStore()
    two_turns(lambda: store, tmp_path / "out")
    assert_clean(b"".join(store._states.values()), "the memory store")


def _redis_values(url: str, prefix: str) -> bytes:
    """Every value under `prefix`, read back whole (a dump may compress long strings)."""
    client = redis.Redis.from_url(url)
    out: list[bytes] = []
    for key in client.scan_iter(match=f"{prefix}*"):
        kind = client.type(key)
        if kind == b"string":
            out.append(client.get(key) or b"")
        elif kind == b"hash":
            out += [k + v for k, v in client.hgetall(key).items()]
        elif kind == b"zset":
            out += client.zrange(key, 0, -1)
        elif kind == b"list":
            out += client.lrange(key, 0, -1)
        elif kind == b"set":
            out += list(client.smembers(key))
    client.close()
    return b"\n".join(out)


def test_a_redis_server_holds_no_secret_of_a_reduced_result(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    prefix = f"q{uuid.uuid4().hex[:8]}:"
    url = f"{redis_server.url}?prefix={prefix}"
    two_turns(lambda: open_state_store(url), tmp_path / "out")
    raw = _redis_values(redis_server.url, prefix)
    assert raw
    assert_clean(raw, "Redis")


# -- the entry itself ---------------------------------------------------------------------------


def test_briefed_arguments_are_sealed_and_filled_back_from_the_call() -> None:
    """A secret in a briefed argument goes the same way: blanked in the store, filled back
    from the call's input as the client sends it again."""
    secret = rand(20)
    command = f"psql 'postgres://app:{secret}@db/app' -c \"select 1\"; " + "x" * 300
    call_input = {"command": command, "timeout": 30}
    briefed = {"command": command[:200] + "…[factrail omitted 112 chars]", "timeout": 30}
    original = "row 1\n" * 100
    entry = plan_entry(original, "row 1\n[factrail omitted 594 chars]", briefed, call_input)
    stored = decode_state(encode_state(SessionState(plan={"c": entry})))
    assert stored is not None
    assert secret.encode() not in encode_state(stored)
    sealed = stored.plan["c"]
    assert sealed.sealed and sealed.input is not None and secret not in sealed.input["command"]
    opened = unseal(sealed, original, call_input)
    assert opened is not None and (opened.reduced_text, opened.input) == (
        entry.reduced_text,
        briefed,
    )
    # the client sent the briefed arguments back (a transcript it holds reduced): as they are
    assert unseal(sealed, original, briefed) == opened
    # another call under the same id: nothing is filled from it
    assert unseal(sealed, "other output", call_input) is None


def test_a_secret_quoted_out_of_context_is_sealed_too() -> None:
    """A reduction may list a value without its key (`ids: …`); it is sealed because the
    original names it a secret."""
    key = rand(32, "0123456789abcdef")
    original = f"DD_API_KEY={key}\n" + "line\n" * 50
    entry = plan_entry(original, f"ids: {key}, req-1\n[factrail omitted 9 chars]", None, {})
    sealed = seal(entry)
    assert sealed is not None and key not in sealed.reduced_text
    assert unseal(sealed, original, {}) == entry


def test_reapplying_a_sealed_plan_sends_the_reduced_text_again() -> None:
    secret = rand(24)
    original = f"export token={secret}\n" + "noise\n" * 40
    reduced = f"export token={secret}\n[factrail omitted 240 chars]"
    sealed = seal(plan_entry(original, reduced, None, {}))
    assert sealed is not None
    messages = [
        Message("assistant", tool_uses=[ToolUse("c1", "Bash", {"command": "env"})]),
        Message("user", tool_results=[ToolResult("c1", original)]),
    ]
    plan = {"c1": sealed}
    out, done = reapply_plan(messages, plan)
    assert done == {"c1"} and out[1].tool_results[0].text == reduced
    assert not plan["c1"].sealed  # unsealed in place, for the rest of the turn
    # a client that holds the reduced text sends it back: it is recognised as it is
    plan = {"c1": sealed}
    back = [messages[0], Message("user", tool_results=[ToolResult("c1", reduced)])]
    out, done = reapply_plan(back, plan)
    assert done == {"c1"} and out[1].tool_results[0].text == reduced


def test_a_version_1_plan_drops_the_entries_holding_secrets() -> None:
    """A version-1 plan entry without `r` (not looked for secrets) is looked at when saved
    again: one holding a secret is dropped (the result is reduced afresh), the others stay."""
    secret = rand(20)
    blob = orjson.dumps(
        {
            "plan": {
                "leaky": {"h": text_hash("a"), "t": f"password={secret}", "i": None},
                "clean": {"h": text_hash("b"), "t": "[factrail omitted 9 chars]", "i": None},
            }
        }
    )
    state = decode_state(blob)
    assert state is not None and set(state.plan) == {"leaky", "clean"}
    again = encode_state(state)
    assert secret.encode() not in again
    reloaded = decode_state(again)
    assert reloaded is not None and set(reloaded.plan) == {"clean"}


@pytest.mark.parametrize("refs", [[[0, 1]], [[0, 5, 2, 0]], [[0, -1, 2, 0]], "x"])
def test_malformed_refs_make_the_record_invalid(refs: Any) -> None:
    blob = orjson.dumps({"plan": {"c": {"h": text_hash("a"), "t": "****", "i": None, "r": refs}}})
    assert decode_state(blob) is None
