"""What the last compactions of a session did, for `factrail inspect` and the admin route.

A report names each reduced result by its tool id, with its sizes and notes, and says whether
its whole was saved; never by its output id: the capability in it opens the session's saved
outputs to anyone, so only the session's own notes (sent to its model) carry it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from factrail.policy.taint import holds_taint
from factrail.session.keys import SESSION_HEADER, is_client_alias
from factrail.stores.schema import COMPACTION_SCHEMA, VERSION, version_of
from factrail.stores.state import SessionState, StateStore


def bill(state: SessionState) -> dict[str, float] | None:
    """The session's bill so far (billed-equivalent input tokens, from the provider's usage, of
    the answered turns factrail stepped), what those turns would have cost sent whole
    (estimated: `policy.cost.spared`), and the ratio; None before any usage was reported."""
    return None if state.billed is None else account(state.billed, state.spared)


def account(billed: float, spared: float | None) -> dict[str, float]:
    """A bill against sending whole: billed, spared, whole (their sum) and the ratio."""
    spared = spared or 0.0
    whole = billed + spared
    return {
        "billed": round(billed, 1),
        "spared": round(spared, 1),
        "whole": round(whole, 1),
        "ratio": round(billed / whole, 4) if whole > 0 else 1.0,
    }


def projected(state: SessionState) -> dict[str, float] | None:
    """Shadow mode's projection for the session: the compactions it decided and did not send,
    what its answered turns would have been billed through factrail, what they were billed sent
    whole (as they went), and the ratio; None when no turn was projected."""
    if state.projected_billed is None:
        return None
    return {"compactions": state.shadow, **account(state.projected_billed, state.projected_spared)}


def taint_tool(state: SessionState) -> str | None:
    """The first fenced tool the session's taint record names (None: not tainted, or a record
    that names none)."""
    if not holds_taint(state.taint) or state.taint is None:
        return None
    sample = state.taint.get("sample")
    first = sample[0] if isinstance(sample, list) and sample else None
    return str(first)[:MAX_NAME] if first is not None else None


MAX_NAME = 80
"""The longest tool, client or model name a report shows."""


def sent_compactions(state: SessionState) -> int:
    """The compactions that were sent (shadow mode's are projected, not sent)."""
    return max(state.compactions - state.shadow, 0)


def latest(turns: Sequence[Mapping[str, Any]], name: str) -> str | None:
    """The newest turn record's `name` (client, model), as a short string."""
    for turn in reversed(turns):
        value = turn.get(name)
        if isinstance(value, str) and value:
            return value[:MAX_NAME]
    return None


@dataclass(frozen=True, slots=True)
class Recent:
    """One recent session as the listing shows it."""

    session: str
    updated_ms: int
    bill: dict[str, float] | None
    live: bool
    """Seen within the cache's lifetime: its last compaction may still pay back."""
    compactions: int = 0
    bets: int | None = 0
    """Of its compactions, those the cost gate ran on a bet that they pay back (None: not
    counted, a version-1 session record with compactions and no `bets`)."""
    forced: int | None = 0
    cold: int | None = 0
    client: str | None = None
    model: str | None = None
    turns: int = 0
    tainted: bool = False
    taint_tool: str | None = None
    projected: dict[str, float] | None = None


def summary(rows: Sequence[Recent]) -> dict[str, Any]:
    """Sessions' bills together: how many have one, how many are still live, how many of the
    others cost more than sent whole (and the worst; `above_unbet`: those of them the gate never
    compacted on a bet, only past the danger line or on a cold cache, which no payback horizon
    keeps under), and all of them against sending them whole."""
    known = [(r, r.bill) for r in rows if r.bill is not None]
    settled = [(r, b) for r, b in known if not r.live]
    above = [(r, b) for r, b in settled if b["spared"] < 0]
    billed, whole = sum(b["billed"] for _, b in known), sum(b["whole"] for _, b in known)
    shadowed = [r.projected for r in rows if r.projected is not None]
    p_billed, p_whole = sum(p["billed"] for p in shadowed), sum(p["whole"] for p in shadowed)
    return {
        "sessions": len(known),
        "live": len(known) - len(settled),
        "above_whole": len(above),
        "above_unbet": sum(1 for r, _ in above if r.bets == 0),
        "worst_ratio": max((b["ratio"] for _, b in above), default=None),
        "ratio": round(billed / whole, 4) if whole > 0 else None,
        "billed": round(billed, 1),
        "whole": round(whole, 1),
        "spared": round(whole - billed, 1),
        "projected": {
            "sessions": len(shadowed),
            "compactions": sum(int(p["compactions"]) for p in shadowed),
            "billed": round(p_billed, 1),
            "whole": round(p_whole, 1),
            "spared": round(p_whole - p_billed, 1),
            "ratio": round(p_billed / p_whole, 4) if p_whole > 0 else None,
        }
        if shadowed
        else None,
    }


def recent_bills(
    store: StateStore,
    limit: int,
    *,
    live_s: float,
    now: float | None = None,
    last_turn: bool = True,
) -> list[Recent]:
    """Of the `limit` most recently updated records, the sessions with their bills, each live
    when seen within `live_s` of `now` (default: the time now): not the fence's records of
    client session ids, nor any record with nothing to show (no bill, no compaction, no plan:
    the fence's record of a transcript's head, or a session whose first answer has not come
    back). `last_turn`: read each session's newest turn record for its client and model (the
    listing shows them; the bills' summary does not need them)."""
    live_from_ms = ((time.time() if now is None else now) - live_s) * 1000
    rows: list[Recent] = []
    for session, ms in store.recent(limit):
        if is_client_alias(session):
            continue
        loaded = store.load(session)
        if loaded is None:
            continue
        if loaded.billed is None and not loaded.compactions and not loaded.plan:
            continue
        live = ms >= live_from_ms
        last = store.turns(session, 1) if last_turn else []
        rows.append(
            Recent(
                session,
                ms,
                bill(loaded),
                live,
                sent_compactions(loaded),
                loaded.bets,
                loaded.forced,
                loaded.cold,
                latest(last, "client"),
                latest(last, "model"),
                loaded.turns,
                holds_taint(loaded.taint),
                taint_tool(loaded),
                projected(loaded),
            )
        )
    return rows


def recent_report(rows: Sequence[Recent]) -> dict[str, Any]:
    """`recent_bills` as JSON (the sessions route, `factrail inspect --list --json`)."""
    sessions = [
        {
            "session": r.session,
            "updated_ms": r.updated_ms,
            "live": r.live,
            "bill": r.bill,
            "compactions": r.compactions,
            "bets": r.bets,
            "forced": r.forced,
            "cold": r.cold,
            "client": r.client,
            "model": r.model,
            "turns": r.turns,
            "tainted": r.tainted,
            "taint_tool": r.taint_tool,
            "projected": r.projected,
        }
        for r in rows
    ]
    return {"sessions": sessions, "summary": summary(rows)}


def report(
    session: str,
    state: SessionState,
    turns: Sequence[Mapping[str, Any]] = (),
    lines: Callable[[str], Mapping[str, int | None]] | None = None,
) -> dict[str, Any]:
    """The session's compactions (newest last; those of a version this reader does not know
    left out: `schema.COMPACTION_SCHEMA`), its turn log (`turns`: oldest first, each numbered
    from the session's count of answered turns) and its standing figures, as JSON, with no
    capability in them (`without_capabilities`); `lines(model)`: the soft line, trigger,
    danger line and window of the session's model (`lines`: None without it)."""
    model = latest(turns, "model")
    first = state.turns - len(turns) + 1
    return {
        "session": session,
        "compactions": sent_compactions(state),
        "bets": state.bets,
        "forced": state.forced,
        "cold": state.cold,
        "client": latest(turns, "client"),
        "model": model,
        "turns_total": state.turns,
        "taint_tool": taint_tool(state),
        "projected": projected(state),
        "lines": dict(lines(model)) if lines is not None and model is not None else None,
        "turns": [
            {**{k: t.get(k) for k in TURN_FIELDS}, "n": max(first + i, i + 1)}
            for i, t in enumerate(turns)
        ],
        "baseline_tokens": state.baseline_tokens,
        "calibration": state.calibration,
        "reduced_results": len(state.plan),
        "frozen_calls": len(state.settled),
        "tainted": holds_taint(state.taint),
        "updated_ms": state.updated_ms,
        "bill": bill(state),
        "history": [
            without_capabilities(h)
            for h in state.history
            if version_of(h) in (1, COMPACTION_SCHEMA)
        ],
    }


TURN_FIELDS = (
    "at_ms",
    "outcome",
    "decision",
    "shadow",
    "tokens_whole",
    "tokens_sent",
    "prompt",
    "billed",
    "whole_billed",
)
"""What a report shows of each turn record (`gateway.answers.turn_record`)."""
HIDDEN = "<capability>"
"""What a report shows in place of a capability in a note."""
_HEX32 = re.compile(r"(?<![0-9a-fA-F])[0-9a-fA-F]{32}(?![0-9a-fA-F])")
"""A capability's shape (`stores.outputs.is_capability`), in any case."""


def without_capabilities(compaction: Mapping[str, Any]) -> dict[str, Any]:
    """A compaction's history record (version 1 or 2) as a report shows it, without its
    version: each reduced result says whether its whole (and its whole arguments) were saved,
    not under which output id; in its note, the folder of every output id it names, and
    anything shaped like a capability, is `HIDDEN`."""
    results = []
    for r in compaction.get("results", ()):
        row = {k: v for k, v in r.items() if k not in ("whole", "arguments_whole")}
        ids = [r.get("whole"), r.get("arguments_whole")]
        folders = {i.split("/", 1)[0] for i in ids if isinstance(i, str) and "/" in i}
        row["saved"] = bool(r.get("whole"))
        if "arguments_whole" in r:
            row["arguments_saved"] = bool(r["arguments_whole"])
        row["note"] = _hide(str(r.get("note") or ""), folders)
        results.append(row)
    shown = {k: v for k, v in compaction.items() if k != VERSION}
    return {**shown, "results": results}


def _hide(note: str, folders: set[str]) -> str:
    for folder in sorted(folders, key=len, reverse=True):
        note = note.replace(folder, HIDDEN)
    return _HEX32.sub(HIDDEN, note)


def render(data: Mapping[str, Any], *, results: int = 20) -> str:
    """`report` as text: one block per compaction, then its reduced results side by side."""
    lines = [
        f"session {data['session']}: {data['compactions']}"
        f" compaction(s){_bets(data['compactions'], data.get('bets'))},"
        f" {data['reduced_results']} result(s) reduced, {data['frozen_calls']} call(s) frozen"
        + (", tainted (judged by the rules or a local judge only)" if data["tainted"] else "")
    ]
    if data.get("bill"):
        lines.append(_bill_line(data["bill"]))
    if data.get("projected"):
        lines.append(_projected_line(data["projected"]))
    for h in data["history"]:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(h["at_ms"] / 1000))
        why = _WHY.get(h.get("decision") or "", "")
        turn = f" at turn {h['turns']}" if h.get("turns") else ""
        lines += [
            "",
            f"{when} UTC  {h['line']}{turn}{why}, judge {h['judge']} ({h['reason']}), trigger"
            f" {h['trigger']:,}: tokens {h['tokens_before']:,} → {h['tokens_after']:,}",
            f"  cache: first changed message {h['first_changed_message']},"
            f" {h['invalidated_tokens']:,} tokens re-billed once,"
            f" {h['saved_tokens_per_turn']:,} tokens no longer resent each turn",
        ]
        rescued = sum(1 for r in h["results"] if r.get("recent"))
        if rescued:
            lines.append(
                f"  past 0.9 of the model's window ({h.get('window') or 0:,} tokens): {rescued}"
                " recent result(s) cut to head, fact lines and tail (marked *)"
            )
        lines += [
            "  result          tool                original →   kept  the whole",
        ]
        lines += [_row(r) for r in h["results"][:results]]
        hidden = h["results_total"] - min(results, len(h["results"]))
        if hidden > 0:
            lines.append(f"  … {hidden} more (--json shows up to {len(h['results'])})")
        notes = [r["note"] for r in h["results"][:results] if r["note"]]
        if notes:
            lines.append("  notes:")
            lines += [f"    {n}" for note in notes for n in note.split("\n")]
    return "\n".join(lines) + "\n"


