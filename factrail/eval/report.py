"""`eval --report DIR`: a Markdown report of an eval result with PNG plots.

The result is the eval JSON object (DESIGN §4). Plots need matplotlib (the `report` extra); it is
imported lazily and, when missing, the report says the plots were skipped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPORT = "report.md"
FACTS_VS_TOKENS = "facts-vs-tokens.png"
FACTS_BY_KIND = "facts-by-kind.png"
SIM_CURVES = "sim-curves.png"
TOP_KINDS = 12
WORST_ROWS = 5

Curves = dict[str, dict[float, Mapping[str, Any]]]
"""strategy → window length → sim totals."""
Kinds = dict[str, dict[str, tuple[int, int]]]
"""strategy → tool kind → (facts, kept)."""


def write_report(
    result: Mapping[str, Any], out_dir: Path, *, command: str | None = None
) -> list[Path]:
    """Write `report.md` and the plots into `out_dir` (created if missing); return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    strategies = _strategies(result)
    kinds = kinds_by_strategy(strategies)
    lost = {} if kinds else lost_by_kind(result)
    curves = sim_curves(result.get("sim"))
    figures: list[tuple[str, str]] = [("Facts kept against tokens remaining", FACTS_VS_TOKENS)]
    if kinds:
        figures.append(("Facts kept per tool kind", FACTS_BY_KIND))
    elif lost:
        figures.append(("Facts the rails lost per tool kind", FACTS_BY_KIND))
    if curves:
        figures.append(("Simulation: facts kept and peak fill per window length", SIM_CURVES))
    pngs = _plot(strategies, kinds, lost, curves, out_dir)
    md = render_markdown(result, command=command, figures=figures if pngs is not None else None)
    report = out_dir / REPORT
    report.write_text(md, encoding="utf-8")
    return [report, *(pngs or [])]


