"""`factrail eval` and `factrail dataset`: load a corpus, run, print, gate (typed parameters)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from factrail.core.model import Action, Message
from factrail.eval.facts import Visibility
from factrail.eval.progress import progress
from factrail.eval.replay import DeciderName
from factrail.eval.strategies import NAMES
from factrail.policy.cost import Profile
from factrail.settings import Settings

Named = list[tuple[str, list[Message]]]
Decider = Literal["rules", "oracle", "recorded", "systemone", "tev"]


@dataclass(frozen=True, slots=True)
class Source:
    """Where the transcripts come from: exactly one of the four."""

    synthetic: int | None = None
    synthetic_v2: int | None = None
    corpus: Path | None = None
    claude_projects: Path | None = None
    seed: int = 0
    max_sessions: int = 40
    """Claude Code projects: at most this many sessions."""
    min_calls: int = 15
    """Claude Code projects: only sessions with at least this many tool calls."""


@dataclass(frozen=True, slots=True)
class EvalRun:
    """One `factrail eval`."""

    source: Source
    cuts: tuple[float, ...] = (0.5, 0.75)
    visibility: Visibility = "strict"
    strategies: tuple[str, ...] | None = None
    """Only these strategies (None: all)."""
    sim: bool = False
    sim_strategies: tuple[str, ...] | None = None
    """Only these strategies in the simulation (None: those of `strategies`)."""
    price: Profile = "anthropic"
    """The price profile `--sim` bills under."""
    cache_ttl_s: float | None = None
    """The cache lifetime `--sim`'s client asks for (3600: Anthropic's one-hour cache)."""
    price_model: str = ""
    """The model `--sim`'s client asks for: its prices under `price`."""
    decider: Decider = "rules"
    gate: Path | None = None
    write_baseline: Path | None = None
    tolerance: float = 0.005
    json_out: str | None = None
    """Write the result as JSON here (`-`: stdout, and no table)."""
    report: Path | None = None
    command: str = "factrail eval"
    """The command line, for the report."""


def load_corpus(source: Source, settings: Settings) -> Named:
    """The transcripts `source` names (Claude Code sessions the fence taints are left out)."""
    from factrail.eval import corpora

    if source.synthetic is not None:
        from factrail.eval.synthetic import corpus

        return [(n, list(m)) for n, m in corpus(source.seed, source.synthetic)]
    if source.synthetic_v2 is not None:
        from factrail.eval.synthetic_v2 import corpus as corpus_v2

        return [(n, list(m)) for n, m in corpus_v2(source.seed, source.synthetic_v2)]
    if source.corpus is not None:
        if not source.corpus.is_dir():
            raise ValueError(f"{source.corpus}: not a folder")
        return [(n, list(m)) for n, m in corpora.load_corpus_dir(source.corpus)]
    if source.claude_projects is None:
        raise ValueError("no transcripts named")
    return [
        (n, list(m))
        for n, m in corpora.claude_projects(
            source.claude_projects,
            settings.fence(),
            seed=source.seed,
            max_sessions=source.max_sessions,
            min_calls=source.min_calls,
        )
    ]


DecideFn = Callable[[Sequence[Message]], dict[str, Action]]


def _decider(name: Decider, settings: Settings, client: Any) -> DeciderName | DecideFn:
    """`rules`/`oracle` by name; the decision log or the configured judge as a callable."""
    if name in ("rules", "oracle"):
        return name
    from factrail.core.plan import CallAnswer, build_plan

    options = settings.plan_options()
    if name == "recorded":
        from factrail.stores.decisions import default_decision_log

        log = default_decision_log()
        answers: dict[str, CallAnswer] = {}
        for record in log.read_all() if log is not None else ():
            for d in record.get("decisions", []):
                a = d.get("answer")
                if isinstance(a, Mapping) and "tool_use_id" in d:
                    answers[d["tool_use_id"]] = CallAnswer(
                        keep_call=float(a.get("keepCall", a.get("keep_call", 1.0))),
                        keep_result=float(a.get("keepResult", a.get("keep_result", 1.0))),
                    )

        def recorded(prefix: Sequence[Message]) -> dict[str, Action]:
            plan = build_plan(prefix, options, answers, frozenset())
            return dict(plan.decide({}).actions)

        return recorded

    from factrail import runtime

    judge = runtime.judge(settings.model_copy(update={"judge": name}), client).required()

    def judged(prefix: Sequence[Message]) -> dict[str, Action]:
        plan = build_plan(prefix, options, {}, frozenset())

        async def ask() -> dict[str, float]:
            deadline = time.monotonic() + settings.judge_deadline_ms / 1000
            round_ = await judge.ask(plan.requests, deadline=deadline)
            return dict(round_.answers)

        answered = asyncio.run(ask()) if plan.requests else {}
        return dict(plan.decide(answered).actions)

    return judged


