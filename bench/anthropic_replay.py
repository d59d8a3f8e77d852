"""Replay a corpus as a Claude Code-like client sends it to Anthropic: through factrail and direct,
each against its own scripted endpoint that bills the prompt cache by breakpoints.

`bench/replay.py` bills the longest shared prefix of consecutive requests, as OpenAI's automatic
cache does and as `factrail eval --sim` assumes. Anthropic caches only at `cache_control`
breakpoints: a request reads the longest prefix written earlier at one of its breakpoints (or up
to 20 blocks before one) and writes an entry at each. This bench converts each transcript (an
OpenAI chat message list) to Messages requests marked the way Claude Code marks them (its system
prompt and its last message, the marker moving every turn), replays one request per assistant
turn as `bench/replay.py` does, and reads the bill from two `tests/integration/
scripted_anthropic.py` processes (one direct, one behind `factrail serve`; rules judge,
`anthropic` price profile), which validate every request as the API would and report usage.

Printed per transcript and in total: requests, factrail's outcomes, billed token-units (input ×
1 + cache write × 1.25 + cache read × 0.1) direct and through factrail and their ratio, the ratio
factrail's own bill of the session gives (`ledger`: billed ÷ (billed + spared), from the
gateway's sessions route), the cache-read share, and *cache breaks*: turns that read less
from the cache than the previous request had read and written, on turns factrail did not
compact (a re-application fault or a marker that could not reach the last entry; direct shows
the client's own).

    .venv/bin/python bench/anthropic_replay.py [--corpus ../shared/corpus/dev] [--trigger 16000]
        [--limit K] [--only NAME-PART] [--no-cache-mark] [--ttl 1h] [--replicas N]

`--replicas N`: N gateways share one state store (a SQLite file) and the outputs folder, and
each transcript's turns go to them in turn, as a load balancer spreads a session's requests.

`--ttl 1h` marks the client's breakpoints for Anthropic's one-hour cache (`ttl: "1h"`, as Claude
Code on a subscription does): both sides' cache writes are billed at 2× input, and factrail's
gate prices them so.
"""

from __future__ import annotations

import argparse
import copy
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.replay import load  # noqa: E402
from factrail.core.model import content_text  # noqa: E402
from factrail.policy.cost import ANTHROPIC, LONG_TTL_S, Prices, prices  # noqa: E402
from factrail.session.keys import header_key  # noqa: E402
from tests.integration.processes import start_factrail, start_fake, stop  # noqa: E402

FAKE_APP = "tests.integration.scripted_anthropic:app"
MODEL = "claude-sonnet-4-5"
MARK = {"type": "ephemeral"}
LONG_MARK = {"type": "ephemeral", "ttl": "1h"}
FIRST_TURN = 2
"""The first assistant message replayed (as in `factrail eval --sim` and `bench/replay.py`)."""


@dataclass(slots=True)
class Converted:
    """A transcript as Anthropic Messages: system blocks, tools, messages, and for each replayed
    assistant turn of the source the number of messages its request carries."""

    system: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    turns: list[int]


