"""Replay at cuts: compact each transcript's prefix and count the facts still visible.

For every transcript and cut, the prefix `messages[:cut]` is decided once (rules, hindsight
oracle, or a plugged-in decider) and every strategy runs under those same decisions. A row
records the facts at stake, how many each strategy kept, and sizes before and after (chars, as
the reference measures, and estimated tokens). Totals pool the rows; top-level totals are the
rails'.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from factrail.core.classify import SHELL_TOOLS, reproducible
from factrail.core.model import (
    Action,
    Message,
    collect_tool_calls,
    transcript_chars,
    transcript_tokens,
)
from factrail.core.plan import rules_actions
from factrail.eval.facts import (
    Fact,
    Shown,
    Visibility,
    count_shown,
    facts,
    needed_across,
    oracle_actions,
)
from factrail.eval.strategies import (
    NAMES,
    PRESERVE_RECENT,
    RIVALS,
    middle_out,
    rails,
)

Decider = Callable[[Sequence[Message]], Mapping[str, Action]]
"""Decisions for a prefix, by tool_use_id (calls it leaves out are kept)."""
DeciderName = Literal["rules", "oracle"]
Corpus = Iterable[tuple[str, Sequence[Message]]]
DEFAULT_CUTS = (0.5, 0.75)


def cut_index(length: int, fraction: float) -> int | None:
    """round(length × fraction) half away from zero, or None when < 2 or ≥ length."""
    index = math.floor(length * fraction + 0.5)
    return index if 2 <= index < length else None


def rules_decider(prefix: Sequence[Message]) -> dict[str, Action]:
    """The rules decider at the eval's pinning (the gateway's `rules_actions`)."""
    return rules_actions(prefix, PRESERVE_RECENT)


def tool_kind(tool: str, input: Mapping[str, Any]) -> str:
    """`Read`, `Grep`, … or `Bash:<verb>` for a shell command (for loss breakdowns)."""
    command = input.get("command")
    if tool in SHELL_TOOLS and isinstance(command, str) and command.split():
        return f"{tool}:{command.split()[0].rsplit('/', 1)[-1]}"
    return tool


@dataclass(slots=True)
class StrategyRow:
    """One strategy's outcome at one cut."""

    kept: int
    kept_unechoed: int
    chars_after: int
    tokens_after: int
    kinds: dict[str, dict[str, int]] = field(default_factory=dict)
    """Tool kind of the introducing call → facts at stake and kept."""


@dataclass(slots=True)
class Row:
    """One transcript at one cut (spec §3.3 fields plus per-strategy outcomes)."""

    transcript: str
    cut: int
    facts: int
    echoed: int
    kept: int
    kept_erase: int
    kept_compat: int
    kept_strict: int
    lost_rereadable: int
    chars_before: int
    chars_after: int
    chars_after_erase: int
    tokens_before: int
    tokens_after: int
    requests: int
    tier: int
    strategies: dict[str, StrategyRow] = field(default_factory=dict)
    lost: list[tuple[str, str]] = field(default_factory=list)
    """(tool kind, token) of every fact the rails lost."""


def _ratio(num: int, den: int) -> float:
    return num / den if den else 1.0


def _reduction(before: int, after: int) -> float:
    return 1 - after / before if before else 0.0


def _strategy_totals(rows: Sequence[Row], name: str) -> dict[str, Any]:
    n_facts = sum(r.facts for r in rows)
    kept = sum(r.strategies[name].kept for r in rows)
    unechoed = sum(r.facts - r.echoed for r in rows)
    kept_unechoed = sum(r.strategies[name].kept_unechoed for r in rows)
    reduction = _reduction(
        sum(r.chars_before for r in rows), sum(r.strategies[name].chars_after for r in rows)
    )
    return {
        "facts": n_facts,
        "kept": kept,
        "rate": _ratio(kept, n_facts),
        "echoed": sum(r.echoed for r in rows),
        "kept_unechoed": kept_unechoed,
        "rate_unechoed": _ratio(kept_unechoed, unechoed),
        "reduction": reduction,
        "reduction_tokens": _reduction(
            sum(r.tokens_before for r in rows), sum(r.strategies[name].tokens_after for r in rows)
        ),
        "tokens_remaining": 1 - reduction,
        "worst_cut": min((_ratio(r.strategies[name].kept, r.facts) for r in rows), default=1.0),
    }


@dataclass(slots=True)
class Replay:
    """Rows plus pooled totals, ready for `--json`."""

    rows: list[Row]
    strategies: dict[str, dict[str, Any]]
    totals: dict[str, Any]

    def as_json(self, with_rows: bool = False) -> dict[str, Any]:
        """`{"totals", "strategies": {name: {"totals"}}}` (and the rows when asked)."""
        out: dict[str, Any] = {
            "totals": self.totals,
            "strategies": {k: {"totals": v} for k, v in self.strategies.items()},
        }
        if with_rows:
            out["rows"] = [asdict(r) for r in self.rows]
            for name, block in out["strategies"].items():
                block["rows"] = [
                    {
                        "transcript": r.transcript,
                        "cut": r.cut,
                        "facts": r.facts,
                        "kept": r.strategies[name].kept,
                        "kinds": r.strategies[name].kinds,
                    }
                    for r in self.rows
                    if name in r.strategies
                ]
        return out


