"""Replay a corpus through a running factrail gateway against a fake provider prompt cache.

For each transcript (an OpenAI chat message list, or `{"messages": [...]}`) the agent's requests
are replayed as it sent them: one `POST /v1/chat/completions` per assistant message i (from
i = 2, as `factrail eval --sim` does) carrying `messages[:i]`, once through factrail (a real
uvicorn process on loopback, rules judge, in-memory state, outputs saved under a temp XDG home)
and once straight to the fake upstream (`tests/integration/fake_cache_upstream.py`), which
reports in its `usage` the request's tokens and, as cached, those of the longest prefix of
messages it shares with the previous request of the same conversation. So factrail calibrates
its estimate and counts its cache metrics on realistic figures, and the bench sees the bill.

Printed per transcript and in total: requests, factrail's outcomes (`x-factrail`), the prompt
tokens and the prefix-cache share the upstream saw (cached / prompt), input billed under the
Anthropic prices (cached 0.1x, the rest 1.25x) and the OpenAI prices of `--model`, each beside
sending everything directly, compactions, and **reapplied turns that broke the prefix**: a turn
factrail did not compact whose forwarded messages do not extend the previous forwarded request
(must be 0; each is listed with its transcript, turn, and the message and field that differ).

    .venv/bin/python bench/replay.py [--corpus ../shared/corpus/dev] [--trigger 16000]
        [--limit K] [--stream] [--no-session] [--model gpt-4o] [--price-profile auto]
        [--meter text|json|transcript] [--max-seconds 900] [--json PATH]
"""

from __future__ import annotations

import argparse
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

from factrail.policy.cost import Prices, prices  # noqa: E402
from tests.integration.fake_cache_upstream import (  # noqa: E402
    CONVERSATION_HEADER,
    METER_HEADER,
    METERS,
)
from tests.integration.processes import start_factrail, start_fake, stop  # noqa: E402

OUTCOMES = ("passthrough", "reapplied", "compacted", "failed-open")
FAKE_APP = "tests.integration.fake_cache_upstream:app"
FIRST_TURN = 2
"""The first assistant message replayed (as in `factrail eval --sim`)."""


@dataclass(slots=True)
class Sent:
    """One request as the fake upstream saw it."""

    turn: int
    """Index of the assistant message the request precedes (it carries `messages[:turn]`)."""
    outcome: str
    prompt: int
    cached: int
    messages: int
    shared: int
    previous: int | None
    seconds: float
    diff: dict[str, Any] | None = None

    @property
    def extends(self) -> bool:
        """The forwarded messages extend the previous request's (or there was none)."""
        return self.previous is None or self.shared == self.previous


@dataclass(slots=True)
class Run:
    """One transcript's requests, through factrail and directly."""

    name: str
    through: list[Sent] = field(default_factory=list)
    direct: list[Sent] = field(default_factory=list)

    def outcomes(self) -> Counter[str]:
        return Counter(s.outcome for s in self.through)

    def breaks(self) -> list[Sent]:
        """Turns factrail did not compact that broke the prefix of the previous request."""
        return [s for s in self.through if s.outcome != "compacted" and not s.extends]


def billed(sent: list[Sent], price: Prices) -> float:
    return sum(price.billed(s.cached, s.prompt - s.cached) for s in sent)


def share(sent: list[Sent]) -> float:
    prompt = sum(s.prompt for s in sent)
    return sum(s.cached for s in sent) / prompt if prompt else 0.0


def ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def load(path: Path) -> list[dict[str, Any]]:
    data = orjson.loads(path.read_bytes())
    messages = data.get("messages") if isinstance(data, dict) else data
    if not isinstance(messages, list):
        raise ValueError(f"{path}: neither a message list nor an object with `messages`")
    return messages


def turns(messages: list[dict[str, Any]]) -> list[int]:
    return [
        i
        for i, m in enumerate(messages)
        if i >= FIRST_TURN and isinstance(m, dict) and m.get("role") == "assistant"
    ]


