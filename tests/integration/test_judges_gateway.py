"""The judges behind the real gateway: fake System One and fake Tev processes, the openai SDK."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import orjson
import pytest

from factrail.core.tev import SYSTEM
from tests.integration.processes import Process, metric_total, start_factrail, start_fake, stop

pytestmark = pytest.mark.integration

DEADLINE_MS = 1500
MARGIN_S = 2.0
FENCED_TOOL = "mcp__email-gateway__search_threads"


@dataclass(frozen=True)
class FakeJudge:
    """Control of one fake judge process (see `tests.integration.fake_judges`)."""

    base: str

    def records(self) -> list[dict[str, str]]:
        records: list[dict[str, str]] = httpx.get(f"{self.base}/_records").json()
        return records

    def reset(self) -> None:
        httpx.post(f"{self.base}/_reset")

    def mode(self, mode: str) -> None:
        httpx.post(f"{self.base}/_mode", json={"mode": mode})


@dataclass(frozen=True)
class Judges:
    upstream: str
    systemone: FakeJudge
    tev: FakeJudge
    via_systemone: str
    """Gateway base URL: System One, not local, keyed, full egress."""
    via_tev: str
    """Gateway base URL: Tev, declared local, keyless, metadata egress."""
    key: str

    def upstream_messages(self) -> list[dict[str, Any]]:
        last = httpx.get(self.upstream[:-3] + "/_records").json()[-1]
        messages: list[dict[str, Any]] = orjson.loads(last["body"])["messages"]
        return messages


@pytest.fixture(scope="module")
def judges(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judges]:
    key = "jk-" + "Zq9" * 10
    procs: list[Process] = []
    try:
        upstream_base, proc = start_fake("tests.integration.fake_upstream:app")
        procs.append(proc)
        s1_base, proc = start_fake("tests.integration.fake_judges:systemone")
        procs.append(proc)
        tev_base, proc = start_fake("tests.integration.fake_judges:tev")
        procs.append(proc)
        upstream = f"{upstream_base}/v1"
        common = {"FACTRAIL_TRIGGER_TOKENS": "3000", "FACTRAIL_JUDGE_DEADLINE_MS": str(DEADLINE_MS)}
        via_s1, proc = start_factrail(
            upstream,
            tmp_path_factory.mktemp("s1"),
            FACTRAIL_JUDGE="systemone",
            FACTRAIL_JUDGE_URL=f"{s1_base}/v1/systemone",
            FACTRAIL_JUDGE_API_KEY=key,
            FACTRAIL_JUDGE_LOCAL="false",
            FACTRAIL_EGRESS="full",
            **common,
        )
        procs.append(proc)
        via_tev, proc = start_factrail(
            upstream,
            tmp_path_factory.mktemp("tev"),
            FACTRAIL_JUDGE="tev",
            FACTRAIL_JUDGE_URL=f"{tev_base}/v1",
            FACTRAIL_JUDGE_LOCAL="true",
            FACTRAIL_EGRESS="metadata",
            **common,
        )
        procs.append(proc)
        yield Judges(upstream, FakeJudge(s1_base), FakeJudge(tev_base), via_s1, via_tev, key)
    finally:
        for proc in reversed(procs):
            stop(proc)


@dataclass(frozen=True)
class Sentinels:
    result: str
    argument: str
    credential: str


def sentinels() -> Sentinels:
    tag = uuid.uuid4().hex[:12]
    return Sentinels(
        result=f"RESULTSENTINEL{tag}",
        argument=f"ARGSENTINEL{tag}",
        credential="sk-" + "proj-" + "A1b2" * 8,
    )


def transcript(
    s: Sentinels, calls: int = 10, fenced: bool = False, note: str = ""
) -> list[dict[str, Any]]:
    """An agent transcript past a 3000-token trigger, with sentinels everywhere; a head of its
    own (a fenced one's taint is kept under its head too)."""
    task = f"Deploy with the key {s.credential} and fix build {uuid.uuid4().hex[:8]}.{note}"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": task},
    ]
    for i in range(calls):
        name = FENCED_TOOL if fenced and i == 1 else "bash"
        args = orjson.dumps({"cmd": f"grep -rn {s.argument} src/mod{i}"}).decode()
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {i}.",
                "tool_calls": [{"id": f"call_{i}", "type": "function",
                                "function": {"name": name, "arguments": args}}],
            }
        )  # fmt: skip
        lines = [f"src/mod{i}/f{j}.py:{j}: {s.result} value {i * 100 + j}" for j in range(45)]
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "\n".join(lines)})
    messages.append({"role": "assistant", "content": "Searched every module."})
    messages.append({"role": "user", "content": "Now fix module 3."})
    return messages


