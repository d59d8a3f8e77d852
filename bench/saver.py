"""The saver process on and off, side by side: two factrail servers on loopback (one with
`FACTRAIL_SAVE_PROCESS=on`, one with `off`) in front of one fake upstream, and alternating
first compactions of a fresh session (the 200k-token transcript of `bench/proxy.py`):

    .venv/bin/python bench/saver.py [--pairs 30] [--tokens 200000]

Prints the median added ms of each (against the fake upstream called directly in the same
loop), their p90, and the median of the paired differences.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from proxy import transcript  # noqa: E402

from tests.integration.processes import start_factrail, start_fake, stop  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=200_000)
    args = parser.parse_args()
    root, fake = start_fake("tests.integration.fake_upstream:app")
    servers = {
        mode: start_factrail(
            f"{root}/v1",
            Path(tempfile.mkdtemp(prefix=f"factrail-saver-{mode}-")),
            FACTRAIL_TRIGGER_TOKENS="500000",
            FACTRAIL_REARM_TOKENS="0",
            FACTRAIL_READ_TIMEOUT_S="60",
            FACTRAIL_SAVE_PROCESS=mode,
        )
        for mode in ("on", "off")
    }
    body = orjson.dumps({"model": "gpt-4o", "messages": transcript(args.tokens)})
    client = httpx.Client(timeout=120)

    def post(base: str) -> float:
        headers = {"x-factrail-session": uuid.uuid4().hex, "x-fake-mode": "no-usage"}
        start = time.perf_counter()
        r = client.post(f"{base}/chat/completions", content=body, headers=headers)
        r.raise_for_status()
        return (time.perf_counter() - start) * 1000

    time.sleep(2)  # the saver child starts beside the server
    for url, _ in servers.values():
        post(url)
        post(url)
    times: dict[str, list[float]] = {"on": [], "off": [], "direct": []}
    for i in range(args.pairs):
        times["direct"].append(post(f"{root}/v1"))
        for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):
            times[mode].append(post(servers[mode][0]))
    for _, proc in servers.values():
        stop(proc)
    stop(fake)
    direct = statistics.median(times["direct"])
    for mode in ("on", "off"):
        ms = sorted(times[mode])
        added = statistics.median(ms) - direct
        p90 = ms[int(0.9 * (len(ms) - 1))] - direct
        print(f"saver {mode}: added median {added:+.1f} ms, p90 {p90:+.1f} ms")
    paired = statistics.median(a - b for a, b in zip(times["on"], times["off"], strict=True))
    print(f"paired on - off, median: {paired:+.1f} ms ({args.pairs} pairs)")


if __name__ == "__main__":
    main()