class Replayer:
    """Sends a transcript's requests to one base URL and reads what the fake saw."""

    def __init__(self, client: httpx.Client, args: argparse.Namespace, fake_root: str) -> None:
        self.client = client
        self.args = args
        self.fake_root = fake_root

    def send(self, base: str, body: bytes, headers: dict[str, str]) -> tuple[str, float]:
        """POST one request; its `x-factrail` outcome (`direct` without one) and seconds."""
        url = f"{base}/chat/completions"
        start = time.perf_counter()
        if self.args.stream:
            with self.client.stream("POST", url, content=body, headers=headers) as r:
                for _ in r.iter_raw():
                    pass
                status, outcome = r.status_code, r.headers.get("x-factrail", "direct")
        else:
            r = self.client.post(url, content=body, headers=headers)
            status, outcome = r.status_code, r.headers.get("x-factrail", "direct")
        elapsed = time.perf_counter() - start
        if status != 200:
            raise RuntimeError(f"{url} answered {status} ({outcome})")
        return outcome, elapsed

    def records(self, conversation: str) -> list[dict[str, Any]]:
        records = self.client.get(f"{self.fake_root}/_cache_records").json()
        return [r for r in records if r["conversation"] == conversation]

    def replay(self, name: str, messages: list[dict[str, Any]], bases: dict[str, str]) -> Run:
        run = Run(name)
        tag = uuid.uuid4().hex[:8]
        session = f"replay-{tag}-{name}"
        conversations = {side: f"{side}-{tag}-{name}" for side in bases}
        seen: dict[str, list[tuple[int, str, float]]] = {side: [] for side in bases}
        for i in turns(messages):
            body: dict[str, Any] = {"model": self.args.model, "messages": messages[:i]}
            if self.args.stream:
                body["stream"] = True
                body["stream_options"] = {"include_usage": True}
            raw = orjson.dumps(body)
            for side, base in bases.items():  # side by side, turn by turn
                headers = {
                    "content-type": "application/json",
                    CONVERSATION_HEADER: conversations[side],
                    METER_HEADER: self.args.meter,
                }
                if side == "through" and not self.args.no_session:
                    headers["x-factrail-session"] = session
                outcome, seconds = self.send(base, raw, headers)
                seen[side].append((i, outcome, seconds))
        for side, sent in seen.items():
            records = self.records(conversations[side])
            if len(records) != len(sent):
                raise RuntimeError(f"{name}: {len(sent)} {side} requests, fake saw {len(records)}")
            out = run.through if side == "through" else run.direct
            for (i, outcome, seconds), rec in zip(sent, records, strict=True):
                out.append(
                    Sent(i, outcome, rec["prompt"], rec["cached"], rec["messages"],
                         rec["shared"], rec["previous"], seconds, rec.get("diff"))
                )  # fmt: skip
        self.client.post(f"{self.fake_root}/_reset")
        return run


def field_diffs(previous: str | None, current: str | None) -> list[str]:
    """Where two serialised messages differ, field by field (path: previous → current)."""
    if previous is None or current is None:
        return ["message missing: " + ("previous" if previous is None else "current")]
    out: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if a == b:
            if orjson.dumps(a) != orjson.dumps(b):  # equal values, other bytes (key order)
                out.append(f"{path or '.'}: same value, other serialisation (key order?)")
            return
        if isinstance(a, dict) and isinstance(b, dict):
            if list(a) != list(b) and set(a) != set(b):
                out.append(f"{path or '.'} keys: {sorted(a)} → {sorted(b)}")
            for k in a.keys() & b.keys():
                walk(a[k], b[k], f"{path}.{k}")
            return
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for k, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{path}[{k}]")
            return
        if isinstance(a, str) and isinstance(b, str):
            at = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                      min(len(a), len(b)))  # fmt: skip
            out.append(
                f"{path}: {len(a)} → {len(b)} chars, first difference at char {at}: "
                f"{a[max(at - 30, 0) : at + 50]!r} → {b[max(at - 30, 0) : at + 50]!r}"
            )
            return
        out.append(f"{path}: {str(a)[:120]!r} → {str(b)[:120]!r}")

    walk(orjson.loads(previous), orjson.loads(current), "")
    return out


def short(name: str, width: int = 44) -> str:
    stem = name.removesuffix(".json")
    return stem if len(stem) <= width else stem[: width - 1] + "…"


def metric_lines(client: httpx.Client, root: str) -> list[str]:
    wanted = (
        "factrail_cache_breaks_total",
        "factrail_upstream_input_tokens_total",
        "factrail_compactions_total",
        "factrail_compaction_failures_total",
    )
    text = client.get(f"{root}/metrics").text
    return [line for line in text.splitlines() if line.startswith(wanted)]


