"""What `bench/claude_code_bill.py` and `bench/codex_bill.py` share: a real client's scripted
sessions run direct and through one `factrail serve` per trigger, printed side by side."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from tests.integration.bills import Pairs, Session
from tests.integration.processes import Process, start_fake, stop

Columns = Sequence[tuple[str, int, Callable[[Session], str]]]
"""The client's own columns: (heading, width, cell), right-aligned."""
Run = Callable[..., Session]
"""`run_session(endpoint, url, steps, work, script)` of a client module."""
Gateway = Callable[[str, Path, int], tuple[str, Process]]
"""`start_gateway(endpoint, home, trigger)` of a client module: the URL its client is pointed
at, and the process."""


def compare(
    app: str,
    run: Run,
    start_gateway: Gateway,
    route: str,
    columns: Columns,
    steps: Sequence[int],
    triggers: Sequence[int],
    *,
    direct: Callable[[str], str] = lambda endpoint: endpoint,
    script: Mapping[str, Any] | None = None,
    prefix: str = "factrail-bill-",
) -> None:
    """Print, per session length, the session direct against `app` (the scripted endpoint,
    reached at `direct(endpoint)`), then through a gateway per trigger. The sessions work in a
    temporary folder named `prefix…`: its path is in every request, so a figure is reproduced
    to the token only with the same prefix."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    endpoint, fake = start_fake(app)
    gateways: list[tuple[int, str, Process]] = []
    try:
        for trigger in triggers:
            gateways.append((trigger, *start_gateway(endpoint, work / f"g{trigger}", trigger)))
        print(
            f"{'calls':>5} {'route':<16} {'reqs':>4} {'bad':>3} {'compact':>7} "
            + " ".join(f"{h:>{w}}" for h, w, _ in columns)
            + f" {'billed':>9} {'ratio':>6} {'fact':>6} {'ledger':>6}"
        )
        runner = partial(run, endpoint)
        pairs = [(t, Pairs(direct(endpoint), url, route, runner, work)) for t, url, _ in gateways]
        for n in steps:
            # Folder names of one length: the project path is in every request.
            alone = runner(direct(endpoint), n, work / f"{n}-d{0:06d}", script)
            _line(n, "direct", alone, "-", alone.billed, columns)
            for trigger, gateway in pairs:
                through, grew = gateway.through(n, work / f"{n}-t{trigger:06d}", script)
                compactions = f"{grew.get('compactions', 0):.0f}"
                # factrail's own estimate of the session sent whole: what it was billed, plus
                # what factrail says it spared (the turns it did not step are alike both ways)
                whole = through.billed + grew.get("ledger_spared", 0.0)
                _line(n, f"factrail T={trigger // 1000}k", through, compactions, alone.billed,
                      columns, through.billed / whole)  # fmt: skip
    finally:
        for _, _, proc in gateways:
            stop(proc)
        stop(fake)
        shutil.rmtree(work, ignore_errors=True)


def _line(
    steps: int,
    label: str,
    s: Session,
    compactions: str,
    direct: float,
    columns: Columns,
    estimated: float | None = None,
) -> None:
    """One session's row; `estimated`: the ratio to direct factrail's own bill of it gives."""
    cells = " ".join(f"{cell(s):>{w}}" for _, w, cell in columns)
    told = "-" if estimated is None else f"{estimated:.3f}"
    print(
        f"{steps:>5} {label:<16} {len(s.records):>4} {len(s.rejected):>3} {compactions:>7} "
        f"{cells} {s.billed:>9,.0f} {s.billed / direct:>6.3f} {s.fact:>6} {told:>6}",
        flush=True,
    )
    if s.returncode != 0:
        print(f"  the client exited {s.returncode}: {s.stderr[-600:]}")


RESPONSES_COLUMNS: Columns = (
    ("uncached", 9, lambda s: f"{s.total('input_tokens'):,}"),
    ("written", 9, lambda s: f"{s.total('cache_creation'):,}"),
    ("cached", 9, lambda s: f"{s.total('cache_read'):,}"),
    ("cached %", 8, lambda s: f"{s.cache_read_share:.1%}"),
)
"""What the Responses clients' benches print of each session: OpenAI's usage kinds."""


def compare_responses(
    run: Run, steps: str, triggers: str, script: Mapping[str, Any], prefix: str
) -> None:
    """`compare` for a client of the scripted Responses endpoint (`run`: its `run_session`),
    direct at the endpoint's `/v1` and through a gateway per trigger under OpenAI's prices
    (`steps`, `triggers`: comma lists)."""
    from tests.integration.codex import start_gateway

    compare(
        "tests.integration.scripted_responses:app",
        run,
        start_gateway,
        "responses",
        RESPONSES_COLUMNS,
        [int(n) for n in steps.split(",")],
        [int(t) for t in triggers.split(",")],
        direct=lambda endpoint: f"{endpoint}/v1",
        script=script,
        prefix=prefix,
    )
