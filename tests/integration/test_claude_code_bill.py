"""The bill of a real client: Claude Code (pinned in `plugin/`) runs one scripted tool loop
direct against a scripted Anthropic endpoint and once through `factrail serve`; both sessions
are priced from the endpoint's own usage records under the `anthropic` profile (input 1,
cache write 1.25, cache read 0.1). See `bench/claude_code_bill.py` for the same figures printed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.integration.bills import Pairs, Session
from tests.integration.claude_code import CLAUDE, run_session, start_gateway
from tests.integration.processes import start_fake, stop
from tests.integration.scripted_anthropic import written_module

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not CLAUDE.exists(), reason="Claude Code not installed: run `make node-deps` (needs npm)"
    ),
]

TRIGGER = 44_000
SHORT, ONCE, LONG = 14, 22, 40
"""Tool calls per session: below the trigger, past it once near the end, past it many times."""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pairs]:
    work = tmp_path_factory.mktemp("cc")
    endpoint, fake = start_fake("tests.integration.scripted_anthropic:app")
    try:
        gateway, proxy = start_gateway(endpoint, work / "factrail", TRIGGER)

        def run(url: str, steps: int, folder: Path, script: Mapping[str, Any] | None) -> Session:
            return run_session(endpoint, url, steps, folder, script=script)

        try:
            yield Pairs(endpoint, gateway, "messages", run, work)
        finally:
            stop(proxy)
    finally:
        stop(fake)


def completed(session: Session) -> None:
    """Claude Code finished, every request was valid, and the fact planted in the first result
    reached the answer: still in the transcript, or one read away (the read became a re-run
    note, the agent re-ran it once and the last request holds it again)."""
    assert session.returncode == 0, session.stderr
    assert session.result.get("is_error") is False, session.result
    assert session.rejected == [], session.rejected
    last = session.main[-1]
    assert last["fact_kept"] is True
    assert last["answered_fact"] == session.token
    assert session.token in session.result["result"]


def requests(session: Session, steps: int) -> bool:
    """One main request per tool call and the answer, plus one re-read when the fact was out
    of sight."""
    recovered = any(r.get("recovering") for r in session.main)
    return len(session.main) == steps + 1 + recovered


def test_a_session_below_the_trigger_costs_the_same(stack: Pairs) -> None:
    direct, through, factrail = stack.pair(SHORT)
    completed(direct)
    completed(through)
    assert len(through.main) == len(direct.main) == SHORT + 1
    assert factrail.get("compactions", 0) == 0
    assert through.billed <= direct.billed


def test_a_long_session_costs_less_and_keeps_the_fact(stack: Pairs) -> None:
    direct, through, factrail = stack.pair(LONG)
    completed(direct)
    completed(through)
    assert len(direct.main) == LONG + 1 and requests(through, LONG)
    assert factrail["compacted"] >= 2 and factrail["compactions"] >= 2
    assert through.billed < direct.billed
    # Each compaction re-read from the cache more than the system prompt: the first, the head
    # factrail marked before it (Claude Code marks only its system prompt and last message);
    # the later ones, the frozen zone up to the last settled result.
    changed = [r for r in through.main if r.get("first_diff") is not None]
    assert len(changed) >= 2
    assert all(r["read_message"] is not None and r["read_message"] >= 0 for r in changed)


def test_a_session_past_the_trigger_once_costs_no_more(stack: Pairs) -> None:
    """Its one compaction comes a few turns before the end: it pays back because the head
    before the first result is read from the cache and the notes read keeps its fact line
    (x0.956 at T=44k; at T=60k the compaction comes two turns before the end and the same
    session costs x1.004, see `bench/claude_code_bill.py`)."""
    direct, through, factrail = stack.pair(ONCE)
    completed(direct)
    completed(through)
    assert factrail["compacted"] >= 1
    assert through.billed <= direct.billed


def test_a_session_that_writes_files_sends_its_old_writes_briefed_and_keeps_them_whole_on_disk(
    stack: Pairs,
) -> None:
    """Every third call writes a 6 KB module: past the trigger factrail sends the old writes'
    content briefed (the upstream still validates every request), Claude Code's files are
    whole, and the session costs less than direct."""
    direct, through, factrail = stack.pair(LONG, {"writes": 3})
    completed(direct)
    completed(through)
    assert factrail["compactions"] >= 2
    assert max(r["briefed_writes"] for r in through.main) >= 3
    assert all(r["briefed_writes"] == 0 for r in direct.main)
    project = stack.work / f"{stack.runs}-b" / "project"
    written = sorted(project.glob("src/generated_*.py"))
    assert len(written) == len(range(3, LONG - 1, 3))
    for path in written:
        step = int(path.stem.rsplit("_", 1)[1])
        assert path.read_text() == written_module(step)
    assert through.billed < direct.billed


def test_signed_thinking_blocks_and_parallel_calls_go_back_as_the_api_requires(
    stack: Pairs,
) -> None:
    """Every answer starts with a signed thinking block, which Claude Code sends back and the
    endpoint rejects if any byte of it changed (as the API checks its signature), and every
    third step asks for two tool calls at once, each to be answered in the next message.
    Through several compactions every request stays valid, every thinking block is still
    there, and the session costs less than direct."""
    direct, through, factrail = stack.pair(LONG, {"thinking": True, "parallel": 3})
    requests = len(direct.main)
    assert requests < LONG + 1  # some steps made two calls
    completed(direct)
    completed(through)
    assert len(through.main) == requests
    assert factrail["compactions"] >= 2
    assert through.main[-1]["thinking_sent"] == direct.main[-1]["thinking_sent"] == requests - 1
    assert through.billed < direct.billed


def test_on_opus_5_5_whose_cache_reads_cost_half_as_much_it_rarely_compacts(stack: Pairs) -> None:
    """Claude Code's default model, Opus 5.5, reads the cache at 0.05 of input and writes it at
    1.25: a compaction needs about twice the turns to pay back. The gate prices the model the
    request names, so the 40-call session compacts at most twice (under Opus 5's prices it
    compacts four times; once while the newest six messages were pinned) and costs no more
    than direct."""
    direct, through, factrail = stack.pair(LONG, {"model": "claude-opus-5-5"})
    completed(direct)
    completed(through)
    assert {r["model"] for r in through.main} == {"claude-opus-5-5"}
    assert factrail.get("compactions", 0) <= 2
    assert through.prices.cached == 0.05
    assert through.billed <= direct.billed
