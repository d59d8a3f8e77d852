"""The `factrail` command: serve, run, doctor, compact, eval, report, dataset, outputs,
inspect, settings, hook.

Every subcommand reads the one settings object (`factrail.settings.Settings`: `FACTRAIL_*` and
the TOML file); flags given on the command line override it.

Every subcommand exits 0 on success and 1 on an error, printing `factrail: <error>` on stderr;
`eval --gate` exits 1 when the gate fails, `report` 2 when it finds no session. Settings that
may not be used (a malformed value, an unknown `FACTRAIL_*` name, a broken config file, a public
bind without a long admin key) stop every command that reads them with exit status 2 and one
line naming the variable; `factrail settings --check` lists every problem. Imports are lazy so
`factrail compact` never loads the web stack.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

JUDGES = ("rules", "systemone", "tev")


class CliError(Exception):
    """A user-facing error: printed as `factrail: <message>`, exit status 1."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="factrail",
        description="Keep a coding agent inside its context window without losing its facts.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the OpenAI-compatible gateway")
    serve.add_argument("--host", default=None, help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default 8080)")
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes on one socket (default 1); they share the state store (SQLite"
        " file or Redis, not memory://), the saved outputs and the metrics",
    )

    run = sub.add_parser(
        "run",
        help="run a coding agent through factrail: factrail run -- claude (or codex, or any"
        " command)",
    )
    run.add_argument(
        "--port", type=int, default=None, help="the gateway's loopback port (default: a free one)"
    )
    run.add_argument("client", nargs=argparse.REMAINDER, help="the client and its arguments")

    sub.add_parser("doctor", help="check the settings, upstreams, stores, kernels and plugin")

    compact = sub.add_parser("compact", help="compact one transcript file")
    compact.add_argument("file", type=Path)
    compact.add_argument("--out", type=Path, help="write the compacted transcript here")
    compact.add_argument(
        "--trigger-tokens",
        type=int,
        default=None,
        help="compact once past 5/6 of this many tokens, as the gateway would"
        " (default FACTRAIL_TRIGGER_TOKENS, 180000)",
    )
    compact.add_argument("--save-outputs", action="store_true", help="save full outputs")
    compact.add_argument("--session", default=None, help="session name for saved outputs")
    _judge_flags(compact, JUDGES)

    ev = sub.add_parser("eval", help="replay transcripts offline and count the facts kept")
    src = ev.add_mutually_exclusive_group(required=True)
    src.add_argument("--synthetic", type=int, metavar="N", help="N synthetic sessions")
    src.add_argument("--synthetic-v2", type=int, metavar="N", help="N harder synthetic sessions")
    src.add_argument("--corpus", type=Path, metavar="DIR", help="*.json / *.jsonl transcripts")
    src.add_argument("--claude-projects", type=Path, metavar="DIR", help="Claude Code projects")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--max", type=int, default=40, help="at most this many Claude sessions")
    ev.add_argument("--min-calls", type=int, default=15)
    ev.add_argument("--cuts", default="0.5,0.75", help="comma-separated cut fractions")
    ev.add_argument("--visibility", choices=("strict", "compat"), default="strict")
    ev.add_argument("--strategy", action="append", help="only these strategies (repeatable)")
    ev.add_argument("--sim", action="store_true", help="simulate repeated in-flight compaction")
    ev.add_argument(
        "--sim-strategy",
        action="append",
        help="only these strategies in the simulation (repeatable; default: those of --strategy)",
    )
    ev.add_argument(
        "--price",
        choices=("anthropic", "openai", "none"),
        default="anthropic",
        help="the price profile --sim bills under (default anthropic)",
    )
    ev.add_argument(
        "--cache-ttl",
        type=float,
        metavar="SECONDS",
        help="the cache lifetime --sim's client asks for (3600: Anthropic's one-hour cache, "
        "whose writes cost 2x input; default: five minutes)",
    )
    ev.add_argument(
        "--price-model",
        default="",
        metavar="MODEL",
        help="the model --sim's client asks for: --price's prices for that model (e.g. "
        "claude-opus-5-5, whose cache reads cost 0.05), which the rails' gate is told too",
    )
    ev.add_argument("--gate", type=Path, help="fail (exit 1) below this baseline")
    ev.add_argument("--write-baseline", type=Path, help="write the measured figures here")
    ev.add_argument("--tolerance", type=float, default=0.005)
    ev.add_argument("--json", dest="json_out", help="write the result as JSON ('-' = stdout)")
    ev.add_argument("--report", type=Path, metavar="DIR", help="write report.md and plots")
    _judge_flags(ev, (*JUDGES, "oracle", "recorded"), default="rules")

    rep = sub.add_parser("report", help="an HTML page of what factrail would bill on your sessions")
    rep.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="session files or folders")
    rep.add_argument("-o", "--out", type=Path, default=Path("factrail-report.html"))
    rep.add_argument("--trigger", type=int, metavar="N", help="replay at this trigger (tokens)")
    rep.add_argument("--price-profile", choices=("auto", "anthropic", "openai", "none"))
    rep.add_argument("--limit", type=int, default=0, help="only the N newest sessions")

    ds = sub.add_parser("dataset", help="export Tev-format training records (hindsight labels)")
    dsrc = ds.add_mutually_exclusive_group(required=True)
    dsrc.add_argument("--synthetic", type=int, metavar="N")
    dsrc.add_argument("--corpus", type=Path, metavar="DIR")
    dsrc.add_argument("--claude-projects", type=Path, metavar="DIR")
    ds.add_argument("--seed", type=int, default=0)
    ds.add_argument("--max", type=int, default=40)
    ds.add_argument("--min-calls", type=int, default=15)
    ds.add_argument("--out", type=Path, required=True)
    ds.add_argument("--dev-share", type=float, default=0.1)
    ds.add_argument("--max-state-tokens", type=int, default=1500)
    ds.add_argument("--teacher", action="store_true", help="add labels from the decision log")

    out = sub.add_parser("outputs", help="saved full outputs")
    osub = out.add_subparsers(dest="action", required=True)
    get = osub.add_parser("get", help="print one saved output")
    get.add_argument(
        "id", help="<capability>/<tool_use_id> (or its /v1/factrail/outputs/ URL), as the note says"
    )
    exp = osub.add_parser("expire", help="delete saved outputs older than N days")
    exp.add_argument("--days", type=float, default=None, help="default the retention (30)")

    ins = sub.add_parser("inspect", help="show what a session's last compactions did")
    ins.add_argument("session", nargs="?", help="the session key (see --list)")
    ins.add_argument("--header", help="the session named by this X-Factrail-Session value")
    ins.add_argument("--list", action="store_true", help="the most recent sessions and their bills")
    ins.add_argument("--limit", type=int, default=20, help="how many sessions --list reads")
    ins.add_argument("--json", action="store_true", help="print the report as JSON")

    hk = sub.add_parser("hook", help="the Claude Code plugin's protocol (JSON on stdin/stdout)")
    hk.add_argument("event", help="compact | turn | taint | status (docs/protocol.md)")

    st = sub.add_parser("settings", help="print the effective settings (secrets hidden)")
    st.add_argument("--markdown", action="store_true", help="print docs/configuration.md")
    st.add_argument(
        "--check",
        action="store_true",
        help="check the settings as `serve` would, without serving: every problem one line"
        " (exit 2), or `settings ok` (exit 0)",
    )
    st.add_argument("--host", default=None, help="with --check: the bind address to check")
    return p


