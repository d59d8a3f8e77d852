"""The fake upstream direct vs through factrail (both real loopback processes).

Every case is warmed up, then measured in rounds; within a round direct and proxied calls
alternate. The small cases (small request, stream) are cheap and noisy, so they run
`--reps` x `CHEAP_FACTOR` times a round. Printed as a markdown table: the median of per-round
medians, and the min-max of the per-round added ms (how noisy the machine was):
    .venv/bin/python bench/proxy.py [--rounds 5] [--reps 5]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from factrail.core.formats import openai_chat  # noqa: E402
from factrail.core.model import transcript_tokens  # noqa: E402
from factrail.core.tokens import estimate_tokens  # noqa: E402
from tests.integration.processes import start_factrail, start_fake, stop  # noqa: E402

CHEAP_FACTOR = 40
"""Repetitions of the small cases per `--reps`."""
WARMUP = 20
"""Unmeasured calls of each cheap case per base before the first round (one for the others)."""
SOFT_MODEL = "bench-soft-line"
ANSWER_S = 1.0
"""How long the model takes to answer the turn before the compaction turn (the proxy prepares
that turn's new results meanwhile); not part of any timing."""


def transcript(tokens: int) -> list[dict[str, Any]]:
    """An agent transcript of `tokens` estimated tokens, give or take one step (tool-heavy:
    every result is a 120-line test log, dense in numbers and paths)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing build."},
    ]
    total = sum(estimate_tokens(m["content"]) for m in messages)
    i = 0
    while total < tokens:
        call = f"call_{i}"
        args = orjson.dumps({"cmd": f"pytest -k t{i}"}).decode()
        fn = {"name": "bash", "arguments": args}
        tool_calls = [{"id": call, "type": "function", "function": fn}]
        messages.append({"role": "assistant", "content": f"Step {i}.", "tool_calls": tool_calls})
        lines = [f"tests/test_{i}.py::case_{j} PASSED in 0.{j:02d}s" for j in range(120)]
        lines[60] = f"ERROR test_{i}: expected 4{i} got 5{i} at src/mod_{i}.py:{i + 10}"
        output = "\n".join(lines)
        messages.append({"role": "tool", "tool_call_id": call, "content": output})
        total += estimate_tokens(f"Step {i}.") + estimate_tokens(args) + estimate_tokens(output)
        i += 1
    messages.append({"role": "user", "content": "Continue."})
    return messages


def estimated(messages: list[dict[str, Any]]) -> int:
    """factrail's token estimate of a chat transcript (what its lines are drawn against)."""
    return transcript_tokens(openai_chat.parse(messages).messages, estimate_tokens)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="factrail-bench-"))
    root, fake = start_fake("tests.integration.fake_upstream:app")
    direct = f"{root}/v1"
    big = transcript(200_000)
    bigger = transcript(300_000)  # the size the 200k case had until its tokens were counted
    # A model family whose trigger puts the turn before `big` just under the soft line (5/6 of
    # the trigger) and `big` just past it: the compaction a growing session meets first.
    before = big[:-3]
    soft = (estimated(before) + estimated(big)) / 2
    soft_trigger = {SOFT_MODEL: math.ceil(soft * 6 / 5)}
    proxy_url, proxy = start_factrail(
        direct,
        home,
        FACTRAIL_TRIGGER_TOKENS="500000",
        FACTRAIL_REARM_TOKENS="0",  # the default gap, an eighth of the trigger
        FACTRAIL_READ_TIMEOUT_S="60",
        FACTRAIL_TRIGGER_BY_MODEL=orjson.dumps(soft_trigger).decode(),
    )
    small = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    below = orjson.dumps({"model": "gpt-4.1", "messages": big})
    above = orjson.dumps({"model": "gpt-4o", "messages": big})
    far_above = orjson.dumps({"model": "gpt-4o", "messages": bigger})
    more = [*big, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    nxt = orjson.dumps({"model": "gpt-4o", "messages": more})
    stream = orjson.dumps({"model": "gpt-4o", "stream": True,
                           "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
    at_soft = orjson.dumps({"model": SOFT_MODEL, "messages": big})
    turn_before = orjson.dumps({"model": SOFT_MODEL, "messages": before})
    client = httpx.Client(timeout=120)

    def post(base: str, body: bytes, session: str | None = None) -> Callable[[], object]:
        # No usage in the answers: the estimate stays uncalibrated, so the lines stay put.
        headers = {"x-fake-mode": "no-usage"}
        if session:
            headers["x-factrail-session"] = session
        return lambda: client.post(f"{base}/chat/completions", content=body, headers=headers)

    def first_chunk(base: str) -> float:
        start = time.perf_counter()
        with client.stream("POST", f"{base}/chat/completions", content=stream) as r:
            chunks = r.iter_raw()
            next(chunks)
            elapsed = time.perf_counter() - start
            for _ in chunks:
                pass
        return elapsed

    def compaction(base: str, body: bytes) -> float:
        return timed(post(base, body, uuid.uuid4().hex))

    def reapply(base: str) -> float:
        session = uuid.uuid4().hex
        post(base, above, session)()
        return timed(post(base, nxt, session))

    def prepared(base: str) -> float:
        session = uuid.uuid4().hex
        post(base, turn_before, session)()
        time.sleep(ANSWER_S)
        return timed(post(base, at_soft, session))

    outcomes = {
        "turn before": client.post(
            f"{proxy_url}/chat/completions",
            content=turn_before,
            headers={"x-fake-mode": "no-usage", "x-factrail-session": "check"},
        ).headers.get("x-factrail"),
        "soft line": client.post(
            f"{proxy_url}/chat/completions",
            content=at_soft,
            headers={"x-fake-mode": "no-usage", "x-factrail-session": "check"},
        ).headers.get("x-factrail"),
    }
    if outcomes != {"turn before": "passthrough", "soft line": "compacted"}:
        sys.exit(f"the soft-line cases do not straddle the soft line: {outcomes}")
    cases: dict[str, Callable[[str], float]] = {
        "small request": lambda b: timed(post(b, small)),
        "200k tokens below the trigger": lambda b: timed(post(b, below)),
        "first compaction of 200k tokens": lambda b: compaction(b, above),
        "first compaction of 300k tokens": lambda b: compaction(b, far_above),
        "next turn (re-application)": reapply,
        "compaction at the soft line, cold": lambda b: compaction(b, at_soft),
        "compaction at the soft line, turn before prepared": prepared,
        "stream: time to first chunk": first_chunk,
    }
    cheap = {"small request", "stream: time to first chunk"}
    reps = {c: args.reps * (CHEAP_FACTOR if c in cheap else 1) for c in cases}
    for name, case in cases.items():
        for _ in range(WARMUP if name in cheap else 1):
            case(direct)
            case(proxy_url)
    rounds: dict[str, list[tuple[float, float]]] = {c: [] for c in cases}
    for _ in range(args.rounds):
        for name, case in cases.items():
            d: list[float] = []
            p: list[float] = []
            for _ in range(reps[name]):
                d.append(case(direct))
                p.append(case(proxy_url))
            rounds[name].append((statistics.median(d), statistics.median(p)))
    stop(proxy)
    stop(fake)
    print(
        f"rounds={args.rounds} reps={args.reps} (small cases x{CHEAP_FACTOR}); "
        f"200k case: {estimated(big)} estimated tokens, {len(above) // 1024} KiB; "
        f"300k case: {estimated(bigger)}, {len(far_above) // 1024} KiB\n"
    )
    print("| case | reps/round | direct ms | through factrail ms | added ms | added, per round |")
    print("|---|---:|---:|---:|---:|---|")
    for name, pairs in rounds.items():
        d_ms = statistics.median(d for d, _ in pairs) * 1000
        p_ms = statistics.median(p for _, p in pairs) * 1000
        added = [(p - d) * 1000 for d, p in pairs]
        spread = f"{min(added):+.2f} .. {max(added):+.2f}"
        print(
            f"| {name} | {reps[name]} | {d_ms:.2f} | {p_ms:.2f} | "
            f"{statistics.median(added):+.2f} | {spread} |"
        )


if __name__ == "__main__":
    main()