def ask(base: str, messages: list[dict[str, Any]]) -> tuple[str, float]:
    """Send one chat completion through the gateway: its `x-factrail` header and seconds taken."""
    client = openai.OpenAI(base_url=base, api_key="agent-" + "key", max_retries=0)
    started = time.perf_counter()
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=messages,  # type: ignore[arg-type]
        extra_headers={"x-factrail-session": uuid.uuid4().hex},
    )
    elapsed = time.perf_counter() - started
    assert raw.parse().choices[0].message.content == "done"
    return raw.headers["x-factrail"], elapsed


def consult(judge: FakeJudge, via: str, messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Send `messages` through the gateway at `via`, expect compaction: what `judge` received."""
    judge.reset()
    outcome, _ = ask(via, messages)
    assert outcome == "compacted"
    return judge.records()


def metric(base: str, name: str, **labels: str) -> float:
    """The value of one sample of the gateway's `/metrics` (0 when absent)."""
    return metric_total(httpx.get(base[:-3] + "/metrics").text, name, **labels)


def assert_compacted(sent: list[dict[str, Any]], original: list[dict[str, Any]]) -> None:
    assert len(sent) == len(original)
    prose = [(m["role"], m.get("content")) for m in original if m["role"] != "tool"]
    assert [(m["role"], m.get("content")) for m in sent if m["role"] != "tool"] == prose
    shorter = [a for a, b in zip(sent, original, strict=True)
               if a["role"] == "tool" and len(a["content"]) < len(b["content"])]  # fmt: skip
    assert shorter


def test_system_one_sees_no_result_content_and_a_redacted_credential(judges: Judges) -> None:
    s = sentinels()
    messages = transcript(s, note=f" The judge's own key is {judges.key}.")
    records = consult(judges.systemone, judges.via_systemone, messages)
    assert records
    for record in records:
        body = record["body"]
        assert record["path"] == "/v1/systemone"
        assert record["authorization"] == f"Bearer {judges.key}"
        assert set(orjson.loads(body)) == {"model", "state", "questions"}
        assert s.result not in body
        assert s.credential not in body and judges.key not in body
        assert body.count("[REDACTED:") >= 2
        assert s.argument in body  # full egress sends the arguments
    assert_compacted(judges.upstream_messages(), messages)


def test_tev_under_metadata_egress_sees_no_arguments(judges: Judges) -> None:
    s = sentinels()
    messages = transcript(s)
    records = consult(judges.tev, judges.via_tev, messages)
    assert records
    for record in records:
        body = record["body"]
        assert record["path"] == "/v1/chat/completions"
        assert record["authorization"] == ""
        assert orjson.loads(body)["messages"][0] == {"role": "system", "content": SYSTEM}
        assert s.result not in body and s.argument not in body
        assert s.credential not in body and "[REDACTED:" in body
    assert_compacted(judges.upstream_messages(), messages)


def test_a_fenced_session_never_reaches_the_remote_judge(judges: Judges) -> None:
    fenced = metric(judges.via_systemone, "factrail_fenced_sessions_total")
    messages = transcript(sentinels(), fenced=True)
    assert consult(judges.systemone, judges.via_systemone, messages) == []
    assert metric(judges.via_systemone, "factrail_fenced_sessions_total") == fenced + 1
    assert_compacted(judges.upstream_messages(), messages)


def test_a_fenced_session_reaches_the_judge_declared_local(judges: Judges) -> None:
    assert consult(judges.tev, judges.via_tev, transcript(sentinels(), fenced=True))


FAILURES = [
    ("systemone", "hang", "deadline"),
    ("systemone", "500", "status"),
    ("systemone", "429", "status"),
    ("systemone", "malformed", "malformed"),
    ("systemone", "missing", "missing-answer"),
    ("systemone", "out-of-range", "missing-answer"),
    ("tev", "hang", "deadline"),
    ("tev", "500", "status"),
    ("tev", "missing", "malformed"),
    ("tev", "out-of-range", "malformed"),
]


@pytest.mark.parametrize(("judge", "mode", "kind"), FAILURES)
def test_a_failing_judge_still_lets_the_request_through_compacted(
    judges: Judges, judge: str, mode: str, kind: str
) -> None:
    fake, via = (
        (judges.systemone, judges.via_systemone)
        if judge == "systemone"
        else (judges.tev, judges.via_tev)
    )
    fake.reset()
    fake.mode(mode)
    failed = metric(via, "factrail_judge_requests_total", judge=judge, outcome=kind)
    ruled = metric(via, "factrail_compactions_total", judge=judge, reason="ok-rules")
    try:
        messages = transcript(sentinels())
        outcome, elapsed = ask(via, messages)
        assert outcome == "compacted"
        assert elapsed < DEADLINE_MS / 1000 + MARGIN_S
        assert fake.records()
        assert metric(via, "factrail_judge_requests_total", judge=judge, outcome=kind) > failed
        assert (
            metric(via, "factrail_compactions_total", judge=judge, reason="ok-rules") == ruled + 1
        )
        assert_compacted(judges.upstream_messages(), messages)
    finally:
        fake.reset()