def _input(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = orjson.loads(arguments) if isinstance(arguments, str | bytes) else arguments
    except orjson.JSONDecodeError:
        return {"input": arguments}
    return value if isinstance(value, dict) else {"input": value}


def convert(source: list[dict[str, Any]], mark: dict[str, str] = MARK) -> Converted:
    """The chat transcript as Messages: leading system messages become the system prompt, later
    ones user text; consecutive messages of a role merge; a call without a result (or a result
    without its call) is dropped, as the API would reject either."""
    answered = {m.get("tool_call_id") for m in source if m.get("role") == "tool"}
    offered: set[str] = set()
    system: list[dict[str, Any]] = []
    tools: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    turns: list[int] = []
    used: set[str] = set()

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for i, m in enumerate(source):
        role = m.get("role")
        if role == "assistant" and i >= FIRST_TURN and out and out[-1]["role"] == "user":
            turns.append(len(out))
        if role == "system" and not out:
            if text := content_text(m.get("content"), "\n"):
                system.append({"type": "text", "text": text})
        elif role in ("user", "system"):
            if text := content_text(m.get("content"), "\n"):
                add("user", [{"type": "text", "text": text}])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if text := content_text(m.get("content"), "\n"):
                blocks.append({"type": "text", "text": text})
            for call in m.get("tool_calls") or []:
                cid, fn = call.get("id"), call.get("function") or {}
                if not cid or cid not in answered or cid in used:
                    continue
                used.add(cid)
                offered.add(cid)
                name = str(fn.get("name") or "tool")
                tools.setdefault(name, {"name": name, "input_schema": {"type": "object"}})
                arguments = _input(fn.get("arguments"))
                blocks.append({"type": "tool_use", "id": cid, "name": name, "input": arguments})
            add("assistant", blocks)
        elif role == "tool":
            cid = m.get("tool_call_id")
            if cid in offered and out:
                offered.discard(cid)
                content = content_text(m.get("content"), "\n")
                add("user", [{"type": "tool_result", "tool_use_id": cid, "content": content}])
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": "(session start)"}]})
        turns = [t + 1 for t in turns]
    if system:
        system[-1] = {**system[-1], "cache_control": mark}
    return Converted(system, list(tools.values()), out, turns)


def request(c: Converted, count: int, mark: dict[str, str] = MARK) -> dict[str, Any]:
    """The request carrying the first `count` messages, the last one marked (Claude Code's)."""
    messages = c.messages[:count]
    last = copy.deepcopy(messages[-1])
    last["content"][-1]["cache_control"] = mark
    body: dict[str, Any] = {"model": MODEL, "max_tokens": 1024, "messages": [*messages[:-1], last]}
    if c.system:
        body["system"] = c.system
    if c.tools:
        body["tools"] = c.tools
    return body


@dataclass(slots=True)
class Side:
    billed: float = 0.0
    read: int = 0
    total: int = 0
    breaks: int = 0
    requests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    price: Prices = ANTHROPIC

    def add(self, records: list[dict[str, Any]], outcomes: list[str]) -> None:
        previous: int | None = None
        for rec, outcome in zip(records, outcomes, strict=True):
            read, written = int(rec["cache_read"]), int(rec["cache_creation"])
            uncached = int(rec["input_tokens"])
            self.billed += uncached + written * self.price.write + read * self.price.cached
            self.read += read
            self.total += read + written + uncached
            if previous is not None and outcome != "compacted" and read < previous:
                self.breaks += 1
            previous = read + written
            self.requests += 1
            self.outcomes[outcome] += 1


def replay(
    client: httpx.Client,
    c: Converted,
    name: str,
    urls: tuple[str, list[str], list[str]],
    long_ttl: bool,
) -> tuple[Side, Side, float]:
    """`urls`: direct, the gateways (each turn to the next), and the two endpoints' roots.
    Returns both sides and what factrail's own bill says the session spared."""
    direct, gateways, fakes = urls
    session = f"areplay-{uuid.uuid4().hex[:8]}-{name}"
    outcomes: dict[str, list[str]] = {"direct": [], "through": []}
    mark = LONG_MARK if long_ttl else MARK
    for turn, count in enumerate(c.turns):
        raw = orjson.dumps(request(c, count, mark))
        through = gateways[turn % len(gateways)]
        for side, base in (("direct", direct), ("through", through)):
            headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
            if side == "through":
                headers["x-factrail-session"] = session
            r = client.post(f"{base}/v1/messages", content=raw, headers=headers)
            if r.status_code != 200:
                raise RuntimeError(f"{name} turn {count} {side}: {r.status_code} {r.text[:300]}")
            outcomes[side].append(r.headers.get("x-factrail", "direct"))
    sides = []
    for side, fake in zip(("direct", "through"), fakes, strict=True):
        records = [r for r in client.get(f"{fake}/_records").json() if r.get("status") == 200]
        client.post(f"{fake}/_reset")
        s = Side(price=prices("anthropic", MODEL, LONG_TTL_S if long_ttl else None))
        s.add(records, outcomes[side])
        sides.append(s)
    told = client.get(f"{gateways[0]}/v1/factrail/sessions/{header_key(session)}").json()
    return sides[0], sides[1], (told.get("bill") or {}).get("spared", 0.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus" / "dev")
    parser.add_argument("--trigger", type=int, default=16000, help="FACTRAIL_TRIGGER_TOKENS")
    parser.add_argument("--limit", type=int, default=0, help="only the first K transcripts")
    parser.add_argument("--only", default="", help="only transcripts whose name holds this")
    parser.add_argument(
        "--no-cache-mark", action="store_true", help="FACTRAIL_CACHE_MARK=false (no marker)"
    )
    parser.add_argument("--ttl", choices=("5m", "1h"), default="5m", help="the client's markers")
    parser.add_argument(
        "--replicas", type=int, default=1, help="gateways sharing one state store, in turn"
    )
    args = parser.parse_args()
    files = sorted(p for p in args.corpus.glob("*.json*") if p.is_file() and args.only in p.name)
    if args.limit:
        files = files[: args.limit]
    if not files:
        print(f"no transcripts under {args.corpus}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="factrail-areplay-"))
    direct_root, direct_proc = start_fake(FAKE_APP)
    behind_root, behind_proc = start_fake(FAKE_APP)
    unused_openai = "http://127.0.0.1:9/v1"
    state = "memory://" if args.replicas <= 1 else f"sqlite:///{work / 'state.db'}"
    started_gateways = [
        start_factrail(
            unused_openai,
            work,
            FACTRAIL_ANTHROPIC_UPSTREAM_URL=behind_root,
            FACTRAIL_PRICE_PROFILE="anthropic",
            FACTRAIL_TRIGGER_TOKENS=str(args.trigger),
            FACTRAIL_REARM_TOKENS="0",  # the default gap (the test environment sets its own)
            FACTRAIL_STATE_URL=state,
            FACTRAIL_CACHE_MARK="false" if args.no_cache_mark else "true",
            FACTRAIL_READ_TIMEOUT_S="60",
        )
        for _ in range(max(args.replicas, 1))
    ]
    gateways = [url.removesuffix("/v1") for url, _ in started_gateways]
    totals = {"direct": Side(), "through": Side()}
    ratios: list[float] = []
    told: list[float] = []  # the ratio factrail's own bill gives each session
    started = time.perf_counter()
    try:
        with httpx.Client(timeout=120) as client:
            print(f"{'transcript':<44} {'reqs':>4} {'comp':>4} {'direct':>11} {'factrail':>11} "
                  f"{'ratio':>6} {'ledger':>6} {'read %':>6} {'breaks':>6}")  # fmt: skip
            for path in files:
                long_ttl = args.ttl == "1h"
                c = convert(load(path), LONG_MARK if long_ttl else MARK)
                if not c.turns:
                    continue
                urls = (direct_root, gateways, [direct_root, behind_root])
                d, t, spared = replay(client, c, path.stem, urls, long_ttl)
                for key, s in (("direct", d), ("through", t)):
                    total = totals[key]
                    total.billed += s.billed
                    total.read += s.read
                    total.total += s.total
                    total.breaks += s.breaks
                    total.requests += s.requests
                    total.outcomes.update(s.outcomes)
                share = t.read / t.total if t.total else 0.0
                ratios.append(t.billed / d.billed)
                told.append(t.billed / (t.billed + spared))
                print(f"{path.stem[:44]:<44} {t.requests:>4} {t.outcomes['compacted']:>4} "
                      f"{d.billed:>11,.0f} {t.billed:>11,.0f} {t.billed / d.billed:>6.3f} "
                      f"{told[-1]:>6.3f} {share:>6.1%} {t.breaks:>6}", flush=True)  # fmt: skip
    finally:
        for _, proxy in started_gateways:
            stop(proxy)
        stop(direct_proc)
        stop(behind_proc)
        shutil.rmtree(work, ignore_errors=True)
    d, t = totals["direct"], totals["through"]
    print()
    print(f"{len(files)} transcripts, {t.requests} requests each way, trigger {args.trigger}, "
          f"markers' ttl {args.ttl}, {len(gateways)} gateway(s), "
          f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    print(f"factrail outcomes: {dict(t.outcomes)}")
    for key, s in (("direct", d), ("through factrail", t)):
        share = s.read / s.total if s.total else 0.0
        print(f"{key:<17} billed {s.billed:>13,.0f}  cache-read share {share:.3f}  "
              f"cache breaks {s.breaks}")  # fmt: skip
    print(f"billed through factrail / direct: {t.billed / d.billed:.3f} (median per transcript "
          f"{statistics.median(ratios):.3f}; {sum(r > 1 for r in ratios)} of {len(ratios)} "
          "above 1)")  # fmt: skip
    above = [r > 1 for r in ratios]
    flagged = [r > 1 for r in told]
    errors = [b - a for a, b in zip(ratios, told, strict=True)]
    print(f"factrail's own bill: {sum(a and f for a, f in zip(above, flagged, strict=True))} of "
          f"{sum(above)} sessions above direct reported above it, "
          f"{sum(f and not a for a, f in zip(above, flagged, strict=True))} reported above it "
          f"wrongly; its ratio minus the measured one: median {statistics.median(errors):+.3f}, "
          f"from {min(errors):+.3f} to {max(errors):+.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
