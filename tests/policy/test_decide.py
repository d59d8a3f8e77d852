"""Judge choice (criteria 13–27, 31)."""

from __future__ import annotations

import itertools
from typing import Any, get_args

import pytest

from factrail.policy.decide import OK_RULES, Judge, Reason, Verdict, decide
from factrail.policy.options import Fallback, PolicyOptions, declared_local, parse_fallback
from factrail.policy.taint import TaintScan, merge_taint

EMAIL = "mcp__email-gateway__ask_email"
TAINTED = TaintScan(True, 1, (EMAIL,), False)
CLEAN = TaintScan()
DETAIL = f"1 call(s): {EMAIL}"
FALLBACKS: tuple[Fallback, ...] = ("rules", "summary")


def test_switched_off_beats_everything() -> None:
    """Criteria 13 and 23 (switched-off half)."""
    for fallback, local, taint, credentials in itertools.product(
        FALLBACKS, (True, False), (TAINTED, CLEAN), (True, False)
    ):
        verdict = decide(
            enabled=False, credentials=credentials, taint=taint, local=local, fallback=fallback
        )
        assert verdict == Verdict("builtin", "switched-off", None)


def test_no_key() -> None:
    """Criteria 14, 15 and 23 (no-key half): no key beats taint and locality."""
    for taint, local in itertools.product((TAINTED, CLEAN), (True, False)):
        verdict = decide(
            enabled=True, credentials=False, taint=taint, local=local, fallback="rules"
        )
        assert verdict == Verdict("rules", "no-key", None)


def test_tainted_goes_to_the_rules() -> None:
    """Criteria 16 and 20."""
    verdict = decide(enabled=True, credentials=True, taint=TAINTED, local=False, fallback="rules")
    assert verdict == Verdict("rules", "tainted", DETAIL)


def test_clean_with_credentials_uses_the_model() -> None:
    """Criteria 17 and 24."""
    for local in (True, False):
        verdict = decide(enabled=True, credentials=True, taint=CLEAN, local=local, fallback="rules")
        assert verdict == Verdict("model", "ok", None)


def test_summary_fallback() -> None:
    """Criterion 18."""
    tainted = decide(enabled=True, credentials=True, taint=TAINTED, local=False, fallback="summary")
    assert tainted == Verdict("builtin", "tainted", DETAIL)
    no_key = decide(enabled=True, credentials=False, taint=CLEAN, local=False, fallback="summary")
    assert no_key == Verdict("builtin", "no-key", None)
    clean = decide(enabled=True, credentials=True, taint=CLEAN, local=False, fallback="summary")
    assert clean.judge == "model"
    assert parse_fallback("SUMMARY") == "summary"
    assert parse_fallback("nonsense") == "rules"


def test_declared_local_relaxes_the_fence() -> None:
    """Criterion 19."""
    verdict = decide(enabled=True, credentials=True, taint=TAINTED, local=True, fallback="rules")
    assert verdict == Verdict("model", "ok-local", DETAIL)


@pytest.mark.parametrize(
    "value",
    [
        None,
        False,
        0,
        1,
        "",
        "TRUE",
        " true",
        "yes",
        "on",
        "local",
        "http://127.0.0.1:8000",
        "127.0.0.1",
        {},
        [],
        ["true"],
    ],
)
def test_only_true_declares_local(value: Any) -> None:
    """Criterion 21."""
    assert not declared_local(value)
    options, _ = PolicyOptions.from_mapping({"backendLocal": value})
    assert options.backend_local is False
    verdict = decide(
        enabled=True,
        credentials=True,
        taint=TAINTED,
        local=options.backend_local,
        fallback="rules",
    )
    assert verdict.reason == "tainted"
    assert declared_local(True)
    assert declared_local("true")


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8000/v1", "http://localhost:11434", "http://192.168.1.20/v1"]
)
def test_a_local_url_is_never_inferred(url: str) -> None:
    """Criterion 22."""
    options, _ = PolicyOptions.from_mapping({"baseUrl": url})
    assert options.base_url == url
    assert options.backend_local is False


def test_local_false_is_absent() -> None:
    """Criterion 25."""
    absent = PolicyOptions.from_mapping({})[0].backend_local
    false = PolicyOptions.from_mapping({"backendLocal": False})[0].backend_local
    for enabled, credentials, taint in itertools.product(
        (True, False), (True, False), (TAINTED, CLEAN)
    ):
        args: dict[str, Any] = {"enabled": enabled, "credentials": credentials, "taint": taint}
        assert decide(**args, local=absent, fallback="rules") == decide(
            **args, local=false, fallback="rules"
        )


def test_vocabulary() -> None:
    """Criterion 26."""
    assert set(get_args(Reason)) == {
        "ok",
        "ok-local",
        "switched-off",
        "no-key",
        "tainted",
        "ok-rules",
    }
    assert set(get_args(Judge)) == {"model", "rules", "builtin"}
    assert OK_RULES == "ok-rules"


def test_sticky_taint_decides_tainted_and_local_relaxes_it() -> None:
    """Criteria 27 and 31."""
    sticky = merge_taint({"tainted": True, "count": 1, "sample": [EMAIL], "at": 3}, CLEAN)
    assert sticky.sticky
    tainted = decide(enabled=True, credentials=True, taint=sticky, local=False, fallback="rules")
    assert tainted == Verdict("rules", "tainted", DETAIL)
    local = decide(enabled=True, credentials=True, taint=sticky, local=True, fallback="rules")
    assert local == Verdict("model", "ok-local", DETAIL)
