"""`factrail report`: what factrail would have kept and billed on a user's own sessions.

Every session found (`sessions.discover`) is loaded and simulated on its own, one at a time, by
`eval --sim`'s machinery (`sim.simulate`: the gateway's compactor, the erase rule, sending
everything) at the session's trigger: `--trigger`, else the settings' trigger for the model
the session names. The sim's window is the trigger over `sim.TRIGGER_SHARE`, so a session is
replayed at a length of `TRIGGER_SHARE` × its tokens / the trigger. Prices are the settings'
`price_profile` (or `--price-profile`); `auto` picks by the session's model, Claude Code
sessions naming none being billed as Anthropic's.

The largest session is replayed once more through the compactor alone for its tokens per turn,
as sent and whole. Nothing of a transcript reaches the page but redacted file names, client and
model names and figures (`html.page`).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from factrail import runtime
from factrail.core.formats.base import FormatError
from factrail.core.model import Message, transcript_tokens
from factrail.core.redact import redact
from factrail.core.tokens import TokenCache
from factrail.eval.progress import render
from factrail.eval.sessions import Session, Skipped, discover, load, newest, shown_name, turns
from factrail.eval.sim import (
    SIM_SECRET,
    TRIGGER_SHARE,
    EngineDocument,
    SimRow,
    options_at,
    simulate,
)
from factrail.policy.cost import Profile, profile_for
from factrail.session import EngineOptions
from factrail.settings import Settings
from factrail.stores.outputs import OutputStore

STRATEGIES = ("rails", "erase", "none")
REASON = 80
"""At most this many characters of a parser's message in a skipped file's reason."""
NO_SESSIONS = 2
"""The exit status when no session is found."""


@dataclass(frozen=True, slots=True)
class ReportRun:
    """One `factrail report`."""

    paths: tuple[Path, ...]
    out: Path = Path("factrail-report.html")
    trigger: int | None = None
    """The trigger every session is replayed at (None: the settings' for its model)."""
    price_profile: str | None = None
    """`anthropic`, `openai`, `none` or `auto` (None: the settings')."""
    limit: int = 0
    """At most this many sessions, the most recently modified (0: all)."""
    command: str = "factrail report"


@dataclass(frozen=True, slots=True)
class Figures:
    """One session's replay: its size, and its bill under each strategy (token-units)."""

    name: str
    client: str
    model: str
    profile: Profile
    trigger: int
    turns: int
    peak_whole: int
    peak_factrail: int
    compactions: int
    billed_factrail: float
    billed_erase: float
    billed_everything: float
    facts_needed: int = 0
    facts_factrail: int = 0
    facts_erase: int = 0

    @property
    def ratio_factrail(self) -> float:
        """Billed through factrail over sending everything."""
        return self.billed_factrail / self.billed_everything if self.billed_everything else 1.0

    @property
    def ratio_erase(self) -> float:
        """Billed under the erase rule over sending everything."""
        return self.billed_erase / self.billed_everything if self.billed_everything else 1.0


@dataclass(frozen=True, slots=True)
class Trace:
    """One session's tokens per request: whole and as factrail sent it."""

    name: str
    trigger: int
    whole: list[int]
    sent: list[int]


@dataclass(slots=True)
class Report:
    """Everything the page shows."""

    sessions: list[Figures] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    trace: Trace | None = None
    command: str = "factrail report"
    trigger: int | None = None
    price_profile: str = "auto"

    def total(self, attribute: str) -> float:
        """The sum of one `Figures` attribute over every session."""
        return float(sum(getattr(f, attribute) for f in self.sessions))


class Bar:
    """Sessions done of the total and the current one's name, on a terminal only."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.stream = stream
        isatty = getattr(stream, "isatty", None)
        try:
            self.shown = bool(isatty()) if callable(isatty) else False
        except (OSError, ValueError):
            self.shown = False
        self.width = 0

    def draw(self, done: int, name: str) -> None:
        """Redraw the line in place."""
        if not self.shown:
            return
        line = f"{render(done, self.total, 'report')} {name}"[:100]
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def close(self) -> None:
        """End the bar's line."""
        if self.shown:
            self.draw(self.total, "")
            self.stream.write("\n")
            self.stream.flush()


def pricing(session: Session, configured: str) -> Profile:
    """The profile a session is billed under (`auto`: by its model's provider)."""
    model = session.model or ("claude" if session.client == "Claude Code" else "")
    return profile_for(configured, model)


def length_for(messages: Sequence[Message], trigger: int) -> tuple[float, int]:
    """The sim length that puts the trigger at `trigger` tokens, and the transcript's tokens."""
    total = transcript_tokens(messages, TokenCache(min_len=64))
    return (TRIGGER_SHARE * total / trigger if trigger > 0 else 0.0), total


def measure(
    session: Session,
    settings: Settings,
    *,
    trigger: int | None = None,
    configured: str | None = None,
) -> Figures:
    """Replay one session under factrail, the erase rule and sending everything."""
    chosen = trigger or settings.trigger().for_model(session.model) or settings.trigger_tokens
    profile = pricing(session, configured or settings.price_profile)
    length, total = length_for(session.messages, chosen)
    rows: list[SimRow] = asyncio.run(
        simulate(
            session.name,
            session.messages,
            settings.engine_options(),
            lengths=(length,),
            strategies=STRATEGIES,
            profile=profile,
            cache_ttl_s=settings.cache_ttl_s,
            model=session.model,
            settings=settings,
        )
    )
    by = {r.strategy: r for r in rows}
    window = total / length if length else float(total)
    return Figures(
        name=session.name,
        client=session.client,
        model=session.model,
        profile=profile,
        trigger=chosen,
        turns=by["none"].requests,
        peak_whole=round(by["none"].peak_fill * window),
        peak_factrail=round(by["rails"].peak_fill * window),
        compactions=by["rails"].compactions,
        billed_factrail=by["rails"].billed,
        billed_erase=by["erase"].billed,
        billed_everything=by["none"].billed,
        facts_needed=by["rails"].needed,
        facts_factrail=by["rails"].kept,
        facts_erase=by["erase"].kept,
    )


async def _trace(
    session: Session, options: EngineOptions, settings: Settings, figures: Figures
) -> Trace:
    """The compactor's requests for one session, at the window `simulate` gave it."""
    length, total = length_for(session.messages, figures.trigger)
    window = total / length if length else float(total)
    at = replace(
        options_at(options, int(TRIGGER_SHARE * window), window), price_profile=figures.profile
    )
    sim = settings.model_copy(update={"state_url": "memory://", "judge": "rules"})
    count = TokenCache(min_len=64)
    whole: list[int] = []
    sent: list[int] = []
    with tempfile.TemporaryDirectory(prefix="factrail-report-") as folder:
        outputs = OutputStore(Path(folder), secret=SIM_SECRET) if options.save_outputs else None
        compactor = runtime.compactor(
            sim,
            judge=runtime.judge(sim).required(),
            state=runtime.state_store(sim),
            outputs=outputs,
            options=at,
        )
        try:
            for i, m in enumerate(session.messages):
                if m.role != "assistant" or i < 2:
                    continue
                context = session.messages[:i]
                result = await compactor.compact(
                    session.name,
                    EngineDocument(context),
                    model=session.model,
                    cache_ttl_s=settings.cache_ttl_s,
                )
                out = result.document if result.document is not None else context
                whole.append(transcript_tokens(context, count))
                sent.append(transcript_tokens(out, count))
        finally:
            compactor.close()
    return Trace(session.name, int(TRIGGER_SHARE * window), whole, sent)


def trace(session: Session, settings: Settings, figures: Figures) -> Trace:
    """Tokens per request of one session, whole and as factrail sent them."""
    return asyncio.run(_trace(session, settings.engine_options(), settings, figures))


def build(run: ReportRun, settings: Settings, stream: TextIO | None = None) -> Report:
    """Find, load and replay every session, one at a time; then trace the largest."""
    out = sys.stderr if stream is None else stream
    files, skipped = discover(run.paths)
    files = newest(files, run.limit)
    report = Report(
        skipped=skipped,
        command=run.command,
        trigger=run.trigger,
        price_profile=run.price_profile or settings.price_profile,
    )
    bar = Bar(len(files), out)
    largest: tuple[int, Path, int] | None = None  # (peak tokens, file, index in sessions)
    for done, path in enumerate(files):
        bar.draw(done, shown_name(path))
        outcome = _one(path, run, settings)
        if isinstance(outcome, Skipped):
            report.skipped.append(outcome)
            continue
        report.sessions.append(outcome)
        if largest is None or outcome.peak_whole > largest[0]:
            largest = (outcome.peak_whole, path, len(report.sessions) - 1)
    bar.close()
    if largest is not None:
        _, path, index = largest
        try:
            report.trace = trace(load(path), settings, report.sessions[index])
        except Exception:  # the plot is optional; the figures stand
            report.trace = None
    return report


def _one(path: Path, run: ReportRun, settings: Settings) -> Figures | Skipped:
    """One file's figures, or why it was left out (a user's file may be anything: every
    failure is a reason, never a traceback)."""
    try:
        session = load(path)
    except UnicodeDecodeError:
        return Skipped(shown_name(path), "not UTF-8 text")
    except FormatError as err:
        return Skipped(shown_name(path), f"not a transcript: {redact(str(err)).text[:REASON]}")
    except (OSError, ValueError) as err:
        return Skipped(shown_name(path), f"unreadable: {type(err).__name__}")
    except Exception as err:  # any parser failure on a foreign file
        return Skipped(shown_name(path), f"not a transcript: {type(err).__name__}")
    if turns(session.messages) == 0:
        return Skipped(session.name, "no assistant turn to replay")
    try:
        return measure(session, settings, trigger=run.trigger, configured=run.price_profile)
    except Exception as err:  # reported per session; the rest run
        return Skipped(session.name, f"replay failed: {type(err).__name__}")


def run_report(run: ReportRun, settings: Settings, stream: TextIO | None = None) -> int:
    """Write the page; exit status 0, or `NO_SESSIONS` when no session could be replayed."""
    from factrail.eval.html import page

    if run.trigger is not None and run.trigger <= 0:
        raise ValueError("--trigger must be a positive number of tokens")
    out = sys.stderr if stream is None else stream
    report = build(run, settings, out)
    if not report.sessions:
        reasons = "; ".join(f"{s.name}: {s.reason}" for s in report.skipped[:5])
        detail = f" ({reasons})" if reasons else ""
        print(f"factrail: no sessions found{detail}", file=out)
        return NO_SESSIONS
    run.out.write_text(page(report), encoding="utf-8")
    print(f"factrail report: {len(report.sessions)} session(s) → {run.out}", file=out)
    return 0