_WHY = {
    "pays": " (pays back its cache break)",
    "forced": " (past the danger line)",
    "cold": " (the cache was cold)",
}
"""Why a compaction ran, by the cost gate's decision (a version-1 compaction record may have
none)."""


def _row(r: Mapping[str, Any]) -> str:
    whole = _where(r)
    star = "*" if r.get("recent") else " "
    return (
        f" {star}{_cut(r['id'], 15):15} {_cut(r['tool'], 18):18} {r['original_chars']:>9,} →"
        f" {r['kept_chars']:>6,}  {whole}"
    )


def _where(r: Mapping[str, Any]) -> str:
    """Whether the whole result was saved, and the whole arguments when they were briefed
    (a version-1 compaction record may not say whether those were)."""
    reduced = r["original_chars"] != r["kept_chars"]
    result = "saved" if r["saved"] else ("not saved" if reduced else "result sent whole")
    if not r["arguments_briefed"]:
        return result
    if "arguments_saved" not in r:
        return f"{result} (arguments briefed)"
    return f"{result}; arguments {'saved' if r['arguments_saved'] else 'not saved'}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _bill_line(b: Mapping[str, float]) -> str:
    """`bill: …` for one session."""
    verb = "saved" if b["spared"] >= 0 else "cost"
    more = "" if b["spared"] >= 0 else " more"
    return (
        f"bill: {b['billed']:,.0f} billed-equivalent input tokens; sent whole about"
        f" {b['whole']:,.0f} ({b['ratio']:.3f}×): {verb} {abs(b['spared']):,.0f}{more}"
    )


