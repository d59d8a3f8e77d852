"""Every labelled counter is exported at 0 for its known label values from the gateway's start,
so that `rate()` and `increase()` see a series' first event (a series born at 1 has no sample
before it to increase from)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from factrail.core.redact import FAMILY_LABELS
from factrail.gateway import metrics as metrics_module
from factrail.gateway.metrics import COMPACTION_LABELS, ROUTES, Metrics, request_labels
from factrail.gateway.relay import SHUTDOWN_CUT, UPSTREAM_CUT
from factrail.gateway.routing import ANTHROPIC_PASSTHROUGH, CHAT, MESSAGES, PASSTHROUGH, RESPONSES
from factrail.gateway.usage import MISS_REASONS
from factrail.policy.decide import Reason
from factrail.session.analyses import OUTCOMES as PREPARATION_OUTCOMES

Series = dict[str, frozenset[tuple[tuple[str, str], ...]]]

STEP_OUTCOMES = ("passthrough", "reapplied", "compacted", "failed-open", "shadow", "bypass")
MISS = (*sorted(MISS_REASONS), "other")
STORE_OPERATIONS = (
    "load",
    "save",
    "observe",
    "lease",
    "release",
    "link",
    "linked",
    "recent",
    "ping",
    "turns",
)
KNOWN: dict[str, list[dict[str, str]]] = {
    "factrail_compactions_total": [
        {"judge": "rules", "reason": r} for r in ("rules", "tainted", "unproven", "ok-rules")
    ]
    + [
        {"judge": j, "reason": r}
        for j in ("systemone", "tev")
        for r in ("ok", "ok-local", "ok-rules")
    ],
    "factrail_judge_requests_total": [
        {"judge": j, "outcome": o}
        for j in ("systemone", "tev")
        for o in ("ok", "transport", "deadline", "status", "malformed", "missing-answer", "error")
    ],
    "factrail_compaction_failures_total": [
        {"reason": r} for r in ("parse", "compact", "serialise", "injected")
    ],
    "factrail_redactions_total": [{"family": f} for f in FAMILY_LABELS],
    "factrail_outputs_save_failures_total": [{"reason": r} for r in ("quota", "error")],
    "factrail_outputs_removed_total": [{"reason": r} for r in ("expired", "quota")],
    "factrail_compaction_decisions_total": [
        {"decision": d} for d in ("pays", "forced", "cold", "waits", "declined")
    ],
    "factrail_preparations_total": [{"outcome": o} for o in ("done", "failed", "skipped")],
    "factrail_upstream_input_tokens_total": [
        {"kind": k} for k in ("uncached", "cached", "cache_write")
    ],
    "factrail_spared_input_tokens_total": [{"part": p} for p in ("kept_out", "rewritten")],
    "factrail_projected_spared_input_tokens_total": [
        {"part": p} for p in ("kept_out", "rewritten")
    ],
    "factrail_upstream_cache_misses_total": [
        {"reason": r, "outcome": o} for r in MISS for o in STEP_OUTCOMES
    ],
    "factrail_upstream_cache_missed_tokens_total": [
        {"reason": r, "outcome": o} for r in MISS for o in STEP_OUTCOMES
    ],
    "factrail_state_store_errors_total": [{"operation": op} for op in STORE_OPERATIONS],
}
"""The label values each labelled counter must show at 0 (requests: `test_requests_…`)."""
MAX_COUNTER_SERIES = 300
"""All counter series of a fresh gateway together: the label sets stay small and fixed."""


def counter_series(text: str) -> Series:
    """Each counter's `_total` samples (their label sets) in an exposition; any non-zero fails."""
    found: dict[str, set[tuple[tuple[str, str], ...]]] = {}
    for family in text_string_to_metric_families(text):
        if family.type != "counter":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                assert sample.value == 0, f"{sample.name}{sample.labels} = {sample.value}"
                found.setdefault(sample.name, set()).add(tuple(sorted(sample.labels.items())))
    return {name: frozenset(labels) for name, labels in found.items()}


