"""What the real-client bills share (`test_claude_code_bill.py`, `test_codex_bill.py` and their
benches): one scripted session, priced from the endpoint's usage records, run direct and through
a `factrail serve`, side by side.
"""

from __future__ import annotations

import re
import secrets
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from factrail.policy.cost import ANTHROPIC, Prices
from tests.integration.scripted_anthropic import write_project

PROMPT = "Find the release signing key fingerprint in this project's notes and report it."
"""What the user asks the client, in every scripted session."""


def script_project(
    endpoint: str, work: Path, steps: int, script: Mapping[str, Any] | None = None
) -> tuple[Path, str]:
    """Write the project a session of `steps` tool calls reads under `work`, with a fresh fact
    planted, and script the endpoint (root URL) for it (`script`: added to its script): the
    project's folder and the fact's token."""
    project = work / "project"
    project.mkdir(parents=True)
    token = fact_token()
    write_project(project, steps, token)
    configured = {"root": str(project), "steps": steps, "fact_token": token, **(script or {})}
    httpx.post(f"{endpoint}/_configure", json=configured, timeout=10).raise_for_status()
    return project, token


def endpoint_records(endpoint: str) -> list[dict[str, Any]]:
    """The scripted endpoint's records of the requests it got since it was scripted."""
    records: list[dict[str, Any]] = httpx.get(f"{endpoint}/_records", timeout=10).json()
    return records


ADMIN_KEY = secrets.token_urlsafe(32)
"""The admin key of every bill's gateway (its sessions route wants it), made at run time."""


def gateway_env(profile: str, trigger: int, **env: str) -> dict[str, str]:
    """What a bill's `factrail serve` runs with, besides its upstreams: the price profile, the
    trigger, the default re-arm gap, a read timeout no scripted answer comes near, and the
    admin key."""
    return {
        "FACTRAIL_ADMIN_KEY": ADMIN_KEY,
        "FACTRAIL_PRICE_PROFILE": profile,
        "FACTRAIL_TRIGGER_TOKENS": str(trigger),
        "FACTRAIL_REARM_TOKENS": "0",
        "FACTRAIL_READ_TIMEOUT_S": "60",
        **env,
    }


def fact_token() -> str:
    """A fresh 12-hex-digit token with a letter and a digit (a hex id to factrail's rules)."""
    while True:
        token = secrets.token_hex(6)
        if re.search(r"[a-f]", token) and re.search(r"\d", token):
            return token


@dataclass
class Session:
    """One client run: its exit code, its result and the endpoint's records of it."""

    returncode: int
    result: dict[str, Any]
    records: list[dict[str, Any]]
    token: str
    stderr: str = ""
    prices: Prices = field(default=ANTHROPIC)

    @property
    def billed(self) -> float:
        """Input token-units: uncached × 1, cache writes × `write`, cache reads × `cached`."""
        return float(
            sum(
                r.get("input_tokens", 0)
                + r.get("cache_creation", 0) * self.prices.write
                + r.get("cache_read", 0) * self.prices.cached
                for r in self.records
            )
        )

    def total(self, key: str) -> int:
        return sum(int(r.get(key, 0)) for r in self.records)

    @property
    def rejected(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("status") != 200]

    @property
    def main(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("kind") == "main"]

    @property
    def fact(self) -> str:
        """`yes` when the last answer quoted the planted fact, `reread` when the agent re-ran
        the read a note pointed at to find it, `NO` when it did not."""
        answered = bool(self.main) and self.main[-1].get("answered_fact") == self.token
        reread = any(r.get("recovering") for r in self.main)
        return ("reread" if reread else "yes") if answered else "NO"

    @property
    def cache_read_share(self) -> float:
        read = self.total("cache_read")
        whole = read + self.total("cache_creation") + self.total("input_tokens")
        return read / whole if whole else 0.0


def completed(session: Session, steps: int, requests: int | None = None) -> None:
    """A scripted Responses session finished: the client exited cleanly, every request was
    valid (each call answered, each output in its shape), one request per tool call and the
    answer (or `requests`), and the fact planted in the first output reached the answer
    without a re-read."""
    assert session.returncode == 0, session.stderr
    assert session.rejected == [], session.rejected
    assert len(session.main) == (steps + 1 if requests is None else requests)
    last = session.main[-1]
    assert last["fact_kept"] is True
    assert last["answered_fact"] == session.token
    assert session.token in session.result["result"]


