"""Requests served while factrail is busy with another session (both real loopback processes).

Two cases, each timing requests of one session while another session's work runs:
- during a compaction: a fresh session sends a 200k-token transcript far past its trigger (the
  compaction runs in a worker thread) while a second client sends small requests;
- after a new session's answer: a fresh session's turn below the trigger (but past half of it)
  is answered, its results are then analysed in the background, and a below-trigger turn of
  another session is timed right away.
Prints medians, the 90th percentile and the maximum:
    .venv/bin/python bench/concurrency.py [--rounds 6]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.proxy import transcript  # noqa: E402
from tests.integration.processes import start_factrail, start_fake, stop  # noqa: E402

SMALL = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})


def spread(name: str, ms: list[float]) -> str:
    ranked = sorted(ms)
    p90 = ranked[min(len(ranked) - 1, int(len(ranked) * 0.9))]
    return f"| {name} | {len(ms)} | {statistics.median(ms):.2f} | {p90:.1f} | {max(ms):.1f} |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="factrail-bench-"))
    root, fake = start_fake("tests.integration.fake_upstream:app")
    url, proxy = start_factrail(
        f"{root}/v1",
        home,
        FACTRAIL_TRIGGER_TOKENS="500000",
        FACTRAIL_REARM_TOKENS="0",
        FACTRAIL_READ_TIMEOUT_S="60",
    )
    big = transcript(200_000)
    above = orjson.dumps({"model": "gpt-4o", "messages": big})  # 3.9x past gpt-4o's trigger
    below = orjson.dumps({"model": "gpt-4.1", "messages": big})  # past half its trigger
    clients = httpx.Client(timeout=120), httpx.Client(timeout=120)

    def post(client: httpx.Client, body: bytes, session: str | None = None) -> float:
        headers = {"x-fake-mode": "no-usage"}
        if session:
            headers["x-factrail-session"] = session
        start = time.perf_counter()
        client.post(f"{url}/chat/completions", content=body, headers=headers)
        return (time.perf_counter() - start) * 1000

    def fresh() -> str:
        return uuid.uuid4().hex

    def compact_into(out: list[float]) -> None:
        out.append(post(clients[0], above, fresh()))

    for _ in range(3):  # warm up both paths
        post(clients[0], above, fresh())
        post(clients[1], SMALL)
        post(clients[1], below, "fixed")
    compactions: list[float] = []
    during: list[float] = []
    quiet: list[float] = []
    after_new: list[float] = []
    for _ in range(args.rounds):
        quiet += [post(clients[1], SMALL) for _ in range(20)]
        done: list[float] = []
        worker = threading.Thread(target=compact_into, args=(done,))
        worker.start()
        time.sleep(0.02)
        while worker.is_alive():
            during.append(post(clients[1], SMALL))
        worker.join()
        compactions += done
        time.sleep(0.5)
        post(clients[0], below, fresh())  # answered; its preparation starts now
        after_new.append(post(clients[1], below, "fixed"))
        time.sleep(1.0)
    stop(proxy)
    stop(fake)
    print(f"rounds={args.rounds}; first compaction while serving: "
          f"median {statistics.median(compactions):.0f} ms\n")  # fmt: skip
    print("| requests | n | median ms | p90 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    print(spread("small, nothing else running", quiet))
    print(spread("small, during another session's compaction", during))
    print(spread("below the trigger, right after a new session's answer", after_new))


if __name__ == "__main__":
    main()