def key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def test_a_fresh_gateway_exports_every_known_label_value_at_zero(client: TestClient) -> None:
    series = counter_series(client.get("/metrics").text)
    for name, known in KNOWN.items():
        missing = {key(labels) for labels in known} - series[name]
        assert not missing, f"{name}: {sorted(missing)}"
    labelled = {name for name, labels in series.items() if labels != {()}}
    assert labelled == set(KNOWN) | {"factrail_requests_total"}, "every labelled counter starts"
    assert sum(len(labels) for labels in series.values()) <= MAX_COUNTER_SERIES


def test_requests_start_for_each_route_outcome_and_status_class(client: TestClient) -> None:
    requests = counter_series(client.get("/metrics").text)["factrail_requests_total"]
    for route in ("chat_completions", "responses", "messages"):
        for outcome in STEP_OUTCOMES:
            for status_class in ("2xx", "4xx", "5xx"):
                labels = {"route": route, "outcome": outcome, "status_class": status_class}
                assert key(labels) in requests
    for route in ("chat_completions", "responses", "messages", "passthrough"):
        for outcome, status_class in (
            ("rejected", "4xx"),
            ("client-gone", "4xx"),
            ("upstream-cut", "2xx"),
            ("shutdown-cut", "2xx"),
        ):
            labels = {"route": route, "outcome": outcome, "status_class": status_class}
            assert key(labels) in requests
    for status_class in ("2xx", "4xx", "5xx"):
        labels = {"route": "passthrough", "outcome": "passthrough", "status_class": status_class}
        assert key(labels) in requests
    # A passthrough route is never compacted: no series for what it cannot do.
    assert key({"route": "passthrough", "outcome": "compacted", "status_class": "2xx"}) not in (
        requests
    )


def test_the_known_values_are_the_code_s_own() -> None:
    """The label sets follow the enumerations where the values are made."""
    assert {r.label for r in (CHAT, RESPONSES, MESSAGES, PASSTHROUGH, ANTHROPIC_PASSTHROUGH)} == (
        set(ROUTES)
    )
    assert {o for _, o, _ in request_labels()} >= {UPSTREAM_CUT, SHUTDOWN_CUT}
    assert {reason for _, reason in COMPACTION_LABELS} == set(get_args(Reason))
    analyses = Path(metrics_module.__file__).parents[1] / "session" / "analyses.py"
    observed = set(re.findall(r'_observe\("([a-z-]+)"', analyses.read_text(encoding="utf-8")))
    assert observed == set(PREPARATION_OUTCOMES) == {"done", "failed", "skipped"}


def test_a_counted_event_lands_on_a_started_series() -> None:
    """Counting goes on adding to the series that were there at 0 (no second series)."""
    metrics = Metrics()
    metrics.count_request("messages", "compacted", 200)
    metrics.count_request("messages", "compacted", 201)
    metrics.store_errors.labels("save").inc()
    text = metrics.render().decode()
    samples = {
        (s.name, key(s.labels)): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    labels = {"route": "messages", "outcome": "compacted", "status_class": "2xx"}
    assert samples[("factrail_requests_total", key(labels))] == 2
    assert samples[("factrail_state_store_errors_total", key({"operation": "save"}))] == 1
    assert samples[("factrail_state_store_errors_total", key({"operation": "load"}))] == 0


def test_the_workers_files_carry_the_zero_series(tmp_path: Path) -> None:
    """With `--workers N` every worker writes its series to the shared directory at 0, so a
    scrape of any worker shows them before any event."""
    script = "import sys; from factrail.gateway.metrics import Metrics\n"
    script += "sys.stdout.write(Metrics().render().decode())\n"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()), "multiprocess mode wrote the worker's file"
    series = counter_series(done.stdout)
    for name in ("factrail_state_store_errors_total", "factrail_compactions_total"):
        assert {key(labels) for labels in KNOWN[name]} <= series[name], name
    labels = {"route": "chat_completions", "outcome": "failed-open", "status_class": "2xx"}
    assert key(labels) in series["factrail_requests_total"]