def run_client(
    argv: list[str], cwd: Path, env: Mapping[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """Run a client to its end in `cwd`, with no input and its output captured as text."""
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def finished(
    done: subprocess.CompletedProcess[str], answer: str, endpoint: str, token: str, prices: Prices
) -> Session:
    """The session of a client run that printed or wrote `answer`, with the endpoint's records
    of it, priced at `prices`."""
    result = {"is_error": done.returncode != 0, "result": answer}
    records = endpoint_records(endpoint)
    return Session(done.returncode, result, records, token, done.stderr[-2000:], prices)


Runner = Callable[[str, int, Path, Mapping[str, Any] | None], Session]
"""Runs one scripted session of a client: (the URL the client is pointed at, tool calls, a
work folder, additions to the endpoint's script)."""


@dataclass
class Pairs:
    """Sessions of one client run direct and through one gateway, each pair side by side."""

    direct_url: str
    """What the client is pointed at to reach the endpoint directly."""
    gateway_url: str
    """What the client is pointed at to go through factrail."""
    route: str
    """factrail's `route` label for the client's requests."""
    run: Runner
    work: Path
    runs: int = 0

    @property
    def gateway_root(self) -> str:
        return self.gateway_url.removesuffix("/v1")

    def through(
        self, steps: int, work: Path, script: Mapping[str, Any] | None = None
    ) -> tuple[Session, dict[str, float]]:
        """The session through factrail (in `work`), and what factrail's counters on the
        client's route and its compactions grew by meanwhile."""
        before = counters(self.gateway_root, self.route)
        session = self.run(self.gateway_url, steps, work, script)
        after = counters(self.gateway_root, self.route)
        return session, {k: v - before.get(k, 0.0) for k, v in after.items()}

    def pair(
        self, steps: int, script: Mapping[str, Any] | None = None
    ) -> tuple[Session, Session, dict[str, float]]:
        """The session direct, then through factrail, and factrail's counters for the latter
        (`script`: added to the endpoint's script)."""
        self.runs += 1
        direct = self.run(self.direct_url, steps, self.work / f"{self.runs}-a", script)
        through, delta = self.through(steps, self.work / f"{self.runs}-b", script)
        told = through.billed / (through.billed + delta.get("ledger_spared", 0.0))
        print(f"\n{steps} tool calls: direct {direct.billed:,.0f}, through {through.billed:,.0f} "
              f"(x{through.billed / direct.billed:.3f}; factrail's bill says x{told:.3f}), "
              f"factrail {delta}")  # fmt: skip
        bill_agrees(through.billed / direct.billed, told)
        return direct, through, delta

    def same_below_the_trigger(self, steps: int) -> None:
        """A session below the trigger: every request passes through untouched and the session
        bills exactly what it bills direct."""
        direct, through, factrail = self.pair(steps)
        completed(direct, steps)
        completed(through, steps)
        assert factrail.get("compactions", 0) == 0
        assert factrail.get("passthrough", 0) == steps + 1
        assert through.billed == direct.billed

    def cheaper_when_long(self, steps: int) -> tuple[Session, Session, dict[str, float]]:
        """A session past the trigger more than twice: compacted at least twice, billed under
        0.9 of direct, and between compactions every request extends the one before it (the
        cache reads on). Returns the pair and factrail's counters."""
        direct, through, factrail = self.pair(steps)
        completed(direct, steps)
        completed(through, steps)
        assert factrail["compacted"] >= 2 and factrail["compactions"] >= 2
        assert through.billed < 0.9 * direct.billed
        changed = [r for r in through.main if r.get("first_diff") is not None]
        assert len(changed) == factrail["compacted"]
        return direct, through, factrail


LEDGER_OPTIMISM = 0.02
"""factrail's own bill of a session may put it at most this much under the measured ratio to
direct (it counts a compaction's re-writes against itself, so it errs the other way)."""
LEDGER_CAUTION = 0.08
"""… and at most this much over it."""


def bill_agrees(measured: float, told: float) -> None:
    """What factrail's own bill of a session says it cost against direct (`told`: billed over
    billed plus spared, from its sessions route) is close to the ratio measured by running the
    session both ways, and never much kinder."""
    assert measured - LEDGER_OPTIMISM <= told <= measured + LEDGER_CAUTION, (measured, told)


def counters(gateway: str, route: str = "messages") -> dict[str, float]:
    """factrail's request outcomes on `route` (`/v1/messages`) and its compactions, from
    `/metrics`."""
    text = httpx.get(f"{gateway}/metrics", timeout=10).text
    out: dict[str, float] = {}
    for m in re.finditer(r"^(factrail_\w+)\{([^}]*)\} (\S+)$", text, re.MULTILINE):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m[2]))
        if m[1] == "factrail_requests_total" and labels.get("route") == route:
            key = labels["outcome"]
        elif m[1] == "factrail_compactions_total":
            key = "compactions"
        else:
            continue
        out[key] = out.get(key, 0.0) + float(m[3])
    return {**out, **ledger(gateway)}


def ledger(gateway: str) -> dict[str, float]:
    """The bills factrail keeps of its recent sessions, summed (its sessions route): what it
    says they were billed, from the provider's usage, and what they spared against being sent
    whole (its estimate; a run's growth in these is what factrail says of that run)."""
    admin = {"authorization": f"Bearer {ADMIN_KEY}"}
    sessions = httpx.get(f"{gateway}/v1/factrail/sessions", headers=admin, timeout=10).json()[
        "sessions"
    ]
    bills = [s["bill"] for s in sessions if s["bill"] is not None]
    return {
        "ledger_billed": sum(b["billed"] for b in bills),
        "ledger_spared": sum(b["spared"] for b in bills),
    }
