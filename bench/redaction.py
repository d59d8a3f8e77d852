"""Redaction over a corpus of real sessions: what it finds, how often, and how fast.

Usage: `.venv/bin/python bench/redaction.py [--corpus ../shared/corpus/dev] [--runs 3]
[--sample 40] [--seed 0] [--out /tmp/factrail-redaction-sample.md] [--glob PATTERN]`

Runs `redact` over every message text, tool-call argument string and tool result of every
`*.json` session (`{"messages": [...]}` or a bare message list) in the corpus folder, and prints
the families seen, redactions per MB per family, the total MB and the time per MB (median of
`--runs`). It writes `--sample` redactions drawn at random (seeded) to `--out`, each with the 40
chars of redacted text either side of its marker and the matched text masked to its shape (`a`
for a lower-case letter, `A` upper, `9` digit, punctuation kept, and its length), so the sample
can be reviewed by hand without the file holding any secret. Exits 0 when the folder is absent.
`--glob` reads plain files instead (each file one text), for a second look at false positives:
`--glob '.venv/lib/python3*/site-packages/**/*.py'` is 70-odd MB of code that names tokens and
passwords everywhere and holds almost none.

`--against REV` compares the speed with `factrail/core/redact` as it was at git revision `REV`,
loaded beside it in the same process: text by text, alternating, the least of `--runs` passes
of each, summed (a shared machine's load moves both alike), and the ratio.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from factrail.core.redact import FAMILY_LABELS, redact

DEFAULT_CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "dev"
CONTEXT = 40
_MARKER = re.compile(r"\[REDACTED:([a-z0-9-]+)\]")


def _texts(value: Any) -> Iterator[str]:
    """Every string inside a message's content (str, or text parts) and its tool calls."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in ("content", "text", "arguments", "output", "input", "tool_calls", "function"):
                yield from _texts(item)


def corpus_texts(folder: Path) -> list[tuple[str, str]]:
    """(file stem, text) for every non-empty text of every session in `folder`."""
    out: list[tuple[str, str]] = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        messages = data.get("messages", []) if isinstance(data, dict) else data
        for message in messages:
            out.extend((path.stem, t) for t in _texts(message) if t)
    return out


def shape(secret: str) -> str:
    """`secret` with every letter and digit replaced by its class, and its length."""
    masked = re.sub(r"[a-z]", "a", re.sub(r"[A-Z]", "A", re.sub(r"[0-9]", "9", secret)))
    masked = re.sub(r"[^\x20-\x7e]", "?", masked)
    if len(masked) > 60:
        masked = masked[:28] + "…" + masked[-28:]
    return f"«{masked}» ({len(secret)} chars)"


