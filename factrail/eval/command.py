"""The `factrail eval` and `factrail dataset` subcommands: load a corpus, run, print, gate."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from factrail.core.model import Action, Message
from factrail.eval.progress import progress

Named = list[tuple[str, list[Message]]]


def _fence() -> Any:
    """`taints(tool, skill)` under the configured fence (defaults plus the operator's additions)."""
    import os

    from factrail.policy.options import PolicyOptions
    from factrail.policy.taint import TaintFence

    raw = {
        k: v
        for k, v in {
            "taintTools": os.environ.get("FACTRAIL_TAINT_TOOLS"),
            "taintSkills": os.environ.get("FACTRAIL_TAINT_SKILLS"),
        }.items()
        if v is not None
    }
    options, _ = PolicyOptions.from_mapping(raw)

    return TaintFence.from_options(options).taints


def load_corpus(args: argparse.Namespace) -> Named:
    """The transcripts the source flags name."""
    from factrail.eval import corpora

    if getattr(args, "synthetic", None) is not None:
        from factrail.eval.synthetic import corpus

        return [(n, list(m)) for n, m in corpus(args.seed, args.synthetic)]
    if getattr(args, "synthetic_v2", None) is not None:
        from factrail.eval.synthetic_v2 import corpus as corpus_v2

        return [(n, list(m)) for n, m in corpus_v2(args.seed, args.synthetic_v2)]
    if getattr(args, "corpus", None) is not None:
        if not args.corpus.is_dir():
            raise ValueError(f"{args.corpus}: not a folder")
        return [(n, list(m)) for n, m in corpora.load_corpus_dir(args.corpus)]
    return [
        (n, list(m))
        for n, m in corpora.claude_projects(
            args.claude_projects,
            seed=args.seed,
            max_sessions=args.max,
            min_calls=args.min_calls,
            taints=_fence(),
        )
    ]


def _decider(args: argparse.Namespace, client: Any) -> Any:
    """`rules`/`oracle` by name; a judge or the decision log as a callable."""
    if args.judge in ("rules", "oracle"):
        return args.judge
    from factrail.core.plan import CallAnswer, CompactOptions, build_plan

    if args.judge == "recorded":
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
            plan = build_plan(prefix, CompactOptions(), answers, frozenset())
            return dict(plan.decide({}).actions)

        return recorded

    from factrail.cli import make_cli_judge

    judge = make_cli_judge(args, client)
    options = CompactOptions(egress=args.egress)

    def judged(prefix: Sequence[Message]) -> dict[str, Action]:
        plan = build_plan(prefix, options, {}, frozenset())

        async def ask() -> dict[str, float]:
            deadline = time.monotonic() + args.deadline_ms / 1000
            round_ = await judge.ask(plan.requests, deadline=deadline)
            return dict(round_.answers)

        answered = asyncio.run(ask()) if plan.requests else {}
        return dict(plan.decide(answered).actions)

    return judged


def run_eval(args: argparse.Namespace) -> int:
    """Replay at cuts, optionally simulate, print a table or JSON, gate, report."""
    import httpx

    from factrail.eval.replay import replay

    transcripts = load_corpus(args)
    if not transcripts:
        raise ValueError("the corpus holds no transcripts")
    cuts = tuple(float(c) for c in args.cuts.split(",") if c.strip())
    strategies = tuple(args.strategy) if args.strategy else None
    kwargs: dict[str, Any] = {"cuts": cuts, "visibility": args.visibility}
    if strategies:
        kwargs["strategies"] = strategies
    client = httpx.AsyncClient() if args.judge in ("systemone", "tev") else None
    result_obj = replay(
        progress(transcripts, total=len(transcripts), label="replay"),
        decider=_decider(args, client),
        **kwargs,
    )
    result = result_obj.as_json(with_rows=args.report is not None)
    result["sim"] = None
    if args.sim:
        from factrail.eval.sim import run_sim

        sim_strategies = strategies or (
            "rails",
            "erase",
            "clear-oldest",
            "mask",
            "middle-out",
            "none",
        )
        _, sim_totals = run_sim(
            transcripts,
            strategies=sim_strategies,
            visibility=args.visibility,
            progress=lambda items: progress(items, total=len(transcripts), label="sim"),
        )
        result["sim"] = sim_totals.get("rails")
        result["sim_strategies"] = sim_totals
    if args.write_baseline:
        from factrail.eval.gate import write_baseline

        write_baseline(args.write_baseline, result, tolerance=args.tolerance)
    if args.json_out == "-":
        sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
    else:
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        print_table(result, file=sys.stdout)
    if args.report:
        from factrail.eval.report import write_report

        write_report(result, args.report, command="factrail " + " ".join(sys.argv[1:]))
    if args.gate:
        from factrail.eval.gate import check_gate, load_baseline

        report = check_gate(result, load_baseline(args.gate))
        out = sys.stderr if args.json_out == "-" else sys.stdout
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
        print(
            "\n| strategy | window | rate | compactions | peak fill (median, over window) |"
            " cache share | billed |",
            file=file,
        )
        print("|---|---|---|---|---|---|---|", file=file)
        for name, by_length in sims.items():
            for length, v in by_length.items():
                print(
                    f"| {name} | {length} | {v['rate']:.4f} | {v['compactions']} |"
                    f" {v['peak_fill']:.3f} ({v['peak_fill_median']:.3f}, {v['over_window']}) |"
                    f" {v['cache_share']:.3f} | {v['billed_ratio']:.3f} |",
                    file=file,
                )


def run_dataset(args: argparse.Namespace) -> int:
    """Export hindsight-labelled Tev records (and teacher labels when asked)."""
    from factrail.eval.dataset import export_dataset

    transcripts = load_corpus(args)
    teacher: Iterable[dict[str, Any]] | None = None
    if args.teacher:
        from factrail.stores.decisions import default_decision_log

        log = default_decision_log()
        teacher = list(log.read_all()) if log is not None else []
    manifest = export_dataset(
        progress(transcripts, total=len(transcripts), label="dataset"),
        args.out,
        dev_share=args.dev_share,
        max_state_tokens=args.max_state_tokens,
        teacher_records=teacher,
    )
    print(
        f"factrail dataset: {manifest.records} record(s) from"
        f" {sum(manifest.transcripts.values())} transcript(s) → {args.out}"
    )
    print(json.dumps(manifest.as_dict(), indent=2))
    return 0
