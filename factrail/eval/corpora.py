"""Real corpora for the eval: a folder of transcripts, or a Claude Code projects tree.

`--corpus DIR` reads every `*.json` (OpenAI chat list, `{"messages": [...]}`, Responses
`{"input": [...]}`) and `*.jsonl` (Claude Code) file, named by stem, in name order; a malformed
file is an error. `--claude-projects DIR` samples sessions: `subagents` folders are skipped, the
order is SHA-256(seed as 8 little-endian bytes ‖ path) so the seed only reorders the sample,
short and tainted sessions are skipped, and a session is named `cc-<sha256(path)[:12]>` so no
path or project name ever appears.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from factrail.core.formats.detect import parse_any as detect
from factrail.core.model import Message
from factrail.policy.taint import TaintFence, tool_refs

Parse = Callable[[str, str], Sequence[Message]]
"""A transcript file's text and its file name → messages (malformed input raises ValueError)."""
Named = list[tuple[str, list[Message]]]


def parse_any(text: str, filename: str) -> Sequence[Message]:
    """The shared format detector's engine view of a transcript file."""
    return detect(text, filename=filename).messages


def _read(path: Path, parse: Parse) -> list[Message]:
    return list(parse(path.read_text(encoding="utf-8"), path.name))


def load_corpus_dir(directory: Path, parse: Parse = parse_any) -> Named:
    """Every `*.json` and `*.jsonl` transcript in `directory`, by file name."""
    files = sorted(
        p for p in directory.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl")
    )
    return [(p.stem, _read(p, parse)) for p in files]


def _session_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "subagents")
        found.extend(Path(folder) / n for n in names if n.endswith(".jsonl"))
    return found


def sample_key(seed: int, path: Path) -> bytes:
    """SHA-256(seed as 8 little-endian bytes ‖ path): the sampling order."""
    preimage = (seed & ((1 << 64) - 1)).to_bytes(8, "little") + str(path).encode()
    return hashlib.sha256(preimage).digest()


def session_name(path: Path) -> str:
    """`cc-` and the first 6 bytes of SHA-256(path) in hex."""
    return "cc-" + hashlib.sha256(str(path).encode()).hexdigest()[:12]


def claude_projects(
    root: Path,
    fence: TaintFence,
    *,
    seed: int = 0,
    max_sessions: int = 40,
    min_calls: int = 15,
    parse: Parse = parse_any,
) -> Named:
    """Up to `max_sessions` sessions the fence leaves untainted, with at least `min_calls` tool
    uses."""
    out: Named = []
    for path in sorted(_session_files(root), key=lambda p: sample_key(seed, p)):
        if len(out) >= max_sessions:
            break
        try:
            messages = _read(path, parse)
        except (OSError, ValueError):
            continue
        if (
            sum(len(m.tool_uses) for m in messages) < min_calls
            or fence.scan(tool_refs(messages)).tainted
        ):
            continue
        out.append((session_name(path), messages))
    return out