def _projected_line(p: Mapping[str, float]) -> str:
    """`projected: …` for a session stepped in shadow mode."""
    return (
        f"projected (shadow mode): {int(p['compactions'])} compaction(s) not sent; through"
        f" factrail about {p['billed']:,.0f} billed-equivalent input tokens against"
        f" {p['whole']:,.0f} as sent ({p['ratio']:.3f}×)"
    )


def _bets(compactions: int, bets: int | None) -> str:
    """`, N on a bet` after a count of compactions (nothing when they were not counted: a
    version-1 session record without `bets`)."""
    return "" if not compactions or bets is None else f", {bets} on a bet"


def listing(rows: Sequence[Recent]) -> str:
    """Recent sessions, newest first, each with its bill against sending it whole and its
    compactions (how many of them bets); then all of them together."""
    lines = []
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.updated_ms / 1000))
        figure = "" if r.bill is None else f"  {r.bill['ratio']:.3f}× of sent whole"
        done = (
            f"  {r.compactions} compaction(s){_bets(r.compactions, r.bets)}"
            if r.compactions
            else ""
        )
        lines.append(f"{r.session}  {when} UTC{figure}{done}{'  (live)' if r.live else ''}")
    total = summary(rows)
    if total["ratio"] is not None:
        worst = f" (worst {total['worst_ratio']:.3f}×)" if total["above_whole"] else ""
        unbet = (
            f", {total['above_unbet']} of them with no bet (forced past the danger line)"
            if total["above_unbet"]
            else ""
        )
        live = f"; {total['live']} still live (their last compaction may yet pay back)"
        lines.append(
            f"{total['sessions']} with a bill: {total['ratio']:.3f}× of sending them whole;"
            f" {total['above_whole']} of {total['sessions'] - total['live']} settled cost more"
            f" than sent whole{worst}{unbet}" + (live if total["live"] else "")
        )
    hint = f"(a session named by `{SESSION_HEADER}: X` is `factrail inspect --header X`)"
    return "\n".join([*lines, hint]) + "\n"
