"""Time the rules path of the engine against the cost of parsing and writing the body.

Usage: `.venv/bin/python bench/engine.py [--runs 7] [--sizes 10000,50000,...] [--profile N]
[--selection full|no-pool|regex] [--corpus DIR]`

For each size, a synthetic but realistic transcript (file reads, test logs, curl outputs, grep
hits; seeded, so every run builds the same one) is reduced by `apply` with every unpinned call
`drop_result` and `Reduction(0.3, 0.3)` (the newest 6 messages stay pinned). Beside it, the
floor: `orjson.loads` + `orjson.dumps` of the same transcript as an OpenAI chat body.
Prints a markdown table of medians. `--corpus DIR` times the same rules path on the largest real
sessions of a corpus folder instead (the synthetic transcripts repeat line shapes more than real
tool output does, which the fact-score memo rewards).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import pstats
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from factrail.core.analysis import Analysis
from factrail.core.apply import Applied, Reduction, apply, prepare
from factrail.core.candidate_tokens import toks
from factrail.core.model import Message, ToolResult, ToolUse, transcript_tokens
from factrail.core.plan import rules_actions
from factrail.core.render import Selection
from factrail.core.text import compact_json
from factrail.core.tokens import TokenCache, estimate_tokens
from factrail.eval.corpora import load_corpus_dir

SIZES = (10_000, 50_000, 100_000, 200_000, 400_000)
WORDS = (
    "alpha", "beta", "gamma", "delta", "config", "handler", "request", "session", "cache",
    "worker", "index", "router", "schema", "client", "parser", "store",
)  # fmt: skip


def _path(rng: random.Random) -> str:
    return f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py"


def _code(rng: random.Random) -> str:
    lines = []
    for i in range(rng.randint(20, 300)):
        name = rng.choice(WORDS)
        lines.append(
            rng.choice(
                (
                    f"def {name}_{i}(self, value: int) -> int:",
                    f"    return self.{name} + value * {rng.randint(1, 99)}",
                    f"import {name}.{rng.choice(WORDS)}",
                    f"    # TODO: handle {name} when the {rng.choice(WORDS)} is empty",
                    f'    logger.info("{name} ready on port %d", {rng.randint(1024, 65535)})',
                    "",
                )
            )
        )
    return "\n".join(f"{n + 1:6d}\t{line}" for n, line in enumerate(lines))


def _test_log(rng: random.Random) -> str:
    n = rng.randint(10, 600)
    failed = 0
    lines = [
        "============ test session starts ============ "
        f"platform linux, pid {rng.randint(1000, 99999)}"
    ]
    for i in range(n):
        name = rng.choice(WORDS)
        if rng.random() < 0.03:
            failed += 1
            lines.append(f"tests/test_{name}.py::test_{name}_{i} FAILED")
            lines.append(
                f"E   AssertionError: expected {rng.randint(0, 500)} got {rng.randint(0, 500)}"
            )
            lines.append(f"E   at /srv/app/src/{name}/core.py:{rng.randint(1, 900)}")
        else:
            lines.append(f"tests/test_{name}.py::test_{name}_{i} PASSED [{100 * i // n:3d}%]")
    lines.append(f"===== {n - failed} passed, {failed} failed in {rng.uniform(1, 90):.2f}s =====")
    return "\n".join(lines)


def _build_log(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(10, 250)):
        r = rng.random()
        mod = f"{rng.choice(WORDS)}-{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
        if r < 0.6:
            lines.append(f"  Downloading {mod}.tar.gz ({rng.randint(10, 900)} kB)")
        elif r < 0.9:
            lines.append(
                f"Compiling {rng.choice(WORDS)} v{mod.split('-')[1]} (/work/{rng.choice(WORDS)})"
            )
        else:
            lines.append(
                f"warning: unused variable `{rng.choice(WORDS)}` "
                f"at {_path(rng)}:{rng.randint(1, 400)}"
            )
    lines.append(f"Finished dev [unoptimized] target(s) in {rng.uniform(1, 60):.2f}s")
    return "\n".join(lines)


def _curl(rng: random.Random) -> str:
    items = [
        {
            "id": f"{rng.getrandbits(48):012x}",
            "name": rng.choice(WORDS),
            "status": rng.choice(("ok", "pending", "failed")),
            "updated": f"2025-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T10:{rng.randint(10, 59)}Z",
            "url": f"https://api.example.invalid/v1/items/{rng.randint(1, 99999)}",
        }
        for _ in range(rng.randint(2, 80))
    ]
    head = (
        f"HTTP/1.1 {rng.choice((200, 200, 200, 404, 500))} OK\ncontent-type: application/json\n\n"
    )
    return head + compact_json({"items": items})


def _grep(rng: random.Random) -> str:
    return "\n".join(
        f"{_path(rng)}:{rng.randint(1, 900)}:    {rng.choice(WORDS)} = load_{rng.choice(WORDS)}()"
        for _ in range(rng.randint(3, 150))
    )


def _edit(rng: random.Random) -> str:
    path = _path(rng)
    snippet = "\n".join(
        f"{rng.randint(1, 400):6d}\t    {rng.choice(WORDS)} = "
        f"{rng.choice(WORDS)}({rng.randint(0, 9)})"
        for _ in range(rng.randint(0, 12))
    )
    head = f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet:"
    return f"{head}\n{snippet}"


def _small(rng: random.Random) -> str:
    return rng.choice(
        (
            f"On branch main\nChanges not staged for commit:\n\tmodified:   {_path(rng)}\n",
            "\n".join(_path(rng) for _ in range(rng.randint(2, 20))),
            f"exit code {rng.randint(0, 2)}",
            f"{rng.randint(1, 900)} files changed, {rng.randint(1, 9000)} insertions(+)",
        )
    )


Make = Callable[[random.Random], str]
KINDS: tuple[tuple[float, str, Callable[[random.Random], dict[str, Any]], Make], ...] = (
    (0.22, "Edit", lambda r: {"file_path": _path(r), "old_string": "x", "new_string": "y"}, _edit),
    (0.18, "Bash", lambda r: {"command": "git status"}, _small),
    (0.20, "Read", lambda r: {"file_path": _path(r)}, _code),
    (0.12, "Bash", lambda r: {"command": f"pytest -q tests/test_{r.choice(WORDS)}.py"}, _test_log),
    (0.10, "Grep", lambda r: {"pattern": r.choice(WORDS), "path": "src"}, _grep),
    (
        0.10,
        "Bash",
        lambda r: {"command": f"curl -si https://api.example.invalid/v1/{r.choice(WORDS)}"},
        _curl,
    ),
    (0.08, "Bash", lambda r: {"command": "cargo build"}, _build_log),
)


def transcript(tokens: int, seed: int = 7) -> list[Message]:
    """A deterministic transcript of about `tokens` estimated tokens.

    Result sizes follow a real session's spread (many short edits and commands, some long reads
    and logs); the assistant now and then names an id or path it saw earlier.
    """
    rng = random.Random(seed)
    weights = [k[0] for k in KINDS]
    messages = [Message("user", "Please fix the failing tests and check the items API.")]
    total = estimate_tokens(messages[0].text)
    seen: list[str] = []
    i = 0
    while total < tokens:
        _, tool, make_input, make_output = rng.choices(KINDS, weights)[0]
        use = ToolUse(f"call_{i:05d}", tool, make_input(rng))
        result = ToolResult(use.tool_use_id, make_output(rng))
        said = f"Next I will look at {rng.choice(WORDS)} ({i})."
        if seen and rng.random() < 0.3:
            said += f" The earlier output mentioned {rng.choice(seen)}, so check it."
        seen.extend(sorted(toks(result.text))[:3])
        messages.append(Message("assistant", said, [use]))
        messages.append(Message("user", "", tool_results=[result]))
        total += estimate_tokens(said) + estimate_tokens(compact_json(use.input))
        total += estimate_tokens(result.text)
        i += 1
    messages.append(Message("user", "Good. Now summarise what failed."))
    return messages


def openai_body(messages: list[Message]) -> bytes:
    """The same transcript as an OpenAI chat completions body."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "assistant":
            calls = [
                {
                    "id": u.tool_use_id,
                    "type": "function",
                    "function": {"name": u.tool, "arguments": compact_json(u.input)},
                }
                for u in m.tool_uses
            ]
            out.append({"role": "assistant", "content": m.text, "tool_calls": calls})
        elif m.tool_results:
            out.extend(
                {"role": "tool", "tool_call_id": r.tool_use_id, "content": r.text}
                for r in m.tool_results
            )
        else:
            out.append({"role": "user", "content": m.text})
    return orjson.dumps({"model": "gpt-4o", "messages": out})