def evaluate(
    transcripts: Sequence[tuple[str, Sequence[Message]]],
    settings: Settings,
    *,
    cuts: Sequence[float] = (0.5, 0.75),
    visibility: Visibility = "strict",
    strategies: Sequence[str] | None = None,
    sim: bool = False,
    sim_strategies: Sequence[str] | None = None,
    price: Profile = "anthropic",
    cache_ttl_s: float | None = None,
    price_model: str = "",
    decider: Decider = "rules",
    with_rows: bool = False,
    show_progress: bool = False,
) -> dict[str, Any]:
    """Replay `transcripts` at `cuts` (and simulate in-flight compaction when `sim`, with
    `sim_strategies`, else `strategies`, else all): the result `factrail eval --json -`
    prints."""
    import httpx

    from factrail.eval.replay import replay

    def shown(items: Iterable[Any], label: str) -> Iterable[Any]:
        return progress(items, total=len(transcripts), label=label) if show_progress else items

    kwargs: dict[str, Any] = {"cuts": tuple(cuts), "visibility": visibility}
    if strategies:
        kwargs["strategies"] = tuple(strategies)
    client = httpx.AsyncClient() if decider in ("systemone", "tev") else None
    replayed = replay(
        shown(transcripts, "replay"), decider=_decider(decider, settings, client), **kwargs
    )
    result = replayed.as_json(with_rows=with_rows)
    result["sim"] = None
    if sim:
        from factrail.eval.gate import SimPrices
        from factrail.eval.sim import run_sim

        _, sim_totals = run_sim(
            transcripts,
            settings.engine_options(),  # the gateway's: its notes name the outputs route
            strategies=tuple(sim_strategies or strategies or NAMES),
            visibility=visibility,
            profile=price,
            cache_ttl_s=cache_ttl_s,
            model=price_model,
            progress=lambda items: shown(items, "sim"),
            settings=settings,
        )
        result["sim"] = sim_totals.get("rails")
        result["sim_strategies"] = sim_totals
        result["sim_prices"] = SimPrices(price, cache_ttl_s, price_model).as_json()
    return result


def run_eval(run: EvalRun, settings: Settings) -> int:
    """Replay at cuts, optionally simulate, print a table or JSON, gate, report: the exit code."""
    transcripts = load_corpus(run.source, settings)
    if not transcripts:
        raise ValueError("the corpus holds no transcripts")
    result = evaluate(
        transcripts,
        settings,
        cuts=run.cuts,
        visibility=run.visibility,
        strategies=run.strategies,
        sim=run.sim,
        sim_strategies=run.sim_strategies,
        price=run.price,
        cache_ttl_s=run.cache_ttl_s,
        price_model=run.price_model,
        decider=run.decider,
        with_rows=run.report is not None,
        show_progress=True,
    )
    if run.write_baseline:
        from factrail.eval.gate import write_baseline

        write_baseline(run.write_baseline, result, tolerance=run.tolerance)
    if run.json_out == "-":
        sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
    else:
        if run.json_out:
            Path(run.json_out).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        print_table(result, file=sys.stdout)
    if run.report:
        from factrail.eval.report import write_report

        write_report(result, run.report, command=run.command)
    if run.gate:
        from factrail.eval.gate import check_gate, load_baseline

        report = check_gate(result, load_baseline(run.gate))
        out = sys.stderr if run.json_out == "-" else sys.stdout
        for line in report.lines:
            print(line, file=out)
        return 0 if report.passed else 1
    return 0


