"""The judge choice: the taint fence, then declared locality."""

from __future__ import annotations

from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factrail.policy.decide import Reason, Verdict, decide
from factrail.policy.taint import TaintScan, merge_taint

EMAIL = "mcp__email-gateway__ask_email"
TAINTED = TaintScan(True, 1, (EMAIL,))
CLEAN = TaintScan()
DETAIL = f"1 call(s): {EMAIL}"


def test_tainted_goes_to_the_rules() -> None:
    """A fenced session not declared local never reaches the model judge."""
    assert decide(taint=TAINTED, local=False) == Verdict(False, "tainted", DETAIL)


def test_declared_local_relaxes_the_fence() -> None:
    """A fenced session may reach a judge declared local, with the calls recorded."""
    assert decide(taint=TAINTED, local=True) == Verdict(True, "ok-local", DETAIL)


@pytest.mark.parametrize("local", [True, False])
def test_clean_uses_the_model(local: bool) -> None:
    """A clean session goes to the model, local or not, with no detail."""
    assert decide(taint=CLEAN, local=local) == Verdict(True, "ok", None)


def test_sticky_taint_decides_like_a_fresh_one() -> None:
    """A taint remembered from earlier in the session fences a clean transcript."""
    sticky = merge_taint({"tainted": True, "count": 1, "sample": [EMAIL], "at": 3}, CLEAN)
    assert sticky.sticky
    assert decide(taint=sticky, local=False) == Verdict(False, "tainted", DETAIL)
    assert decide(taint=sticky, local=True) == Verdict(True, "ok-local", DETAIL)


def test_the_detail_lists_the_sample() -> None:
    """The detail is the scan's count and sample, for the audit log."""
    scan = TaintScan(True, 7, ("a", "b", "c"))
    assert decide(taint=scan, local=False).detail == "7 call(s): a, b, c"


@given(
    tainted=st.booleans(),
    local=st.booleans(),
    count=st.integers(0, 100),
    sample=st.lists(st.text(max_size=5), max_size=3),
)
def test_only_the_taint_and_locality_matter(
    tainted: bool, local: bool, count: int, sample: list[str]
) -> None:
    """The model is refused exactly when tainted and not local; detail iff tainted."""
    scan = TaintScan(tainted, count, tuple(sample))
    verdict = decide(taint=scan, local=local)
    assert verdict.model == (not tainted or local)
    assert (verdict.detail is not None) == tainted
    assert verdict.reason in get_args(Reason)


def test_arguments_are_keyword_only() -> None:
    """`decide` takes its two inputs by name only."""
    with pytest.raises(TypeError):
        decide(TAINTED, False)  # type: ignore[call-arg]


def test_vocabulary() -> None:
    """The reasons a verdict (or the rules that finish a compaction) can give."""
    assert set(get_args(Reason)) == {"rules", "tainted", "unproven", "ok-local", "ok", "ok-rules"}