SELECTIONS = {
    "full": Selection(),
    "no-pool": Selection(pool=False),
    "regex": Selection(value=False, pool=False),
}
"""`--selection`: the default (learned value, pooled), per-stub value, or regex fact lines only."""


def rules_path(
    messages: list[Message],
    selection: Selection = SELECTIONS["full"],
    memo: Analysis | None = None,
    count: Callable[[str], int] = estimate_tokens,
) -> Applied:
    """The rules path: every unpinned call drop_result, Reduction(0.3, 0.3)."""
    actions = rules_actions(messages, preserve_recent=6)
    reduction = Reduction(0.3, 0.3)
    return apply(
        messages, actions, reduction=reduction, selection=selection, memo=memo, count=count
    )


WARM_NEW_MESSAGES = 4
"""What the compaction turn adds to the turn before it: two calls and their results."""


def warm_ms(messages: list[Message], selection: Selection, runs: int) -> float:
    """Median ms of the rules path when the turn before (the transcript without its newest
    messages) was counted and prepared, as the gateway does on a session's turns below the
    trigger."""
    times = []
    before = messages[:-WARM_NEW_MESSAGES]
    for _ in range(runs):
        memo = Analysis()
        count = TokenCache()
        transcript_tokens(before, count)
        prepare(before, memo, selection=selection)
        start = time.perf_counter()
        rules_path(messages, selection, memo, count)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _roundtrip(body: bytes) -> bytes:
    return orjson.dumps(orjson.loads(body))