def report(runs: list[Run], args: argparse.Namespace) -> dict[str, Any]:
    anthropic = prices("anthropic")
    openai = prices("openai", args.model)
    print(
        "| transcript | requests | pass | reap | comp | fail | tokens sent vs direct | "
        "cache share (direct) | billed anthropic vs direct | billed openai vs direct | breaks |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    rows: list[dict[str, Any]] = []
    for run in runs:
        o = run.outcomes()
        through, direct = run.through, run.direct
        row = {
            "transcript": run.name,
            "requests": len(through),
            "outcomes": {k: o.get(k, 0) for k in OUTCOMES},
            "prompt": sum(s.prompt for s in through),
            "prompt_direct": sum(s.prompt for s in direct),
            "cache_share": share(through),
            "cache_share_direct": share(direct),
            "billed_anthropic": billed(through, anthropic),
            "billed_anthropic_direct": billed(direct, anthropic),
            "billed_openai": billed(through, openai),
            "billed_openai_direct": billed(direct, openai),
            "compactions": o.get("compacted", 0),
            "breaks": len(run.breaks()),
        }
        rows.append(row)
        print(
            f"| {short(run.name)} | {row['requests']} | {o.get('passthrough', 0)} | "
            f"{o.get('reapplied', 0)} | {o.get('compacted', 0)} | {o.get('failed-open', 0)} | "
            f"{ratio(row['prompt'], row['prompt_direct']):.3f} | "
            f"{row['cache_share']:.3f} ({row['cache_share_direct']:.3f}) | "
            f"{ratio(row['billed_anthropic'], row['billed_anthropic_direct']):.3f} | "
            f"{ratio(row['billed_openai'], row['billed_openai_direct']):.3f} | {row['breaks']} |"
        )
    every = [s for r in runs for s in r.through]
    every_direct = [s for r in runs for s in r.direct]
    outcomes = Counter(s.outcome for s in every)
    total = {
        "transcripts": len(runs),
        "requests": len(every),
        "outcomes": {k: outcomes.get(k, 0) for k in OUTCOMES},
        "other_outcomes": {k: v for k, v in outcomes.items() if k not in OUTCOMES},
        "prompt": sum(s.prompt for s in every),
        "prompt_direct": sum(s.prompt for s in every_direct),
        "cache_share": share(every),
        "cache_share_direct": share(every_direct),
        "billed_anthropic": billed(every, anthropic),
        "billed_anthropic_direct": billed(every_direct, anthropic),
        "billed_openai": billed(every, openai),
        "billed_openai_direct": billed(every_direct, openai),
        "compactions": outcomes.get("compacted", 0),
        "breaks": sum(r["breaks"] for r in rows),
        "direct_breaks": sum(1 for s in every_direct if not s.extends),
        "ms_median": statistics.median(s.seconds for s in every) * 1000 if every else 0.0,
        "ms_median_direct": (
            statistics.median(s.seconds for s in every_direct) * 1000 if every_direct else 0.0
        ),
    }
    compacted = [r for r in rows if r["compactions"]]
    med = statistics.median

    def median_of(key: str, rs: list[dict[str, Any]]) -> float:
        return med(ratio(r[key], r[key + "_direct"]) for r in rs) if rs else 0.0

    total["median_billed_anthropic_ratio"] = median_of("billed_anthropic", rows)
    total["median_billed_openai_ratio"] = median_of("billed_openai", rows)
    total["median_billed_anthropic_ratio_compacted"] = median_of("billed_anthropic", compacted)
    total["median_billed_openai_ratio_compacted"] = median_of("billed_openai", compacted)
    o = total["outcomes"]
    print(
        f"\ntotal: {total['transcripts']} transcripts, {total['requests']} requests through "
        f"factrail: passthrough {o['passthrough']}, reapplied {o['reapplied']}, compacted "
        f"{o['compacted']}, failed-open {o['failed-open']}"
        + (f", other {total['other_outcomes']}" if total["other_outcomes"] else "")
    )
    print(
        f"prompt tokens the upstream saw: {total['prompt']:,} through factrail, "
        f"{total['prompt_direct']:,} direct ({ratio(total['prompt'], total['prompt_direct']):.3f})"
    )
    print(
        f"prefix-cache share: {total['cache_share']:.3f} through factrail, "
        f"{total['cache_share_direct']:.3f} direct"
    )
    for label, key in (("anthropic (0.1x / 1.25x)", "anthropic"),
                       (f"openai ({args.model}: {openai.cached}x / 1x)", "openai")):  # fmt: skip
        a, b = total[f"billed_{key}"], total[f"billed_{key}_direct"]
        print(
            f"billed input, {label}: {a:,.0f} through factrail, {b:,.0f} direct: "
            f"{ratio(a, b):.3f} (median per transcript {total[f'median_billed_{key}_ratio']:.3f}; "
            f"over the {len(compacted)} that compacted "
            f"{total[f'median_billed_{key}_ratio_compacted']:.3f})"
        )
    print(
        f"compactions: {total['compactions']} in {len(compacted)} transcripts; median request "
        f"{total['ms_median']:.1f} ms through factrail, {total['ms_median_direct']:.1f} ms direct"
    )
    print(
        f"reapplied turns that broke the prefix: {total['breaks']} "
        f"(direct requests that did not extend their previous one: {total['direct_breaks']})"
    )
    for run in runs:
        for s in run.breaks():
            diff = s.diff or {}
            print(
                f"  BREAK {run.name} turn {s.turn} ({s.outcome}): request of {s.messages} "
                f"messages shares {s.shared} of the previous {s.previous}; first differing "
                f"message {diff.get('index')}"
            )
            for line in field_diffs(diff.get("previous"), diff.get("current")):
                print(f"    {line}")
    return {"rows": rows, "totals": total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus" / "dev")
    parser.add_argument("--trigger", type=int, default=16_000, help="FACTRAIL_TRIGGER_TOKENS")
    parser.add_argument("--limit", type=int, default=0, help="first K transcripts (0: all)")
    parser.add_argument("--stream", action="store_true", help="streamed requests")
    parser.add_argument("--no-session", action="store_true", help="no X-Factrail-Session")
    parser.add_argument("--model", default="gpt-4o")
    parser.add_argument(
        "--price-profile",
        default="auto",
        choices=("auto", "anthropic", "openai", "none"),
        help="the gateway's FACTRAIL_PRICE_PROFILE (auto: by the model's name)",
    )
    parser.add_argument(
        "--meter",
        default="text",
        choices=METERS,
        help="how the fake counts a message's tokens (see fake_cache_upstream.py)",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=900.0,
        help="start no new transcript after this long (the report says so)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    files = sorted(args.corpus.glob("*.json"))
    if args.limit:
        files = files[: args.limit]
    if not files:
        sys.exit(f"no *.json transcripts in {args.corpus}")
    home = Path(tempfile.mkdtemp(prefix="factrail-replay-"))
    fake_root, fake = start_fake(FAKE_APP)
    proxy = None
    runs: list[Run] = []
    started = time.monotonic()
    try:
        proxy_url, proxy = start_factrail(
            f"{fake_root}/v1",
            home,
            FACTRAIL_TRIGGER_TOKENS=str(args.trigger),
            FACTRAIL_REARM_TOKENS="0",  # the default gap, an eighth of the trigger
            FACTRAIL_PRICE_PROFILE=args.price_profile,
            FACTRAIL_READ_TIMEOUT_S="120",
            FACTRAIL_STATE_URL="memory://",
        )
        client = httpx.Client(timeout=180, trust_env=False)
        replayer = Replayer(client, args, fake_root)
        bases = {"direct": f"{fake_root}/v1", "through": proxy_url}
        for path in files:
            if time.monotonic() - started > args.max_seconds:
                print(f"stopped after {len(runs)} of {len(files)} transcripts (--max-seconds)\n")
                break
            runs.append(replayer.replay(path.name, load(path), bases))
        elapsed = time.monotonic() - started
        session = "none (factrail keys by the stable head)" if args.no_session else "per transcript"
        print(
            f"corpus={args.corpus} transcripts={len(runs)} trigger={args.trigger} "
            f"stream={args.stream} session header={session} model={args.model} "
            f"price profile={args.price_profile} meter={args.meter} wall={elapsed:.0f}s\n"
        )
        figures = report(runs, args)
        print("\nfactrail /metrics:")
        for line in metric_lines(client, proxy_url.removesuffix("/v1")):
            print(f"  {line}")
        if args.json:
            figures["args"] = {k: str(v) for k, v in vars(args).items()}
            args.json.write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))
    finally:
        if proxy is not None:
            stop(proxy)
        stop(fake)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