def _totals(rows: Sequence[Row], transcripts: int, visibility: Visibility) -> dict[str, Any]:
    rails_totals = _strategy_totals(rows, "rails")
    n_facts = rails_totals["facts"]
    kept_erase = sum(r.kept_erase for r in rows)
    lost_by_kind: dict[str, int] = {}
    for r in rows:
        for kind, _ in r.lost:
            lost_by_kind[kind] = lost_by_kind.get(kind, 0) + 1
    return {
        **rails_totals,
        "transcripts": transcripts,
        "cuts": len(rows),
        "visibility": visibility,
        "kept_erase": kept_erase,
        "rate_erase": _ratio(kept_erase, n_facts),
        "rate_compat": _ratio(sum(r.kept_compat for r in rows), n_facts),
        "rate_strict": _ratio(sum(r.kept_strict for r in rows), n_facts),
        "lost_rereadable": sum(r.lost_rereadable for r in rows),
        "requests": sum(r.requests for r in rows),
        "reduction_erase": _reduction(
            sum(r.chars_before for r in rows), sum(r.chars_after_erase for r in rows)
        ),
        "reduction_min": min(
            (min(_reduction(r.chars_before, r.chars_after), 1.0) for r in rows), default=1.0
        ),
        "lost_by_kind": dict(sorted(lost_by_kind.items(), key=lambda kv: -kv[1])),
    }


def _measure(
    out: Sequence[Message],
    at_stake: Sequence[Fact],
    cut: int,
    visibility: Visibility,
    kind_of: Mapping[str, str],
) -> tuple[StrategyRow, Shown]:
    shown = Shown(out, visibility)
    fresh = [f for f in at_stake if not f.echoed_before(cut)]
    kinds: dict[str, dict[str, int]] = {}
    for f in at_stake:
        counts = kinds.setdefault(kind_of.get(f.source, "?"), {"facts": 0, "kept": 0})
        counts["facts"] += 1
        counts["kept"] += shown(f.token)
    row = StrategyRow(
        kept=count_shown(at_stake, shown),
        kept_unechoed=count_shown(fresh, shown),
        chars_after=transcript_chars(out),
        tokens_after=transcript_tokens(out),
        kinds=kinds,
    )
    return row, shown


def replay_one(
    name: str,
    messages: Sequence[Message],
    cut: int,
    actions: Mapping[str, Action],
    *,
    all_facts: Sequence[Fact],
    strategies: Sequence[str] = NAMES,
    visibility: Visibility = "strict",
    requests: int = 0,
) -> Row:
    """Run every strategy on `messages[:cut]` under `actions` and measure it."""
    prefix = list(messages[:cut])
    at_stake = needed_across(all_facts, cut)
    applied = rails(prefix, actions)
    calls = {c.tool_use_id: c for c in collect_tool_calls(prefix, PRESERVE_RECENT)}
    kind_of = {k: tool_kind(c.tool, c.input) for k, c in calls.items()}
    rails_row, rails_shown = _measure(applied.messages, at_stake, cut, visibility, kind_of)
    results = {"rails": rails_row}
    for rival in ("erase", *(s for s in strategies if s not in ("rails", "erase"))):
        run = middle_out(rails_row.tokens_after) if rival == "middle-out" else RIVALS[rival]
        results[rival] = _measure(run(prefix, actions), at_stake, cut, visibility, kind_of)[0]
    other = Shown(applied.messages, "compat" if visibility == "strict" else "strict")
    lost = [f for f in at_stake if not rails_shown(f.token)]
    rereadable = {k for k, c in calls.items() if reproducible(c.tool, c.input)}
    return Row(
        transcript=name,
        cut=cut,
        facts=len(at_stake),
        echoed=sum(1 for f in at_stake if f.echoed_before(cut)),
        kept=rails_row.kept,
        kept_erase=results["erase"].kept,
        kept_compat=rails_row.kept if visibility == "compat" else count_shown(at_stake, other),
        kept_strict=rails_row.kept if visibility == "strict" else count_shown(at_stake, other),
        lost_rereadable=sum(1 for f in lost if f.source in rereadable),
        chars_before=transcript_chars(prefix),
        chars_after=rails_row.chars_after,
        chars_after_erase=results["erase"].chars_after,
        tokens_before=transcript_tokens(prefix),
        tokens_after=rails_row.tokens_after,
        requests=requests,
        tier=applied.tier,
        strategies={k: results[k] for k in NAMES if k in results},
        lost=[
            (tool_kind(calls[f.source].tool, calls[f.source].input), f.token)
            if f.source in calls
            else ("?", f.token)
            for f in lost
        ],
    )


def replay(
    corpus: Corpus,
    *,
    cuts: Sequence[float] = DEFAULT_CUTS,
    decider: Decider | DeciderName = "rules",
    strategies: Sequence[str] = NAMES,
    visibility: Visibility = "strict",
) -> Replay:
    """Replay every transcript at every cut; rails and erase always run."""
    unknown = set(strategies) - set(NAMES)
    if unknown:
        raise ValueError(f"unknown strategies: {sorted(unknown)}")
    rows: list[Row] = []
    transcripts = 0
    for name, messages in corpus:
        transcripts += 1
        all_facts = facts(messages)
        for fraction in cuts:
            cut = cut_index(len(messages), fraction)
            if cut is None:
                continue
            prefix = messages[:cut]
            if decider == "oracle":
                pinned = [
                    c.tool_use_id for c in collect_tool_calls(prefix, PRESERVE_RECENT) if c.pinned
                ]
                actions: Mapping[str, Action] = oracle_actions(messages, cut, pinned, all_facts)
            elif decider == "rules":
                actions = rules_decider(prefix)
            else:
                actions = decider(prefix)
            rows.append(
                replay_one(
                    name,
                    messages,
                    cut,
                    actions,
                    all_facts=all_facts,
                    strategies=strategies,
                    visibility=visibility,
                )
            )
    names = [k for k in NAMES if k in ("rails", "erase") or k in strategies]
    return Replay(
        rows=rows,
        strategies={k: _strategy_totals(rows, k) for k in names},
        totals=_totals(rows, transcripts, visibility),
    )
