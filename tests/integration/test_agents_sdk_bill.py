"""The bill of a third real client: an OpenAI Agents SDK agent with the hosted `shell` tool,
which the SDK runs locally and answers with `shell_call_output` items (a stdout / stderr /
outcome chunk per command). It runs one scripted tool loop direct against a scripted Responses
endpoint that validates every item and bills like OpenAI's prompt cache, and once through
`factrail serve`; both priced from the endpoint's usage records under OpenAI's prices for the
model (cached input 0.1 of uncached). See `bench/agents_sdk_bill.py` for the figures printed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.agents_sdk import AVAILABLE, run_session
from tests.integration.bills import Pairs, completed
from tests.integration.codex import responses_pairs

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not AVAILABLE, reason="the Agents SDK is a dev dependency: make test"),
]

TRIGGER = 20_000
SHORT, LONG = 8, 30
"""Shell calls per session: below the trigger, and past it more than twice."""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pairs]:
    with responses_pairs(tmp_path_factory.mktemp("agents-sdk"), run_session, TRIGGER) as pairs:
        yield pairs


def test_a_session_below_the_trigger_costs_the_same(stack: Pairs) -> None:
    stack.same_below_the_trigger(SHORT)


def test_hosted_shell_outputs_are_reduced_and_the_session_costs_less(stack: Pairs) -> None:
    direct, through, _ = stack.cheaper_when_long(LONG)
    assert max(r["cache_read"] for r in through.main) < max(r["cache_read"] for r in direct.main)


def test_on_gpt_6_a_cache_that_reads_only_the_head_is_priced_so(stack: Pairs) -> None:
    """GPT-6 keeps its prompt cache only at breakpoints, on content blocks, and a shell output
    has none to carry one: after the first compaction no breakpoint marks the end of the frozen
    zone, and each later compaction re-writes the whole transcript at 1.25x. factrail measures
    that on a compaction turn (the provider read none of the unchanged prefix) and prices the
    next compactions so: fewer of them, and the session costs less than direct (7 compactions
    and 1.067 of direct before the gate knew)."""
    direct, through, factrail = stack.pair(LONG + 10, {"model": "gpt-6-sol"})
    completed(direct, LONG + 10)
    completed(through, LONG + 10)
    assert all(r["model"] == "gpt-6-sol" for r in through.main)
    assert direct.total("cache_creation") > 0  # the write-billed breakpoint cache
    changed = [r for r in through.main if r.get("first_diff") is not None]
    assert len(changed) == factrail["compacted"] >= 2
    assert all(r["cache_read"] == 0 for r in changed)  # each compaction read nothing
    assert factrail["compactions"] <= 5
    assert through.billed < direct.billed
