"""The fake upstream direct vs through factrail (both real loopback processes).

Interleaved rounds, median of per-round medians, printed as a markdown table:
    .venv/bin/python bench/proxy.py [--rounds 5] [--reps 5]
"""

from __future__ import annotations

import argparse
import os
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

from tests.integration.processes import free_port, start, start_factrail, stop  # noqa: E402


def transcript(tokens: int) -> list[dict[str, Any]]:
    """An agent transcript of about `tokens` estimated tokens (tool-heavy)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing build."},
    ]
    i = 0
    while len(orjson.dumps(messages)) < tokens * 4:
        call = f"call_{i}"
        fn = {"name": "bash", "arguments": orjson.dumps({"cmd": f"pytest -k t{i}"}).decode()}
        tool_calls = [{"id": call, "type": "function", "function": fn}]
        messages.append({"role": "assistant", "content": f"Step {i}.", "tool_calls": tool_calls})
        lines = [f"tests/test_{i}.py::case_{j} PASSED in 0.{j:02d}s" for j in range(120)]
        lines[60] = f"ERROR test_{i}: expected 4{i} got 5{i} at src/mod_{i}.py:{i + 10}"
        messages.append({"role": "tool", "tool_call_id": call, "content": "\n".join(lines)})
        i += 1
    messages.append({"role": "user", "content": "Continue."})
    return messages


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
    port = free_port()
    fake = start(
        [sys.executable, "-m", "uvicorn", "tests.integration.fake_upstream:app", "--host",
         "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        dict(os.environ), f"http://127.0.0.1:{port}/v1/models",
    )  # fmt: skip
    direct = f"http://127.0.0.1:{port}/v1"
    proxy_url, proxy = start_factrail(
        direct, home, FACTRAIL_TRIGGER_TOKENS="500000", FACTRAIL_READ_TIMEOUT_S="60"
    )
    big = transcript(200_000)
    small = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    below = orjson.dumps({"model": "gpt-4.1", "messages": big})
    above = orjson.dumps({"model": "gpt-4o", "messages": big})
    more = [*big, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    nxt = orjson.dumps({"model": "gpt-4o", "messages": more})
    stream = orjson.dumps({"model": "gpt-4o", "stream": True,
                           "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
    client = httpx.Client(timeout=120)

    def post(base: str, body: bytes, session: str | None = None) -> Callable[[], object]:
        headers = {"x-factrail-session": session} if session else {}
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

    cases: dict[str, Callable[[str], float]] = {
        "small request": lambda b: timed(post(b, small)),
        "200k tokens below the trigger": lambda b: timed(post(b, below)),
        "first compaction of 200k tokens": lambda b: compaction(b, above),
        "next turn (re-application)": reapply,
        "stream: time to first chunk": first_chunk,
    }
    results: dict[str, dict[str, list[float]]] = {c: {"d": [], "p": []} for c in cases}
    for _ in range(args.rounds):
        for name, case in cases.items():
            for key, base in (("d", direct), ("p", proxy_url)):
                results[name][key].append(statistics.median(case(base) for _ in range(args.reps)))
    stop(proxy)
    stop(fake)
    print(f"rounds={args.rounds} reps={args.reps}; body of 200k case: {len(above) // 1024} KiB\n")
    print("| case | direct ms | through factrail ms | added ms |")
    print("|---|---:|---:|---:|")
    for name, r in results.items():
        d, p = statistics.median(r["d"]) * 1000, statistics.median(r["p"]) * 1000
        print(f"| {name} | {d:.2f} | {p:.2f} | {p - d:+.2f} |")


if __name__ == "__main__":
    main()