def _judge_flags(
    p: argparse.ArgumentParser, choices: Sequence[str], default: str | None = None
) -> None:
    """Judge flags; each one left out keeps the settings' value (`FACTRAIL_JUDGE*`, …)."""
    p.add_argument("--judge", choices=choices, default=default)
    p.add_argument("--judge-url", default=None, help="System One URL or Tev base URL")
    p.add_argument("--judge-model", default=None)
    p.add_argument("--judge-key-env", default=None, help="read the judge key from this env var")
    p.add_argument("--local", action="store_true", help="declare the judge local (taint fence)")
    p.add_argument("--egress", choices=("full", "metadata"), default=None)
    p.add_argument("--deadline-ms", type=int, default=None)


def load_settings() -> Any:
    """The settings from the environment and the config file; `SettingsError` (exit status 2
    in `main`) when they may not be used."""
    from factrail.settings import Settings

    return Settings()


def _settings(args: argparse.Namespace) -> Any:
    """The settings, with the flags that were given laid over them."""
    import os

    from pydantic import SecretStr

    update: dict[str, Any] = {}
    for flag, name in (
        ("judge", "judge"),
        ("judge_url", "judge_url"),
        ("judge_model", "judge_model"),
        ("egress", "egress"),
        ("deadline_ms", "judge_deadline_ms"),
        ("trigger_tokens", "trigger_tokens"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            update[name] = value
    if getattr(args, "local", False):
        update["judge_local"] = True
    if getattr(args, "judge_key_env", None):
        update["judge_api_key"] = SecretStr(os.environ.get(args.judge_key_env, ""))
    if "trigger_tokens" in update:
        update["trigger_tokens"] = max(1, update["trigger_tokens"])
    if "judge_deadline_ms" in update:
        update["judge_deadline_ms"] = max(1, update["judge_deadline_ms"])
    return load_settings().model_copy(update=update)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    from factrail.settings_check import SettingsError

    args = _parser().parse_args(argv)
    try:
        if args.command == "serve":
            host = args.host or "127.0.0.1"
            _check_bind(host)
            from factrail.gateway.factory import serve

            serve(host=host, port=args.port or 8080, workers=max(1, args.workers))
            return 0
        if args.command == "run":
            from factrail.launch import run

            return run(args.client, args.port, load_settings())
        if args.command == "doctor":
            from factrail.doctor import doctor

            return doctor()
        if args.command == "compact":
            return asyncio.run(_compact(args))
        if args.command == "eval":
            from factrail.eval.command import run_eval

            return run_eval(_eval_run(args), _settings(args))
        if args.command == "report":
            from factrail.eval.userreport import ReportRun, run_report

            report = ReportRun(
                tuple(args.paths), args.out, args.trigger, args.price_profile, args.limit
            )
            return run_report(report, _settings(args))
        if args.command == "dataset":
            from factrail.eval.command import run_dataset

            return run_dataset(_dataset_run(args), _settings(args))
        if args.command == "outputs":
            return _outputs(args)
        if args.command == "settings":
            return _show_settings(args)
        if args.command == "hook":
            from factrail.hook import main as hook_main

            return hook_main(args.event)
        if args.command == "inspect":
            return _inspect(args)
    except SettingsError as err:
        print(f"factrail: {err}", file=sys.stderr)
        return 2
    except CliError as err:
        print(f"factrail: {err}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as err:
        print(f"factrail: {err}", file=sys.stderr)
        return 1
    return 2


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback bind address: `localhost`, 127.0.0.0/8 or ::1."""
    from factrail.settings_check import is_loopback as loopback

    return loopback(host)


def _check_bind(host: str) -> None:
    """Refuse settings that may not be used, and a bind anyone else can reach without an admin
    key of at least 16 characters (`SettingsError`)."""
    from factrail.settings_check import SettingsError

    problems = load_settings().bind_problems(host)
    if problems:
        raise SettingsError(problems)


def _source(args: argparse.Namespace) -> Any:
    from factrail.eval.command import Source

    return Source(
        synthetic=args.synthetic,
        synthetic_v2=getattr(args, "synthetic_v2", None),
        corpus=args.corpus,
        claude_projects=args.claude_projects,
        seed=args.seed,
        max_sessions=args.max,
        min_calls=args.min_calls,
    )


def _eval_run(args: argparse.Namespace) -> Any:
    from factrail.eval.command import EvalRun

    return EvalRun(
        source=_source(args),
        cuts=tuple(float(c) for c in args.cuts.split(",") if c.strip()),
        visibility=args.visibility,
        strategies=tuple(args.strategy) if args.strategy else None,
        sim=args.sim,
        sim_strategies=tuple(args.sim_strategy) if args.sim_strategy else None,
        price=args.price,
        cache_ttl_s=args.cache_ttl,
        price_model=args.price_model,
        decider=args.judge,
        gate=args.gate,
        write_baseline=args.write_baseline,
        tolerance=args.tolerance,
        json_out=args.json_out,
        report=args.report,
        command="factrail " + " ".join(sys.argv[1:]),
    )


def _dataset_run(args: argparse.Namespace) -> Any:
    from factrail.eval.command import DatasetRun

    return DatasetRun(
        source=_source(args),
        out=args.out,
        dev_share=args.dev_share,
        max_state_tokens=args.max_state_tokens,
        teacher=args.teacher,
    )


async def _compact(args: argparse.Namespace) -> int:
    import hashlib

    from factrail.api import compact_transcript
    from factrail.judges import JudgeConfigError
    from factrail.policy.trigger import soft_line

    settings = _settings(args)
    path: Path = args.file
    if not path.is_file():
        raise CliError(f"{path}: no such file")
    raw = path.read_bytes()
    session = args.session or "cli-" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    outputs = None
    if args.save_outputs:
        outputs = settings.output_store()
        if outputs is None:
            raise CliError("no cache folder: set XDG_CACHE_HOME or HOME")
    started = time.perf_counter()
    try:
        done = await compact_transcript(
            raw, filename=path.name, settings=settings, session=session, outputs=outputs
        )
    except JudgeConfigError as err:
        raise CliError(str(err)) from err
    elapsed = time.perf_counter() - started
    result = done.result
    if args.out:
        args.out.write_bytes(done.data)
    calls = done.calls
    remaining = result.tokens_after / result.tokens_before if result.tokens_before else 1.0
    if result.outcome == "compacted":
        stats = (
            f"compacted: tokens {result.tokens_before:,} → {result.tokens_after:,}"
            f" ({remaining:.1%} remaining), tier {result.tier}, {result.reduced} of {calls}"
            f" calls reduced, {result.saved} outputs saved, judge {result.judge}"
            f" ({result.reason}), {elapsed * 1000:.0f} ms"
        )
    else:
        soft = math.ceil(soft_line(result.trigger_tokens))
        stats = (
            f"unchanged: tokens {result.tokens_before:,} are below the soft line {soft:,}"
            f" (5/6 of the trigger {result.trigger_tokens:,}), {calls} calls"
        )
    print(f"factrail: {stats}", file=sys.stdout if args.out else sys.stderr)
    if not args.out:
        sys.stdout.buffer.write(done.data)
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from factrail import runtime
    from factrail.session.inspect import listing, recent_bills, recent_report, render, report
    from factrail.session.keys import header_key
    from factrail.settings import Settings

    settings = Settings()
    store = runtime.state_store(settings)
    try:
        if args.list:
            rows = recent_bills(store, max(args.limit, 1), live_s=settings.cache_ttl_s)
            if args.json:
                sys.stdout.write(json.dumps(recent_report(rows), indent=2) + "\n")
            else:
                sys.stdout.write(listing(rows))
            return 0
        key = header_key(args.header) if args.header else args.session
        if not key:
            raise CliError("name a session (or --header VALUE, or --list)")
        state = store.load(key)
        if state is None:
            raise CliError(f"no session {key!r} in the state store")
        data = report(key, state)
        sys.stdout.write(json.dumps(data, indent=2) + "\n" if args.json else render(data))
        return 0
    finally:
        store.close()


def _show_settings(args: argparse.Namespace) -> int:
    from factrail.settings_check import SettingsError
    from factrail.settings_doc import markdown

    if args.markdown:
        sys.stdout.write(markdown())
        return 0
    if not args.check:
        print(load_settings().model_dump_json(indent=2))
        return 0
    try:
        settings = load_settings()
        problems = settings.bind_problems(args.host) if args.host else []
    except SettingsError as err:
        problems = err.problems
    for line in problems:
        print(f"factrail: {line}", file=sys.stderr)
    if problems:
        return 2
    print(f"settings ok: {settings.source()}")
    return 0


def _outputs(args: argparse.Namespace) -> int:
    store = load_settings().output_store()
    if store is None:
        raise CliError("no cache folder: set XDG_CACHE_HOME or HOME")
    if args.action == "get":
        text = store.get(local_output_id(args.id))
        if text is None:
            raise CliError(f"no saved output {args.id!r}")
        sys.stdout.write(text)
        return 0
    removed = store.expire(time.time(), days=args.days)
    print(json.dumps({"removed": removed}))
    return 0


def local_output_id(value: str) -> str:
    """The output id in what a user pasted: the id itself, or a URL or route ending in it."""
    value = value.strip().strip("`")
    _, sep, rest = value.partition("/factrail/outputs/")
    return rest if sep else value