def median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--profile", type=int, default=0, help="profile one size, print top 25")
    parser.add_argument("--selection", choices=sorted(SELECTIONS), default="full")
    parser.add_argument("--corpus", type=Path, help="time the largest real sessions of a folder")
    parser.add_argument("--sessions", type=int, default=8, help="with --corpus: how many")
    parser.add_argument(
        "--gc-sessions",
        default="",
        help="e.g. 1,4,8,16: a full garbage collection's ms with that many 200k analyses kept",
    )
    args = parser.parse_args()
    selection = SELECTIONS[args.selection]
    if args.gc_sessions:
        gc_table([int(n) for n in args.gc_sessions.split(",")])
        return
    if args.corpus:
        corpus_table(args.corpus, args.sessions, args.runs, selection)
        return
    if args.profile:
        messages = transcript(args.profile)
        profiler = cProfile.Profile()
        profiler.runcall(rules_path, messages, selection)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        return
    print(
        "| est. tokens | body KiB | results | rules path ms | warm ms | orjson floor ms | ratio "
        "| kept |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in map(int, args.sizes.split(",")):
        messages = transcript(size)
        body = openai_body(messages)
        results = sum(len(m.tool_results) for m in messages)
        engine = median_ms(functools.partial(rules_path, messages, selection), args.runs)
        warm = warm_ms(messages, selection, args.runs)
        floor = median_ms(functools.partial(_roundtrip, body), args.runs)
        got = rules_path(messages, selection)
        print(
            f"| {size:,} | {len(body) // 1024:,} | {results} | {engine:.1f} | {warm:.1f} "
            f"| {floor:.2f} "
            f"| {engine / floor:.0f}× | {got.tokens_after / got.tokens_before:.0%} |"
        )


def gc_table(counts: list[int]) -> None:
    """What the analyses a gateway keeps (one per session) cost the cyclic garbage collector:
    the median ms of a full collection with `n` analyses of the 200k transcript alive."""
    messages = transcript(200_000)
    kept: list[Analysis] = []
    print("| analyses kept | tracked objects | full collection ms |")
    print("|---:|---:|---:|")
    for n in [0, *counts]:
        while len(kept) < n:
            memo = Analysis()
            prepare(messages, memo)
            rules_path(messages, memo=memo)
            kept.append(memo)
        print(f"| {n} | {len(gc.get_objects()):,} | {median_ms(gc.collect, 5):.1f} |")


def corpus_table(folder: Path, sessions: int, runs: int, selection: Selection) -> None:
    """The rules path on the `sessions` largest transcripts of `folder`, and ms per 100k tokens."""
    named = [(n, m, transcript_tokens(m, estimate_tokens)) for n, m in load_corpus_dir(folder)]
    named.sort(key=lambda x: -x[2])
    print("| session | est. tokens | results | rules path ms | ms per 100k tokens | kept |")
    print("|---|---:|---:|---:|---:|---:|")
    rates = []
    for name, messages, tokens in named[:sessions]:
        results = sum(len(m.tool_results) for m in messages)
        ms = median_ms(functools.partial(rules_path, messages, selection), runs)
        got = rules_path(messages, selection)
        rates.append(ms * 100_000 / tokens)
        print(
            f"| {name[:48]} | {tokens:,} | {results} | {ms:.1f} | {rates[-1]:.1f} "
            f"| {got.tokens_after / got.tokens_before:.0%} |"
        )
    print(f"\nmedian ms per 100k tokens: {statistics.median(rates):.1f}")


if __name__ == "__main__":
    main()