def originals(text: str, redacted: str) -> list[tuple[str, int, int, int]]:
    """(label, start, end, marker start) of each marker of `redacted`: its span in `text`,
    found by walking the unchanged pieces between markers (a marker whose end cannot be placed
    ends the walk), and where the marker sits in `redacted`."""
    spans: list[tuple[str, int, int, int]] = []
    markers = [m.start() for m in _MARKER.finditer(redacted)]
    pieces = _MARKER.split(redacted)  # literal, label, literal, label, ..., literal
    pos = len(pieces[0])
    for i in range(1, len(pieces), 2):
        label, after = pieces[i], pieces[i + 1]
        if not after:
            end = len(text)
        else:
            end = text.find(after[:80], pos + 1)
            if end < 0:
                return spans
        spans.append((label, pos, end, markers[i // 2]))
        pos = end + len(after)
    return spans


def glob_texts(pattern: str) -> list[tuple[str, str]]:
    """(path, text) of every UTF-8 file matching `pattern` (recursive `**` allowed)."""
    out: list[tuple[str, str]] = []
    for path in sorted(Path().glob(pattern)):
        try:
            out.append((str(path), path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    return out


def run(
    folder: Path, texts: list[tuple[str, str]], runs: int, sample: int, seed: int, out: Path
) -> None:
    megabytes = sum(len(t.encode()) for _, t in texts) / 1e6
    times = []
    results = []
    for _ in range(runs):
        start = time.perf_counter()
        results = [redact(t) for _, t in texts]
        times.append(time.perf_counter() - start)
    families: Counter[str] = Counter()
    hits: list[tuple[str, str, str, str, int, int, int]] = []
    for (stem, text), r in zip(texts, results, strict=True):
        families.update(r.families)
        if r.count:
            hits.extend(
                (stem, text, r.text, label, s, e, at) for label, s, e, at in originals(text, r.text)
            )
    seconds = statistics.median(times)
    print(f"corpus: {folder} ({len(texts)} texts, {megabytes:.2f} MB)")
    print(f"time: {seconds * 1000:.1f} ms total, {seconds * 1000 / megabytes:.2f} ms/MB")
    print(f"families checked ({len(FAMILY_LABELS)}): {', '.join(FAMILY_LABELS)}")
    total = sum(families.values())
    print(f"redactions: {total} ({total / megabytes:.2f} per MB)")
    for label, n in families.most_common():
        print(f"  {label:24} {n:5}  {n / megabytes:7.2f} per MB")
    rng = random.Random(seed)
    chosen = rng.sample(hits, min(sample, len(hits)))
    lines = [
        f"# Redaction sample: {len(chosen)} of {len(hits)} redactions in {folder.name}",
        "",
        "Each: file, label, the matched text masked to its shape, and ±40 chars of the redacted",
        "text around the marker.",
        "",
    ]
    for n, (stem, text, redacted, label, s, e, at) in enumerate(chosen, 1):
        end = at + len(f"[REDACTED:{label}]")
        before, after = redacted[max(0, at - CONTEXT) : at], redacted[end : end + CONTEXT]
        context = f"{before}⟦{label}⟧{after}".replace("\n", "⏎")
        lines += [f"{n}. `{stem}` **{label}** {shape(text[s:e])}", f"   `{context}`", ""]
    out.write_text("\n".join(lines), encoding="utf-8")
    print(f"sample: {len(chosen)} redactions written to {out}")


ROOT = Path(__file__).resolve().parents[1]
_AT_REV = "redact_at_rev"


def redact_at(rev: str) -> Callable[[str], Any]:
    """`redact` as it was at git revision `rev`, loaded as a package of its own."""
    package = Path(tempfile.mkdtemp(prefix="factrail-redact-")) / _AT_REV
    package.mkdir()
    git = ["git", "-C", str(ROOT)]
    listed = subprocess.run(
        [*git, "ls-tree", "--name-only", rev, "factrail/core/redact/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for path in (p for p in listed if p.endswith(".py")):
        source = subprocess.run(
            [*git, "show", f"{rev}:{path}"], capture_output=True, text=True, check=True
        ).stdout
        source = source.replace("factrail.core.redact.", f"{_AT_REV}.")
        source = source.replace("from factrail.core.redact import", f"from {_AT_REV} import")
        (package / Path(path).name).write_text(source, encoding="utf-8")
    sys.path.insert(0, str(package.parent))
    module = importlib.import_module(_AT_REV)
    return module.redact  # type: ignore[no-any-return]


def compare(texts: list[tuple[str, str]], rev: str, runs: int) -> None:
    """Time `redact` now against `redact` at `rev`, text by text, alternating."""
    before = redact_at(rev)
    megabytes = sum(len(t.encode()) for _, t in texts) / 1e6
    totals = [0.0, 0.0]
    clock = time.perf_counter
    for _, text in texts:
        least = [float("inf"), float("inf")]
        for _ in range(runs):
            for i, fn in enumerate((before, redact)):
                start = clock()
                fn(text)
                least[i] = min(least[i], clock() - start)
        totals[0] += least[0]
        totals[1] += least[1]
    then, now = (t * 1000 / megabytes for t in totals)
    print(f"speed against {rev}: {then:.1f} → {now:.1f} ms/MB, ratio {now / then:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/factrail-redaction-sample.md"))
    parser.add_argument("--glob", help="plain files to read instead of a corpus of sessions")
    parser.add_argument("--against", metavar="REV", help="compare the speed with git REV")
    args = parser.parse_args(argv)
    if args.glob:
        texts = glob_texts(args.glob)
        folder = Path(args.glob)
    elif not args.corpus.is_dir():
        print(f"no corpus at {args.corpus}: nothing to measure", file=sys.stderr)
        return 0
    else:
        folder = args.corpus.resolve()
        texts = corpus_texts(folder)
    if args.against:
        compare(texts, args.against, args.runs)
        return 0
    run(folder, texts, args.runs, args.sample, args.seed, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
