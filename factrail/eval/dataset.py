"""`factrail dataset`: Tev-format training records for a local judge, labelled by hindsight.

Every question the plan would ask at a cut becomes one record whose truth is the hindsight label
of its call (`keep_call` for `call_*`, `keep_result` for `result_*`). Teacher records (answers of
a model judge from the decision log) are added only when given. Unlike the reference:

- one transcript name rules the split for both label sources (a teacher record's name is its
  decision-log session key), so no session lands in both train and dev;
- every state and question is redacted before it is written;
- the folder is created 0700 (it must not exist) and every file exclusively 0600;
- teacher states over the state budget are left out (Tev is trained on short states), the teacher
  threshold is a parameter, and record ids hash a language-neutral preimage.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TextIO

from factrail.core import tev
from factrail.core.model import Message
from factrail.core.plan import CompactOptions, PlanError, build_plan
from factrail.core.redact import redact, redact_value
from factrail.core.text import compact_json, round_half_away
from factrail.core.tokens import estimate_tokens
from factrail.eval.facts import facts, hindsight_labels

Split = Literal["train", "dev"]
Kind = Literal["call", "result"]
LabelSource = Literal["hindsight", "teacher"]

CUTS = (0.5, 0.75)
REQUEST_HEADROOM = 400
"""The request budget is the state budget plus this many tokens for the questions."""
TEACHER_THRESHOLD = 0.5
SPLITS: tuple[Split, ...] = ("train", "dev")
RECORD_FILES = {s: f"records/{s}.jsonl" for s in SPLITS}
SFT_FILES = {s: f"sft/{s}.jsonl" for s in SPLITS}
DATA_FILES = (*RECORD_FILES.values(), *SFT_FILES.values())
MANIFEST = "manifest.json"


class DatasetExistsError(FileExistsError):
    """The output folder already exists; a dataset is never written over another."""


@dataclass(frozen=True, slots=True)
class Example:
    """One labelled question, before redaction."""

    transcript: str
    """The canonical transcript name (split key); only its hash is written."""
    cut: int | None
    tool_use_id: str
    kind: Kind
    label: LabelSource
    state: Mapping[str, Any]
    instructions: str
    truth: bool
    probability: float | None = None


@dataclass(frozen=True, slots=True)
class Manifest:
    """What an export wrote: counts per split and truth, per split and label source, and more."""

    counts: dict[str, int]
    labels: dict[str, int]
    files: dict[str, str]
    """Relative path → SHA-256 hex of the file."""
    transcripts: dict[str, int]
    skipped: dict[str, int] = field(default_factory=dict)
    redactions: int = 0

    @property
    def records(self) -> int:
        """How many records were written (over both splits)."""
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, Any]:
        """The manifest as written to `manifest.json`."""
        return {
            "counts": self.counts,
            "labels": self.labels,
            "files": self.files,
            "transcripts": self.transcripts,
            "skipped": self.skipped,
            "redactions": self.redactions,
        }


def split_of(name: str, dev_share: float) -> Split:
    """`dev` iff the first byte of SHA-256(name) is below dev_share × 256."""
    return "dev" if hashlib.sha256(name.encode()).digest()[0] < dev_share * 256 else "train"


def transcript_key(name: str) -> str:
    """The pseudonym written for a transcript: the first 8 bytes of SHA-256(name), in hex."""
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def record_id(example: Example) -> str:
    """First 8 bytes of SHA-256 over `key|cut|tool_use_id|kind|label` (cut `null` when absent)."""
    cut = "null" if example.cut is None else str(example.cut)
    preimage = "|".join(
        (transcript_key(example.transcript), cut, example.tool_use_id, example.kind, example.label)
    )
    return hashlib.sha256(preimage.encode()).hexdigest()[:16]


def cut_indices(length: int, fractions: Sequence[float] = CUTS) -> list[int]:
    """round(length × f) half away from zero, skipping cuts < 2 or ≥ length and repeats."""
    out: list[int] = []
    for f in fractions:
        cut = round_half_away(length * f)
        if 2 <= cut < length and cut not in out:
            out.append(cut)
    return out


def hindsight_examples(
    name: str,
    messages: Sequence[Message],
    max_state_tokens: int,
    base: CompactOptions,
    skipped: Counter[str] | None = None,
) -> Iterator[Example]:
    """One example per question the plan would ask at each cut (under the judge's own plan
    options `base`, with states of at most `max_state_tokens`), labelled by hindsight."""
    options = replace(
        base,
        max_state_tokens=max_state_tokens,
        max_request_tokens=max_state_tokens + REQUEST_HEADROOM,
    )
    found = facts(messages)
    for cut in cut_indices(len(messages)):
        prefix = list(messages[:cut])
        try:
            plan = build_plan(prefix, options, {}, frozenset())
        except PlanError:
            if skipped is not None:
                skipped["hindsight/no-room"] += 1
            continue
        labels = hindsight_labels(messages, cut, found)
        for request in plan.requests:
            by_short = dict(request.calls)
            for question, spec in request.questions.items():
                kind, _, short = question.partition("_")
                tool_use_id = by_short.get(short)
                label = labels.get(tool_use_id) if tool_use_id is not None else None
                if label is None or tool_use_id is None or kind not in ("call", "result"):
                    continue
                yield Example(
                    transcript=name,
                    cut=cut,
                    tool_use_id=tool_use_id,
                    kind="call" if kind == "call" else "result",
                    label="hindsight",
                    state=request.state,
                    instructions=spec["instructions"],
                    truth=label.keep_call if kind == "call" else label.keep_result,
                )


def teacher_examples(
    records: Iterable[Mapping[str, Any]],
    max_state_tokens: int,
    threshold: float = TEACHER_THRESHOLD,
    skipped: Counter[str] | None = None,
) -> Iterator[Example]:
    """One example per answered, mapped question of every decision-log record.

    The transcript name is the record's session key. States over `max_state_tokens` are left out.
    """
    tally: Counter[str] = Counter() if skipped is None else skipped
    for record in records:
        session = record.get("session")
        if not isinstance(session, str) or not session:
            tally["teacher/no-session"] += 1
            continue
        for request in record.get("requests") or []:
            if not isinstance(request, Mapping):
                continue
            state = _state_object(request.get("state"))
            if state is None:
                tally["teacher/bad-state"] += 1
                continue
            if estimate_tokens(compact_json(state)) > max_state_tokens:
                tally["teacher/state-too-long"] += 1
                continue
            yield from _teacher_questions(session, request, state, threshold)


def _teacher_questions(
    session: str, request: Mapping[str, Any], state: Mapping[str, Any], threshold: float
) -> Iterator[Example]:
    calls = {
        str(pair[0]): str(pair[1])
        for pair in request.get("calls") or []
        if isinstance(pair, Sequence) and not isinstance(pair, str) and len(pair) == 2
    }
    answers = request.get("answers") or {}
    for question, spec in (request.get("questions") or {}).items():
        kind, _, short = str(question).partition("_")
        p = answers.get(question)
        instructions = spec.get("instructions") if isinstance(spec, Mapping) else None
        tool_use_id = calls.get(short)
        if (
            kind not in ("call", "result")
            or tool_use_id is None
            or not isinstance(instructions, str)
            or isinstance(p, bool)
            or not isinstance(p, int | float)
            or not math.isfinite(p)
        ):
            continue
        yield Example(
            transcript=session,
            cut=None,
            tool_use_id=tool_use_id,
            kind="call" if kind == "call" else "result",
            label="teacher",
            state=state,
            instructions=instructions,
            truth=p >= threshold,
            probability=float(p),
        )


def _state_object(state: Any) -> Mapping[str, Any] | None:
    """A recorded state as an object (a state logged as a JSON string is parsed); else None."""
    if isinstance(state, str):
        try:
            state = json.loads(state)
        except ValueError:
            return None
    return state if isinstance(state, Mapping) else None


def export_dataset(
    transcripts: Iterable[tuple[str, Sequence[Message]]],
    out_dir: Path,
    *,
    options: CompactOptions,
    dev_share: float = 0.1,
    max_state_tokens: int = 1500,
    teacher_records: Iterable[Mapping[str, Any]] | None = None,
    teacher_threshold: float = TEACHER_THRESHOLD,
) -> Manifest:
    """Write `records/{train,dev}.jsonl`, `sft/{train,dev}.jsonl` and `manifest.json`; the
    questions are those the judge's plan (`options`) would ask.

    `out_dir` must not exist (DatasetExistsError); it is created 0700 and every file exclusively
    0600. Transcript names must be the canonical session keys when teacher records are given, so
    that both label sources split a session the same way.
    """
    for folder in (out_dir, out_dir / "records", out_dir / "sft"):
        _make_private_dir(folder)
    skipped: Counter[str] = Counter()

    def examples() -> Iterator[Example]:
        for name, messages in transcripts:
            yield from hindsight_examples(name, messages, max_state_tokens, options, skipped)
        if teacher_records is not None:
            yield from teacher_examples(
                teacher_records, max_state_tokens, teacher_threshold, skipped
            )

    writer = _Writer(out_dir)
    try:
        for example in examples():
            writer.write(example, split_of(example.transcript, dev_share))
    finally:
        writer.close()
    manifest = Manifest(
        counts={f"{s}/{t}": writer.counts[f"{s}/{t}"] for s in SPLITS for t in ("true", "false")},
        labels={
            f"{s}/{label}": writer.labels[f"{s}/{label}"]
            for s in SPLITS
            for label in ("hindsight", "teacher")
        },
        files={rel: _sha256(out_dir / rel) for rel in DATA_FILES},
        transcripts={s: len(writer.transcripts[s]) for s in SPLITS},
        skipped=dict(sorted(skipped.items())),
        redactions=writer.redactions,
    )
    _write_private(out_dir / MANIFEST, json.dumps(manifest.as_dict(), indent=2) + "\n")
    return manifest


class _Writer:
    """The four jsonl files, open for the whole export, and what went into them."""

    def __init__(self, out_dir: Path) -> None:
        self.files: dict[str, TextIO] = {}
        for rel in DATA_FILES:
            self.files[rel] = _open_private(out_dir / rel)
        self.counts: Counter[str] = Counter()
        self.labels: Counter[str] = Counter()
        self.transcripts: dict[Split, set[str]] = {s: set() for s in SPLITS}
        self.redactions = 0

    def write(self, example: Example, split: Split) -> None:
        state, state_counts = redact_value(example.state)
        instructions = redact(example.instructions)
        self.redactions += state_counts.count + instructions.count
        answer = "A" if example.truth else "B"
        key = transcript_key(example.transcript)
        record = {
            "id": record_id(example),
            "state": compact_json(state),
            "question": instructions.text + tev.QUESTION_SUFFIX,
            "options": tev.OPTIONS,
            "answer": answer,
            "answer_key": "true" if example.truth else "false",
            "source": {
                "transcript": key,
                "cut": example.cut,
                "tool_use_id": example.tool_use_id,
                "kind": example.kind,
                "label": example.label,
                "probability": example.probability,
            },
        }
        sft = {
            "messages": [
                {"role": "system", "content": tev.SYSTEM},
                {"role": "user", "content": tev.render_decision(state, instructions.text)},
                {"role": "assistant", "content": answer},
            ]
        }
        self.files[RECORD_FILES[split]].write(compact_json(record) + "\n")
        self.files[SFT_FILES[split]].write(compact_json(sft) + "\n")
        self.counts[f"{split}/{record['answer_key']}"] += 1
        self.labels[f"{split}/{example.label}"] += 1
        self.transcripts[split].add(key)

    def close(self) -> None:
        for f in self.files.values():
            f.close()


def _make_private_dir(path: Path) -> None:
    """Create `path` as 0700; refuse when anything already exists there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        raise DatasetExistsError(f"{path} exists; refusing to overwrite a dataset") from None
    os.chmod(path, 0o700)


def _open_private(path: Path) -> TextIO:
    """Create `path` exclusively with mode 0600 and open it for writing text."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "w", encoding="utf-8")


def _write_private(path: Path, text: str) -> None:
    with _open_private(path) as f:
        f.write(text)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
