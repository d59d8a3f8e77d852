"""Prometheus metrics of the gateway (DESIGN §4): own registry, base units, explicit buckets.

Label values come from small fixed sets (routes, outcomes, judge kinds, reasons, families);
nothing per session, model or path is ever a label. Every labelled counter exports its known
label values at 0 from the start, so `rate()` and `increase()` see a series' first event.

With several workers (`factrail serve --workers N`) every worker writes its samples to files
in `PROMETHEUS_MULTIPROC_DIR` (prometheus-client's multiprocess mode, which `serve` sets up) and
a scrape of any worker adds them up: counters and histograms are summed over the workers,
gauges take their maximum.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from typing import Any, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from factrail import __version__
from factrail.core.redact import FAMILY_LABELS
from factrail.gateway.relay import SHUTDOWN_CUT, UPSTREAM_CUT
from factrail.gateway.sessions import TurnBill
from factrail.gateway.upstream import PoolState
from factrail.gateway.usage import MISS_REASONS, Usage
from factrail.judges.base import ErrorKind, JudgeKind
from factrail.session import TurnResult
from factrail.session.analyses import OUTCOMES as PREPARATION_OUTCOMES
from factrail.session.gate import DECISIONS
from factrail.session.result import Outcome
from factrail.stores.outputs import SweepReport
from factrail.stores.state import OPERATIONS

CONTENT_TYPE = CONTENT_TYPE_LATEST
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
TOKEN_BUCKETS = (
    1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 75_000, 100_000, 125_000, 150_000,
    175_000, 200_000, 250_000, 300_000, 400_000, 500_000, 750_000, 1_000_000, 2_000_000,
)  # fmt: skip
RATIO_BUCKETS = tuple(round(0.05 * i, 2) for i in range(1, 21))
OVERHEAD_BUCKETS = (
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)  # fmt: skip
UPSTREAM_BUCKETS = (
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 600.0,
)  # fmt: skip
COMPACTION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0)
JUDGE_ERROR_KINDS = frozenset(get_args(ErrorKind))
JUDGE_OUTCOMES = ("ok", *get_args(ErrorKind), "error")
"""The `outcome` of a judge request (`error`: any other failure)."""
MODEL_JUDGES = tuple(kind for kind in get_args(JudgeKind) if kind != "rules")
"""The judges that make HTTP requests (the `judge` label of `factrail_judge_requests_total`)."""
COMPACTION_LABELS = (
    ("rules", "rules"),
    ("rules", "tainted"),
    ("rules", "unproven"),
    ("rules", "ok-rules"),
    *((judge, reason) for judge in MODEL_JUDGES for reason in ("ok", "ok-local", "ok-rules")),
)
"""The (`judge`, `reason`) pairs a compaction can carry (`session/judging.py`): the rules alone,
the fence keeping a model judge away, a plan the rules finished, a model judge's own verdict."""
FAILURE_PHASES = ("parse", "compact", "serialise", "injected")
"""Where a compaction step failed open (the `reason` label)."""
COUNT_BUCKETS = (1, 2, 3, 5, 8, 13, 21, 34, 55, 89)
SAVE_FAILURE_REASONS = ("quota", "error")
SWEEP_REASONS = ("expired", "quota")
ROUTES = ("chat_completions", "responses", "messages", "passthrough")
"""The `route` label: the three compaction routes, then every other path (either upstream)."""
STEP_OUTCOMES = (*get_args(Outcome), "failed-open", "shadow", "bypass")
"""The `x-factrail` value of a proxied request: what the compaction step made of it (`shadow`:
it ran on a copy and the request went as sent; `bypass`: `X-Factrail-Bypass: 1`)."""
MISS_LABELS = (*sorted(MISS_REASONS), "other")
STATUS_CLASSES = ("2xx", "4xx", "5xx")


def request_labels() -> Iterator[tuple[str, str, str]]:
    """The (`route`, `outcome`, `status_class`) series of `factrail_requests_total` that exist
    from the start: each route's `x-factrail` values with whatever the upstream answered, a
    request refused (`rejected`: 400/413) or left (`client-gone`: 499), a relay cut short after
    its head was sent."""
    for route in ROUTES:
        outcomes = STEP_OUTCOMES if route != "passthrough" else ("passthrough",)
        for outcome in outcomes:
            for status_class in STATUS_CLASSES:
                yield route, outcome, status_class
        yield route, "rejected", "4xx"
        yield route, "client-gone", "4xx"
        yield route, UPSTREAM_CUT, "2xx"
        yield route, SHUTDOWN_CUT, "2xx"


