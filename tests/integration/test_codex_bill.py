"""The bill of a second real client: the Codex CLI (pinned in `plugin/`) runs one scripted tool
loop over the Responses API, direct against a scripted endpoint that bills like OpenAI's prompt
cache and once through `factrail serve`; both sessions are priced from the endpoint's own usage
records under OpenAI's prices for the model (cached input 0.1 of uncached). See
`bench/codex_bill.py` for the same figures printed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from factrail.gateway.pool_watch import POOL_WATCH_S
from tests.integration.bills import Pairs, completed
from tests.integration.codex import CODEX, responses_pairs, run_session
from tests.integration.processes import metric_total

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not CODEX.exists(), reason="Codex CLI not installed: run `make node-deps` (needs npm)"
    ),
]

TRIGGER = 44_000
SHORT, ONCE, LONG = 16, 22, 40
"""Tool calls per session: below the trigger, past it once near the end, past it many times."""
ROUTE = "responses"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pairs]:
    with responses_pairs(tmp_path_factory.mktemp("codex"), run_session, TRIGGER) as pairs:
        yield pairs


def test_a_session_below_the_trigger_costs_the_same(stack: Pairs) -> None:
    stack.same_below_the_trigger(SHORT)


def test_a_long_session_costs_less_and_keeps_the_fact(stack: Pairs) -> None:
    stack.cheaper_when_long(LONG)


def test_a_session_past_the_trigger_once_costs_no_more(stack: Pairs) -> None:
    direct, through, factrail = stack.pair(ONCE)
    completed(direct, ONCE)
    completed(through, ONCE)
    assert factrail["compacted"] == 1
    assert through.billed <= direct.billed


def test_reasoning_items_and_parallel_calls_go_back_as_the_api_requires(stack: Pairs) -> None:
    """A reasoning model's answers start with an opaque reasoning item that the client sends
    back, and every third step asks for two calls at once. The API rejects a request where a
    reasoning item is not right before the call or answer it produced, or a call without its
    output. Through several compactions every request stays valid, every reasoning item goes
    upstream byte for byte, and the outputs of parallel calls follow their calls in order."""
    direct, through, factrail = stack.pair(LONG, {"reasoning": True, "parallel": 3})
    requests = len(direct.main)
    assert requests < LONG + 1  # some steps made two calls
    completed(direct, LONG, requests)
    completed(through, LONG, requests)
    assert factrail["compactions"] >= 2
    assert through.main[-1]["reasoning_sent"] == requests - 1
    assert all(r["reasoning_altered"] == 0 for r in through.main)
    assert all(r["outputs_in_order"] for r in through.main)
    assert through.billed < direct.billed


def test_on_gpt_6_code_mode_and_the_paid_cache_writes_cost_less_through_factrail(
    stack: Pairs,
) -> None:
    """On GPT-6 Codex works in code mode: its tools arrive as an `additional_tools` input item,
    and every call is JavaScript for `exec` (a `custom_tool_call`). The model's cache is written
    at breakpoints and bills each write at 1.25x, read at 0.1x. Through factrail every request
    stays valid, the outputs of code-mode calls are reduced, and a breakpoint on the frozen
    zone's last output lets each later compaction read past the head (without it each of four
    compactions re-read the head alone and the session cost 0.910 of direct, against 0.830)."""
    direct, through, factrail = stack.pair(LONG, {"model": "gpt-6-sol"})
    completed(direct, LONG)
    completed(through, LONG)
    assert all(r["model"] == "gpt-6-sol" for r in through.main)
    assert direct.total("cache_creation") > 0 and through.total("input_tokens") == 0
    assert all(r["marked"] == [] for r in direct.main)
    assert factrail["compactions"] >= 3
    changed = [r for r in through.main if r.get("first_diff") is not None]
    head = through.main[0]["cache_creation"]
    assert [r["marked"] for r in changed] and all(r["marked"] for r in changed)
    assert all(r["cache_read"] > head for r in changed[1:])
    assert through.billed < 0.9 * direct.billed


def test_sessions_that_end_on_the_last_event_leave_no_connection_lost(stack: Pairs) -> None:
    """Codex drops its connection as soon as it reads `response.completed`. The relay used to
    cancel itself natively then, and when that landed while the finished upstream was being
    closed it cut httpcore's hand-back of the connection short: nearly every session lost one,
    and after four a gateway answered everything with 504s. Six sessions through one gateway
    complete, factrail answers none with a 5xx, and its pool gauge shows no connection lost
    (on the old relay it read 1 after the first session and 3 after the second)."""
    while stack.runs < 6:
        _, through, _ = stack.pair(SHORT)
        completed(through, SHORT)
    time.sleep(POOL_WATCH_S + 0.5)  # one refresh of the pool gauges after the last session
    metrics = httpx.get(f"{stack.gateway_root}/metrics", timeout=10).text
    assert metric_total(metrics, "factrail_requests_total", route=ROUTE) >= 6 * (SHORT + 1)
    assert metric_total(metrics, "factrail_requests_total", status_class="5xx") == 0
    assert metric_total(metrics, "factrail_upstream_connections", state="idle") >= 1
    assert metric_total(metrics, "factrail_upstream_connections", state="orphaned") == 0