def render_markdown(
    result: Mapping[str, Any],
    *,
    command: str | None = None,
    figures: list[tuple[str, str]] | None = None,
) -> str:
    """The report text; `figures` (title, file) are linked, `None` notes that plots were skipped."""
    strategies = _strategies(result)
    totals = result.get("totals") or {}
    lines = ["# factrail eval report", ""]
    if command:
        lines += ["Produced by:", "", "```", command, "```", ""]
    lines += [
        f"{_int(totals.get('transcripts'))} transcript(s), {_int(totals.get('cuts'))} cut(s), "
        f"{_int(totals.get('facts'))} fact(s) at stake"
        + (f" ({totals['visibility']} visibility)." if "visibility" in totals else "."),
        "",
        "## Strategies",
        "",
        "Facts kept (not echoed) counts only the facts the agent had not already written before "
        "the cut; worst cut is the lowest facts kept at any one cut.",
        "",
        "| strategy | facts | kept | facts kept | facts kept (not echoed) | tokens remaining "
        "| worst cut |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, block in strategies.items():
        t = block.get("totals") or {}
        lines.append(
            f"| {name} | {_int(t.get('facts'))} | {_int(t.get('kept'))} | {_pct(t.get('rate'))} "
            f"| {_pct(t.get('rate_unechoed'))} | {_pct(t.get('tokens_remaining'))} "
            f"| {_worst(t.get('worst_cut'))} |"
        )
    lines.append("")
    curves = sim_curves(result.get("sim"))
    if curves:
        lines += _sim_table(curves)
    kinds = kinds_by_strategy(strategies)
    if kinds:
        lines += _kinds_table(kinds)
    else:
        lines += _lost_table(lost_by_kind(result))
    lines += _worst_rows(_rails_rows(result))
    if figures is None:
        lines += ["Plots skipped: matplotlib is not installed (install `factrail[report]`).", ""]
    else:
        lines += ["## Plots", ""]
        for title, file in figures:
            lines += [f"![{title}]({file})", ""]
    return "\n".join(lines)


def lost_by_kind(result: Mapping[str, Any]) -> dict[str, int]:
    """Facts the rails lost per tool kind: `totals.lost_by_kind`, else counted from row `lost`."""
    given = (result.get("totals") or {}).get("lost_by_kind")
    counts: dict[str, int] = {}
    if isinstance(given, Mapping):
        counts = {str(k): _int(v) for k, v in given.items()}
    else:
        for row in result.get("rows") or []:
            for item in row.get("lost") or []:
                kind = str(item[0]) if isinstance(item, list | tuple) and item else "?"
                counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def kinds_by_strategy(strategies: Mapping[str, Mapping[str, Any]]) -> Kinds:
    """Facts and kept per tool kind, summed over each strategy's rows (empty without `kinds`)."""
    out: Kinds = {}
    for name, block in strategies.items():
        sums: dict[str, tuple[int, int]] = {}
        for row in block.get("rows") or []:
            for kind, counts in (row.get("kinds") or {}).items():
                facts, kept = sums.get(kind, (0, 0))
                sums[kind] = (facts + _int(counts.get("facts")), kept + _int(counts.get("kept")))
        if sums:
            out[name] = sums
    return out


def sim_curves(sim: Any) -> Curves:
    """Normalise the `sim` block to strategy → window → totals.

    Accepts `{window: totals}` (the rails alone), `{strategy: {window: totals}}`, and
    `{window: {..., "strategies": {strategy: totals}}}`.
    """
    if not isinstance(sim, Mapping) or not sim:
        return {}
    curves: Curves = {}
    for key, value in sim.items():
        window = _window(key)
        if not isinstance(value, Mapping):
            continue
        if window is None:
            points = {w: v for k, v in value.items() if (w := _window(k)) is not None}
            if points and all(isinstance(v, Mapping) for v in points.values()):
                curves.setdefault(str(key), {}).update(points)
            continue
        curves.setdefault("rails", {})[window] = value
        for name, totals in (value.get("strategies") or {}).items():
            if isinstance(totals, Mapping):
                curves.setdefault(str(name), {})[window] = totals
    return {name: dict(sorted(points.items())) for name, points in curves.items()}


def _strategies(result: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    raw = result.get("strategies") or {}
    if not raw and result.get("totals"):
        return {"rails": {"totals": result["totals"], "rows": result.get("rows") or []}}
    return {str(k): v for k, v in raw.items() if isinstance(v, Mapping)}


def _sim_table(curves: Curves) -> list[str]:
    lines = [
        "## Simulation (repeated in-flight compaction)",
        "",
        "| strategy | window | compactions | needed | kept | facts kept | peak fill "
        "| cache share | billed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, points in curves.items():
        for window, t in points.items():
            lines.append(
                f"| {name} | {window:g} | {_int(t.get('compactions'))} | {_int(t.get('needed'))} "
                f"| {_int(t.get('kept'))} | {_pct(t.get('rate'))} | {_pct(t.get('peak_fill'))} "
                f"| {_pct(t.get('cache_share'))} | {_pct(t.get('billed_ratio'))} |"
            )
    return [*lines, ""]


def _kinds_table(kinds: Kinds) -> list[str]:
    names = list(kinds)
    order = _kind_order(kinds)
    lines = [
        "## Facts kept per tool kind",
        "",
        "| tool kind | facts | " + " | ".join(names) + " |",
        "|---|---:|" + "---:|" * len(names),
    ]
    for kind in order:
        facts = max(kinds[n].get(kind, (0, 0))[0] for n in names)
        cells = [_pct(_rate(*kinds[n].get(kind, (0, 0)))) for n in names]
        lines.append(f"| {kind} | {facts} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _rails_rows(result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The rails' rows: their own if the strategy carries rows, else the top-level rows."""
    own = (_strategies(result).get("rails") or {}).get("rows")
    rows = own if own else result.get("rows") or []
    return [r for r in rows if isinstance(r, Mapping)]


def _lost_table(lost: Mapping[str, int]) -> list[str]:
    if not lost:
        return []
    total = sum(lost.values())
    lines = [
        "## Facts the rails lost, per tool kind",
        "",
        "| tool kind | lost | share of losses |",
        "|---|---:|---:|",
    ]
    lines += [f"| {kind} | {n} | {_pct(n / total if total else 0.0)} |" for kind, n in lost.items()]
    return [*lines, ""]


def _worst_rows(all_rows: list[Mapping[str, Any]]) -> list[str]:
    rows = [r for r in all_rows if _int(r.get("kept")) < _int(r.get("facts"))]
    if not rows:
        return []
    rows.sort(
        key=lambda r: (_rate(_int(r.get("facts")), _int(r.get("kept"))), str(r.get("transcript")))
    )
    lines = [
        "## Rails: the cuts that lost most",
        "",
        "| transcript | cut | facts | kept | facts kept | tokens remaining |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows[:WORST_ROWS]:
        before, after = _int(r.get("chars_before")), _int(r.get("chars_after"))
        remaining = after / before if before else 1.0
        lines.append(
            f"| {r.get('transcript', '?')} | {r.get('cut', '?')} | {_int(r.get('facts'))} "
            f"| {_int(r.get('kept'))} | {_pct(_rate(_int(r.get('facts')), _int(r.get('kept'))))} "
            f"| {_pct(remaining)} |"
        )
    return [*lines, ""]


def _kind_order(kinds: Kinds) -> list[str]:
    """Tool kinds by facts at stake (most first), then name."""
    facts: dict[str, int] = {}
    for sums in kinds.values():
        for kind, (n, _) in sums.items():
            facts[kind] = max(facts.get(kind, 0), n)
    return sorted(facts, key=lambda k: (-facts[k], k))


def _plot(
    strategies: Mapping[str, Mapping[str, Any]],
    kinds: Kinds,
    lost: Mapping[str, int],
    curves: Curves,
    out_dir: Path,
) -> list[Path] | None:
    """Draw the PNGs; None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    paths = [_plot_facts_vs_tokens(plt, strategies, out_dir / FACTS_VS_TOKENS)]
    if kinds:
        paths.append(_plot_kinds(plt, kinds, out_dir / FACTS_BY_KIND))
    elif lost:
        paths.append(_plot_lost(plt, lost, out_dir / FACTS_BY_KIND))
    if curves:
        paths.append(_plot_sim(plt, curves, out_dir / SIM_CURVES))
    return paths


def _plot_facts_vs_tokens(
    plt: Any, strategies: Mapping[str, Mapping[str, Any]], path: Path
) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    for name, block in strategies.items():
        t = block.get("totals") or {}
        x, y = _float(t.get("tokens_remaining")), _float(t.get("rate"))
        ax.scatter([x], [y], s=48)
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(6, 4))
    ax.set_xlabel("tokens remaining (share of the prefix)")
    ax.set_ylabel("facts kept")
    ax.set_xlim(0, 1.15)
    ax.set_ylim(0, 1.05)
    ax.grid(True, alpha=0.3)
    ax.set_title("Facts kept against tokens remaining")
    return _save(plt, fig, path)


def _plot_kinds(plt: Any, kinds: Kinds, path: Path) -> Path:
    order = _kind_order(kinds)[:TOP_KINDS]
    names = list(kinds)
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(max(6.4, 0.9 * len(order) + 2), 4.8))
    for j, name in enumerate(names):
        rates = [_rate(*kinds[name].get(kind, (0, 0))) for kind in order]
        xs = [i + (j - (len(names) - 1) / 2) * width for i in range(len(order))]
        ax.bar(xs, rates, width=width, label=name)
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels(order, rotation=30, ha="right")
    ax.set_ylabel("facts kept")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize="small")
    ax.set_title("Facts kept per tool kind")
    return _save(plt, fig, path)


def _plot_lost(plt: Any, lost: Mapping[str, int], path: Path) -> Path:
    order = list(lost)[:TOP_KINDS]
    fig, ax = plt.subplots(figsize=(max(6.4, 0.9 * len(order) + 2), 4.8))
    ax.bar(range(len(order)), [lost[k] for k in order])
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels(order, rotation=30, ha="right")
    ax.set_ylabel("facts lost by the rails")
    ax.set_title("Facts the rails lost per tool kind")
    return _save(plt, fig, path)


def _plot_sim(plt: Any, curves: Curves, path: Path) -> Path:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    for name, points in curves.items():
        xs = list(points)
        left.plot(xs, [_float(p.get("rate")) for p in points.values()], marker="o", label=name)
        right.plot(
            xs, [_float(p.get("peak_fill")) for p in points.values()], marker="o", label=name
        )
    for ax, ylabel in ((left, "facts kept at the moment of use"), (right, "peak fill")):
        ax.set_xlabel("transcript length (windows)")
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 1.05)
        ax.grid(True, alpha=0.3)
    left.legend(fontsize="small")
    fig.suptitle("Repeated in-flight compaction")
    return _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path


def _window(key: Any) -> float | None:
    try:
        value = float(key)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _worst(value: Any) -> str:
    """A worst cut given as a rate, or as an object with its rate and where it happened."""
    if isinstance(value, Mapping):
        where = " @ ".join(str(value[k]) for k in ("transcript", "cut") if k in value)
        rate = value.get("rate")
        return f"{_pct(rate)} ({where})" if where else _pct(rate)
    return _pct(value)


def _rate(facts: int, kept: int) -> float:
    return kept / facts if facts else 1.0


def _pct(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "–"
    return f"{value:.1%}"


def _float(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