class Metrics:
    """Every metric the gateway exports, registered in one private registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        p = "factrail_"
        self.requests = Counter(
            p + "requests", "Proxied requests.", ["route", "outcome", "status_class"], registry=r
        )
        self._request_counts: dict[tuple[str, str, int], Counter] = {}
        for route, outcome, status_class in request_labels():
            key = (route, outcome, int(status_class[0]))
            self._request_counts[key] = self.requests.labels(route, outcome, status_class)
        self.overhead = Histogram(
            p + "overhead_seconds",
            "Time the proxy adds before the upstream call (read, parse, compact, serialise).",
            buckets=OVERHEAD_BUCKETS,
            registry=r,
        )
        self.upstream = Histogram(
            p + "upstream_seconds",
            "Upstream time to response headers.",
            buckets=UPSTREAM_BUCKETS,
            registry=r,
        )
        self.compactions = Counter(
            p + "compactions", "Compactions performed.", ["judge", "reason"], registry=r
        )
        for judge, reason in COMPACTION_LABELS:
            self.compactions.labels(judge, reason)
        self.compaction_seconds = Histogram(
            p + "compaction_seconds",
            "Duration of compaction steps that compacted.",
            buckets=COMPACTION_BUCKETS,
            registry=r,
        )
        self.tokens_before = Histogram(
            p + "compaction_tokens_before",
            "Estimated tokens before a compaction.",
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.tokens_after = Histogram(
            p + "compaction_tokens_after",
            "Estimated tokens after a compaction.",
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.remaining_ratio = Histogram(
            p + "compaction_tokens_remaining_ratio",
            "Tokens after over tokens before, once per compaction.",
            buckets=RATIO_BUCKETS,
            registry=r,
        )
        self.tokens_saved = Counter(
            p + "tokens_saved", "Estimated tokens removed by compactions.", registry=r
        )
        self.judge_requests = Counter(
            p + "judge_requests", "Judge requests.", ["judge", "outcome"], registry=r
        )
        for judge in MODEL_JUDGES:
            for outcome in JUDGE_OUTCOMES:
                self.judge_requests.labels(judge, outcome)
        self.judge_seconds = Histogram(
            p + "judge_seconds",
            "Judge round duration.",
            buckets=COMPACTION_BUCKETS,
            registry=r,
        )
        self.store_errors = Counter(
            p + "state_store_errors",
            "State store calls that failed (compaction went on without the store; the fence "
            "treated the session as unproven).",
            ["operation"],
            registry=r,
        )
        for operation in OPERATIONS:
            self.store_errors.labels(operation)
        self.fenced = Counter(
            p + "fenced_sessions",
            "Sessions fenced from a remote judge (counted when the fenced call is first seen).",
            registry=r,
        )  # fmt: skip
        self.failures = Counter(
            p + "compaction_failures", "Compaction steps that failed open.", ["reason"], registry=r
        )
        for phase in FAILURE_PHASES:
            self.failures.labels(phase)
        self.redactions = Counter(
            p + "redactions", "Credentials redacted in saved outputs.", ["family"], registry=r
        )
        for family in FAMILY_LABELS:
            self.redactions.labels(family)
        self.save_failures = Counter(
            p + "outputs_save_failures",
            "Reduced originals not saved (their notes name the call): the byte quota or an error.",
            ["reason"],
            registry=r,
        )
        for reason in SAVE_FAILURE_REASONS:
            self.save_failures.labels(reason)
        self.outputs_removed = Counter(
            p + "outputs_removed",
            "Saved outputs removed by the timed sweep: past the retention, or over a quota.",
            ["reason"],
            registry=r,
        )
        for reason in SWEEP_REASONS:
            self.outputs_removed.labels(reason)
        self.outputs_bytes = Gauge(
            p + "outputs_bytes",
            "Bytes of saved outputs after the last sweep.",
            registry=r,
            multiprocess_mode="max",
        )
        self.reapplied = Counter(
            p + "reapplied_results", "Tool results re-reduced from a stored plan.", registry=r
        )
        self.rescued = Counter(
            p + "rescued_results",
            "Recent tool results cut because the request would not fit the model's window.",
            registry=r,
        )
        self.decisions = Counter(
            p + "compaction_decisions",
            "Turns due for compaction, by what the cost gate made of them.",
            ["decision"],
            registry=r,
        )
        for decision in DECISIONS:
            self.decisions.labels(decision)
        self.preparations = Counter(
            p + "preparations",
            "Background analyses of a turn's results ahead of the compaction turn.",
            ["outcome"],
            registry=r,
        )
        for outcome in PREPARATION_OUTCOMES:
            self.preparations.labels(outcome)
        self.preparation_seconds = Histogram(
            p + "preparation_seconds",
            "Duration of background analyses that ran (done or failed).",
            buckets=COMPACTION_BUCKETS,
            registry=r,
        )
        self.session_compactions = Histogram(
            p + "session_compactions",
            "The session's compaction count, observed at each compaction.",
            buckets=COUNT_BUCKETS,
            registry=r,
        )
        self.upstream_input = Counter(
            p + "upstream_input_tokens",
            "Input tokens the upstream reported, by how it bills them.",
            ["kind"],
            registry=r,
        )
        self._uncached, self._cached, self._cache_write = (
            self.upstream_input.labels(kind) for kind in ("uncached", "cached", "cache_write")
        )
        self.input_removed = Counter(
            p + "input_tokens_removed",
            "Input tokens factrail kept out of upstream requests, in the upstream's tokens.",
            registry=r,
        )
        self.billed_input = Counter(
            p + "billed_input_tokens",
            "Billed-equivalent input tokens of the answered turns factrail stepped, each priced"
            " at its model's prices (uncached input tokens' worth).",
            registry=r,
        )
        self.spared_input = Counter(
            p + "spared_input_tokens",
            "Billed-equivalent input tokens those turns cost less than sent whole (kept_out:"
            " what they did not send) and more (rewritten: re-writing what compactions changed).",
            ["part"],
            registry=r,
        )
        self._kept_out, self._rewritten = (
            self.spared_input.labels(part) for part in ("kept_out", "rewritten")
        )
        self.recent_sessions = Gauge(
            p + "recent_sessions",
            "Of the state store's most recent sessions with a bill (gateway/bills.py): live (seen"
            " within the cache's lifetime), settled, settled ones that cost more than sent"
            " whole, and those of them never compacted on a bet (only forced or cold).",
            ["state"],
            registry=r,
            multiprocess_mode="livemax",
        )
        self.recent_bill_ratio = Gauge(
            p + "recent_sessions_bill_ratio",
            "Those sessions' bill over what they would have cost sent whole, all together"
            " (NaN: none has a bill).",
            registry=r,
            multiprocess_mode="livemax",
        )
        self.recent_bill_ratio.set(math.nan)
        self.cache_breaks = Counter(
            p + "cache_breaks",
            "Turns not compacted that read less of the prompt cache than the session's last.",
            registry=r,
        )
        self.cache_misses = Counter(
            p + "upstream_cache_misses",
            "Prompt-cache misses the upstream diagnosed (Anthropic cache diagnostics), by reason"
            " and by what factrail did to the turn.",
            ("reason", "outcome"),
            registry=r,
        )
        self.cache_missed = Counter(
            p + "upstream_cache_missed_tokens",
            "Input tokens the upstream says it would have read from its cache had the prefix"
            " matched the previous request's, by reason and by what factrail did to the turn.",
            ("reason", "outcome"),
            registry=r,
        )
        for reason in MISS_LABELS:
            for outcome in STEP_OUTCOMES:
                self.cache_misses.labels(reason, outcome)
                self.cache_missed.labels(reason, outcome)
        self.invalidated = Histogram(
            p + "compaction_invalidated_tokens",
            "Tokens from a compaction's first changed message to the end (cache re-read).",
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.cache_reach = Histogram(
            p + "compaction_cache_reach",
            "Share of a compaction's unchanged prefix the upstream read from its cache.",
            buckets=(0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0),
            registry=r,
        )
        self.projected_compactions = Counter(
            p + "projected_compactions",
            "Compactions shadow mode decided and did not send (FACTRAIL_MODE=shadow).",
            registry=r,
        )
        self.projected_spared = Counter(
            p + "projected_spared_input_tokens",
            "Billed-equivalent input tokens the turns shadow mode forwarded whole would have cost"
            " less through factrail (kept_out) and more (rewritten); their bill as sent is"
            " factrail_billed_input_tokens_total.",
            ["part"],
            registry=r,
        )
        self._projected_kept_out, self._projected_rewritten = (
            self.projected_spared.labels(part) for part in ("kept_out", "rewritten")
        )
        self.upstream_connections = Gauge(
            p + "upstream_connections",
            "Upstream pool connections: busy, idle, and orphaned (busy with no request in "
            "flight: lost to the pool until reclaimed, so it should stay 0).",
            ["state"],
            registry=r,
            multiprocess_mode="livesum",
        )
        self.pool_reclaimed = Counter(
            p + "upstream_connections_reclaimed",
            "Upstream connections the pool had lost (busy with no request in flight), reclaimed "
            "by replacing their shard.",
            registry=r,
        )
        self.build_info = Gauge(
            p + "build_info", "Build information.", ["version"], registry=r, multiprocess_mode="max"
        )
        self.build_info.labels(version=__version__).set(1)

    def count_request(self, route: str, outcome: str, status: int) -> None:
        """Count one answered request; the labelled child is looked up once per label set."""
        key = (route, outcome, status // 100)
        child = self._request_counts.get(key)
        if child is None:
            child = self.requests.labels(route, outcome, f"{status // 100}xx")
            self._request_counts[key] = child
        child.inc()

    def record_preparation(self, outcome: str, seconds: float) -> None:
        """One background preparation: `done`, `failed` or `skipped` (queue full)."""
        self.preparations.labels(outcome).inc()
        if outcome != "skipped":
            self.preparation_seconds.observe(seconds)

    def record_usage(self, usage: Usage, removed: int, outcome: str) -> None:
        """One upstream response's reported input, the tokens factrail kept out of it, and the
        upstream's diagnosis of a cache miss on a turn factrail forwarded as `outcome`."""
        self._uncached.inc(usage.uncached)
        self._cached.inc(usage.cached)
        self._cache_write.inc(usage.cache_write)
        if removed > 0:
            self.input_removed.inc(removed)
        if usage.miss is not None:
            self.cache_misses.labels(usage.miss.reason, outcome).inc()
            self.cache_missed.labels(usage.miss.reason, outcome).inc(usage.miss.tokens)

    def record_bill(self, bill: TurnBill) -> None:
        """What one answered turn adds to its session's bill, for the fleet."""
        self.billed_input.inc(max(bill.billed, 0.0))
        self._kept_out.inc(max(bill.kept_out, 0.0))
        self._rewritten.inc(max(bill.rewritten, 0.0))

    def record_bills(self, summary: Mapping[str, Any]) -> None:
        """The recent sessions' bills together (`factrail.session.inspect.summary`)."""
        settled = summary["sessions"] - summary["live"]
        for state, count in (
            ("live", summary["live"]),
            ("settled", settled),
            ("above_whole", summary["above_whole"]),
            ("above_whole_unbet", summary["above_unbet"]),
        ):
            self.recent_sessions.labels(state).set(count)
        ratio = summary["ratio"]
        self.recent_bill_ratio.set(math.nan if ratio is None else ratio)  # none: no value

    def record_projected(self, bill: TurnBill) -> None:
        """What one answered turn forwarded whole in shadow mode would have cost less and more
        through factrail."""
        self._projected_kept_out.inc(max(bill.kept_out, 0.0))
        self._projected_rewritten.inc(max(bill.rewritten, 0.0))

    def record_projected_turn(self, result: TurnResult) -> None:
        """Count a step run in shadow mode: its judge calls, redactions, saved outputs and
        fence as `record_turn` does, and a compaction it decided as projected (nothing it
        decided was sent)."""
        self._record_step(result)
        if result.outcome == "compacted":
            self.projected_compactions.inc()

    def record_turn(self, result: TurnResult, seconds: float) -> None:
        """Count what one compaction step did."""
        if result.reapplied:
            self.reapplied.inc(result.reapplied)
        self._record_step(result)
        if result.outcome != "compacted":
            return
        self.compactions.labels(result.judge, result.reason or "threshold").inc()
        if result.rescued:
            self.rescued.inc(result.rescued)
        self.compaction_seconds.observe(seconds)
        self.tokens_before.observe(result.tokens_before)
        self.tokens_after.observe(result.tokens_after)
        if result.tokens_before > 0:
            self.remaining_ratio.observe(result.tokens_after / result.tokens_before)
        self.tokens_saved.inc(max(result.tokens_before - result.tokens_after, 0))
        self.invalidated.observe(result.invalidated_tokens)
        self.session_compactions.observe(result.compactions)

    def _record_step(self, result: TurnResult) -> None:
        """What a step did whether or not what it decided was sent."""
        for kind, count in result.judge_outcomes.items():
            label = kind if kind == "ok" or kind in JUDGE_ERROR_KINDS else "error"
            self.judge_requests.labels(result.judge, label).inc(count)
        for family, count in result.redactions.items():
            self.redactions.labels(family).inc(count)
        for reason, count in result.save_failures.items():
            self.save_failures.labels(reason).inc(count)
        if result.fenced:
            self.fenced.inc()
        if result.decision is not None:
            self.decisions.labels(result.decision).inc()

    def record_sweep(self, report: SweepReport) -> None:
        """One sweep of the saved outputs."""
        if report.expired:
            self.outputs_removed.labels("expired").inc(report.expired)
        if report.evicted:
            self.outputs_removed.labels("quota").inc(report.evicted)
        self.outputs_bytes.set(report.bytes)

    def record_pool(self, state: PoolState) -> None:
        """The upstream pool as it stands now."""
        gauge = self.upstream_connections
        gauge.labels("busy").set(state.busy)
        gauge.labels("idle").set(state.idle)
        gauge.labels("orphaned").set(state.orphaned)

    def render(self) -> bytes:
        """The text exposition format: this process's registry, or in multiprocess mode every
        worker's samples added up."""
        shared = os.environ.get(MULTIPROC_ENV)
        if not shared:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=shared)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
