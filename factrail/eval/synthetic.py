"""The reference synthetic corpus: deterministic agent sessions from a splitmix64 generator.

Each session mixes long reproducible reads, observations with fact lines buried in filler, failing
tests, pod tables, logs and deploys; the agent later quotes some facts in its text or passes them
to a call, so hindsight finds them. Every draw happens in the reference order and no float is
used, so a seed gives the same corpus byte for byte on every platform (reference §3.5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from factrail.core.model import Message, ToolResult, ToolUse

T = TypeVar("T")
_MASK = (1 << 64) - 1


class SplitMix64:
    """splitmix64: 64-bit state, wrapping arithmetic, identical everywhere."""

    def __init__(self, seed: int) -> None:
        self.state = seed & _MASK

    def next(self) -> int:
        """The next 64 random bits."""
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """Uniform-ish in `0..n` (modulo, as the reference)."""
        return self.next() % n

    def pick(self, items: Sequence[T]) -> T:
        """One of `items`."""
        return items[self.below(len(items))]

    def hex(self, n: int) -> str:
        """`n` lowercase hex digits."""
        return "".join(format(self.below(16), "x") for _ in range(n))


WORDS = (
    "the", "service", "returned", "request", "handler", "module", "cache", "config", "value",
    "worker", "queue", "check", "update", "process", "stream", "buffer", "index", "record",
    "schema", "build", "target", "output",
)  # fmt: skip
SERVICES = ("api", "ingest", "billing", "search", "auth", "render", "relay", "scheduler")
FILES = (
    "src/main.rs", "src/lib.rs", "src/handlers/upload.rs", "src/store/cache.rs",
    "client/src/app.tsx", "config/settings.toml", "scripts/deploy.sh", "tests/integration.rs",
)  # fmt: skip


@dataclass(slots=True)
class Step:
    """One generated tool call: its tool, input, output and the facts buried in the output."""

    tool: str
    input: dict[str, Any]
    output: str
    is_error: bool = False
    facts: list[str] = field(default_factory=list)


def filler(rng: SplitMix64, lines: int) -> list[str]:
    """`lines` lines of 6–13 common words."""
    out: list[str] = []
    for _ in range(lines):
        n = 6 + rng.below(8)
        out.append(" ".join(rng.pick(WORDS) for _ in range(n)))
    return out


def code(rng: SplitMix64, lines: int) -> str:
    """Rust-looking source: a function header, a let, a comment, `Ok(())`, `}` in turn."""
    out: list[str] = []
    for i in range(lines):
        kind = i % 5
        if kind == 0:
            a, b = rng.pick(WORDS), rng.pick(WORDS)
            out.append(f"fn {a}_{b}(input: &str) -> Result<(), Error> {{")
        elif kind == 1:
            a, b, c = rng.pick(WORDS), rng.pick(WORDS), rng.pick(WORDS)
            out.append(f"    let {a} = {b}.{c}(input)?;")
        elif kind == 2:
            out.append("    // " + filler(rng, 1)[0])
        elif kind == 3:
            out.append("    Ok(())")
        else:
            out.append("}")
    return "\n".join(out)


def bury(rng: SplitMix64, body: list[str], facts: Sequence[str]) -> str:
    """Insert each fact line at a random position of `body`, then join the lines."""
    for fact in facts:
        body.insert(rng.below(len(body) + 1), fact)
    return "\n".join(body)


def _read(rng: SplitMix64) -> Step:
    file = rng.pick(FILES)
    lines = 120 + rng.below(220)
    return Step("Read", {"file_path": f"/repo/{file}"}, code(rng, lines))


def _curl(rng: SplitMix64, svc: str) -> Step:
    rid = "req-" + rng.hex(10)
    pid = 10_000 + rng.below(80_000)
    port = rng.below(1000)
    facts = [
        f"HTTP/1.1 503 Service Unavailable request_id={rid}",
        f"upstream {svc} pid {pid} refused connection on port 8{port:03d}",
    ]
    body = filler(rng, 150 + rng.below(250))
    command = f"curl -sv http://{svc}.internal/health"
    return Step("Bash", {"command": command}, bury(rng, body, facts), facts=facts)


def _cargo_test(rng: SplitMix64, svc: str) -> Step:
    failed = 1 + rng.below(4)
    commit = rng.hex(9)
    case = rng.below(90)
    line, col = 10 + rng.below(400), 1 + rng.below(80)
    passed = 80 + rng.below(200)
    facts = [
        f"test {svc}::tests::round_trip_{case} ... FAILED",
        f"error[E0308]: mismatched types at src/{svc}/mod.rs:{line}:{col}",
        f"test result: FAILED. {passed} passed; {failed} failed; built at commit {commit}",
    ]
    body = filler(rng, 200 + rng.below(200))
    output = bury(rng, body, facts)
    return Step("Bash", {"command": f"cargo test -p {svc}"}, output, is_error=True, facts=facts)


def _kubectl(rng: SplitMix64, svc: str) -> Step:
    rows: list[str] = []
    for i in range(60 + rng.below(140)):
        pod = rng.hex(5)
        restarts, node = rng.below(9), rng.below(40)
        a, b = rng.below(255), rng.below(255)
        rows.append(f"{svc}-{pod}-{i:03d}  Running  restarts={restarts}  node-{node}  10.0.{a}.{b}")
    command = f"kubectl get pods -l app={svc} -o wide"
    return Step("Bash", {"command": command}, "\n".join(rows), facts=[rows[0].split()[0]])


def _log_tail(rng: SplitMix64, svc: str) -> Step:
    trace = "trace_id=" + rng.hex(16)
    facts = [f"ERROR {svc} worker panicked: index out of bounds {trace}"]
    body = filler(rng, 300 + rng.below(300))
    command = f"tail -n 400 /var/log/{svc}/server.log"
    return Step("Bash", {"command": command}, bury(rng, body, facts), facts=facts)


def _grep(rng: SplitMix64) -> Step:
    hits: list[str] = []
    for i in range(20 + rng.below(80)):
        file = rng.pick(FILES)
        hits.append(f"/repo/{file}:{1 + i * 7}: {filler(rng, 1)[0]}")
    return Step("Grep", {"pattern": rng.pick(WORDS)}, "\n".join(hits))


def _deploy(rng: SplitMix64, svc: str) -> Step:
    major, minor, patch = 1 + rng.below(4), rng.below(20), rng.below(30)
    digest = "sha256:" + rng.hex(24)
    facts = [f"pushed image registry.local/{svc}:{major}.{minor}.{patch} digest {digest}"]
    body = filler(rng, 40 + rng.below(80))
    command = f"./scripts/deploy.sh {svc}"
    return Step("Bash", {"command": command}, bury(rng, body, facts), facts=facts)


def step(rng: SplitMix64) -> Step:
    """One tool call of a random kind (service drawn first, then the kind)."""
    svc = rng.pick(SERVICES)
    kind = rng.below(7)
    if kind == 0:
        return _read(rng)
    if kind == 1:
        return _curl(rng, svc)
    if kind == 2:
        return _cargo_test(rng, svc)
    if kind == 3:
        return _kubectl(rng, svc)
    if kind == 4:
        return _log_tail(rng, svc)
    if kind == 5:
        return _grep(rng)
    return _deploy(rng, svc)


def fact_token(fact: str) -> str:
    """The word the agent quotes: the first with a digit and ≥ 6 UTF-8 bytes, else the fact."""
    for word in fact.split():
        if any("0" <= c <= "9" for c in word) and len(word.encode()) >= 6:
            return word
    return fact


def session_from(
    rng: SplitMix64, seed: int, calls: int, make_step: Callable[[SplitMix64], Step] = step
) -> list[Message]:
    """A session of `calls` steps drawn by `make_step(rng)` (shared with the v2 generator)."""
    svc = rng.pick(SERVICES)
    prompt = f"The {svc} service is failing in staging. Find out why and fix it."
    messages = [Message("user", prompt)]
    learnt: list[str] = []
    for n in range(calls):
        s = make_step(rng)
        text = ""
        if learnt and rng.below(3) == 0:
            token = fact_token(learnt[rng.below(len(learnt))])
            if rng.below(2) == 0:
                text = f"Following up on {token} from earlier."
            else:
                s.input["description"] = f"check {token}"
        tool_use_id = f"toolu_{seed:04x}_{n:03d}"
        use = ToolUse(tool_use_id, s.tool, s.input, s.output, s.is_error)
        messages.append(Message("assistant", text, tool_uses=[use]))
        result = ToolResult(tool_use_id, s.output, s.is_error)
        messages.append(Message("user", tool_results=[result]))
        learnt.extend(s.facts)
        if n % 9 == 8:
            messages.append(Message("user", f"Keep going; prioritise the {svc} failures."))
    messages.append(Message("assistant", "Summary of the investigation so far."))
    return messages


def session(seed: int, calls: int) -> list[Message]:
    """One reference session of `calls` tool calls."""
    return session_from(SplitMix64(seed), seed, calls)


def calls_for(seed: int) -> int:
    """30–59 calls, from the first draw of splitmix(seed ^ 0x5eed)."""
    return 30 + SplitMix64(seed ^ 0x5EED).below(30)


def corpus(seed: int, n: int) -> list[tuple[str, list[Message]]]:
    """`n` sessions named `synthetic-<s>`, seeded `seed, seed + 1, …` (wrapping at 2⁶⁴)."""
    out: list[tuple[str, list[Message]]] = []
    for k in range(n):
        s = (seed + k) & _MASK
        out.append((f"synthetic-{s}", session(s, calls_for(s))))
    return out