def print_table(result: Mapping[str, Any], file: Any) -> None:
    """One table: strategies side by side; then the simulation when it ran."""
    t = result["totals"]
    print(
        f"{t['transcripts']} transcript(s), {t['cuts']} cut(s), {t['facts']} fact(s) at stake"
        f" ({t.get('echoed', 0)} already echoed before the cut)",
        file=file,
    )
    print("| strategy | facts kept | rate | tokens remaining | worst cut |", file=file)
    print("|---|---|---|---|---|", file=file)
    for name, s in result["strategies"].items():
        st = s["totals"]
        worst = st.get("worst_cut")
        worst_text = f"{worst:.3f}" if isinstance(worst, (int, float)) else "-"
        print(
            f"| {name} | {st['kept']}/{st['facts']} | {st['rate']:.4f} |"
            f" {st['tokens_remaining']:.4f} | {worst_text} |",
            file=file,
        )
    sims = result.get("sim_strategies")
    if sims:
        from factrail.eval.sim import CACHE_SHARE_GOAL

        print(
            "\n| strategy | window | rate | compactions | peak fill (median, over window) |"
            " cache share | billed (vs everything) | sessions above everything (rails: of them"
            " with no bet) |",
            file=file,
        )
        print("|---|---|---|---|---|---|---|---|", file=file)
        for name, by_length in sims.items():
            for length, v in by_length.items():
                unbet = f" ({v['above_unbet']})" if name == "rails" else ""
                print(
                    f"| {name} | {length} | {v['rate']:.4f} | {v['compactions']} |"
                    f" {v['peak_fill']:.3f} ({v['peak_fill_median']:.3f}, {v['over_window']}) |"
                    f" {v['cache_share']:.3f} | {v['billed']:,} ({v['billed_ratio']:.3f}) |"
                    f" {v['above']} of {v['sessions']}{unbet} |",
                    file=file,
                )
        floors = {
            "floor_at_goal": "\nLeast billed (vs everything) of any strategy that forwards each"
            f" new message whole, at a cache share of at least {CACHE_SHARE_GOAL}",
            "soft_floor": "Least billed (vs everything) of any strategy that sends requests as"
            " they are below the soft line and past it keeps only the text of older messages"
            " (no result, no argument)",
        }
        for key, label in floors.items():
            by_length = sims.get("none", {}).items()
            figures = [f"{length}: {v[key]:.3f}" for length, v in by_length if key in v]
            if figures:
                print(f"{label}: {', '.join(figures)}", file=file)


@dataclass(frozen=True, slots=True)
class DatasetRun:
    """One `factrail dataset`."""

    source: Source
    out: Path
    dev_share: float = 0.1
    max_state_tokens: int = 1500
    teacher: bool = False
    """Add labels from the decision log."""


def run_dataset(run: DatasetRun, settings: Settings) -> int:
    """Export hindsight-labelled Tev records (and teacher labels when asked)."""
    from factrail.eval.dataset import export_dataset

    transcripts = load_corpus(run.source, settings)
    teacher: Iterable[dict[str, Any]] | None = None
    if run.teacher:
        from factrail.stores.decisions import default_decision_log

        log = default_decision_log()
        teacher = list(log.read_all()) if log is not None else []
    manifest = export_dataset(
        progress(transcripts, total=len(transcripts), label="dataset"),
        run.out,
        options=settings.plan_options(),
        dev_share=run.dev_share,
        max_state_tokens=run.max_state_tokens,
        teacher_records=teacher,
    )
    print(
        f"factrail dataset: {manifest.records} record(s) from"
        f" {sum(manifest.transcripts.values())} transcript(s) → {run.out}"
    )
    print(json.dumps(manifest.as_dict(), indent=2))
    return 0
