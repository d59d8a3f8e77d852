"""What the pages show, read with the very functions the JSON routes call, so every figure on a
page equals the one `/v1/factrail/sessions` gives; plus what only the pages show (the original
of each reduced result beside what was sent), read through the stores. Runs in a worker thread:
every call here may touch a store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from factrail.gateway.pages.chart import Rule, Series, line_chart
from factrail.gateway.pages.compare import Compared, compare
from factrail.gateway.proxy import Gateway
from factrail.gateway.routes.ops import loaded_report
from factrail.stores.outputs import OutputStore
from factrail.stores.state import SessionState, StateStore

DECISIONS = {
    "pays": "pays back its cache break",
    "forced": "past the danger line",
    "cold": "the cache was cold",
}
"""Why a compaction ran, by the cost gate's decision."""
MAX_COMPARED = 12
"""Reduced results shown beside their originals per compaction; the rest are only listed."""


def above_line(summary: Mapping[str, Any]) -> str | None:
    """`N settled sessions cost more than sent whole, M of them never compacted on a bet`, or
    None when none did."""
    above = summary.get("above_whole")
    if not isinstance(above, int) or above <= 0:
        return None
    noun = "session" if above == 1 else "sessions"
    line = f"{above} settled {noun} cost more than sent whole"
    unbet = summary.get("above_unbet")
    if isinstance(unbet, int):
        line += f", {unbet} of them never compacted on a bet"
    return line


@dataclass(frozen=True, slots=True)
class Result:
    """One reduced result of a compaction as its page block shows it."""

    row: Mapping[str, Any]
    """The report's row (tool id, tool, sizes, note without capabilities)."""
    compared: Compared | None
    """Beside its original; None past `MAX_COMPARED`."""


@dataclass(frozen=True, slots=True)
class Compaction:
    """One compaction of the session's history: the report's record and its results."""

    index: int
    """Its place in the report's `history` (for `data-field` paths)."""
    record: Mapping[str, Any]
    why: str | None
    results: list[Result]


@dataclass(frozen=True, slots=True)
class SessionView:
    """Everything the session page shows."""

    data: dict[str, Any]
    """The session route's JSON."""
    compactions: list[Compaction]
    """Newest first."""
    tokens_chart: str
    cost_chart: str


def session_view(
    gateway: Gateway, store: StateStore | None, outputs: OutputStore | None, session: str
) -> SessionView | None:
    """The session's page, or None when the store has no such session."""
    state = None if store is None else store.load(session)
    if store is None or state is None:
        return None
    data = loaded_report(gateway, store, session, state)  # the session route's JSON, one load
    wholes = _wholes(state)
    compactions = []
    for index, record in enumerate(data.get("history", ())):
        results = [
            Result(
                row,
                _compared(state, outputs, wholes.get((record.get("at_ms"), row.get("id"))), row)
                if n < MAX_COMPARED
                else None,
            )
            for n, row in enumerate(record.get("results", ()))
        ]
        why = DECISIONS.get(str(record.get("decision")))
        compactions.append(Compaction(index, record, why, results))
    turns = data.get("turns") or []
    return SessionView(
        data,
        compactions[::-1],
        tokens_chart(turns, data.get("lines")),
        cost_chart(turns),
    )


def tokens_chart(turns: Sequence[Mapping[str, Any]], lines: Any) -> str:
    """Tokens per turn as sent and as they would have been whole, with the soft, trigger and
    danger lines, each compaction's turn marked."""
    sent = [(t["n"], t["tokens_sent"]) for t in turns if _has(t, "n", "tokens_sent")]
    whole = [(t["n"], t["tokens_whole"]) for t in turns if _has(t, "n", "tokens_whole")]
    rules = []
    if isinstance(lines, Mapping):
        rules = [
            Rule(name, lines[name])
            for name in ("soft", "trigger", "danger")
            if isinstance(lines.get(name), int | float)
        ]
    marks = [
        t["n"]
        for t in turns
        if _has(t, "n") and (t.get("outcome") == "compacted" or t.get("decision"))
    ]
    chart = line_chart(
        [Series("whole", whole), Series("sent", sent)],
        rules,
        marks,
        label="tokens per turn, as sent and as they would have been whole",
    )
    return str(chart)


def cost_chart(turns: Sequence[Mapping[str, Any]]) -> str:
    """The billed-equivalent input tokens so far, turn by turn, against sending whole."""
    billed: list[tuple[float, float]] = []
    whole: list[tuple[float, float]] = []
    paid = direct = 0.0
    for t in turns:
        if not _has(t, "n", "billed", "whole_billed"):
            continue
        paid += t["billed"]
        direct += t["whole_billed"]
        billed.append((t["n"], paid))
        whole.append((t["n"], direct))
    chart = line_chart(
        [Series("whole", whole), Series("sent", billed)],
        label="billed so far, against sending every turn whole",
    )
    return str(chart)


def _has(row: Mapping[str, Any], *names: str) -> bool:
    return all(
        isinstance(row.get(n), int | float) and not isinstance(row.get(n), bool) for n in names
    )


def _wholes(state: SessionState) -> dict[tuple[Any, Any], str]:
    """The saved output id of each reduced result, by its compaction's time and its tool id
    (kept in the session's history, never shown)."""
    return {
        (h.get("at_ms"), r.get("id")): r["whole"]
        for h in state.history
        for r in h.get("results", ())
        if isinstance(r, Mapping) and isinstance(r.get("whole"), str)
    }


def _compared(
    state: SessionState,
    outputs: OutputStore | None,
    output_id: str | None,
    row: Mapping[str, Any],
) -> Compared:
    """The result beside its original (read through the output store by its capability)."""
    original = None
    if outputs is not None and output_id is not None:
        original = outputs.get(output_id, capability_only=True)
    entry = state.plan.get(str(row.get("id")))
    return compare(original, None if entry is None else entry.reduced_text, output_id)
