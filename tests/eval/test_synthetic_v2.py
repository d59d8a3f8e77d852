"""The harder v2 generator: stable, and its facts sit where the fact patterns do not look."""

from __future__ import annotations

import hashlib
from dataclasses import asdict

from factrail.core.facts import fact_score
from factrail.core.model import Message
from factrail.core.text import compact_json
from factrail.eval.facts import facts
from factrail.eval.synthetic import SplitMix64
from factrail.eval.synthetic_v2 import KINDS, corpus, session, step_v2

PINNED = {
    0: "868edb0cde51da892f8c8a29db75013c61d4f074286d8c62bde8e982e31ef998",
    1: "7249cae8be1156fb8a461588fc3130dbb5400363c03e9ca25b1acf8d1691431a",
}


def test_byte_stable() -> None:
    for name, messages in corpus(0, 2):
        seed = int(name.rsplit("-", 1)[1])
        blob = compact_json([asdict(m) for m in messages]).encode()
        assert hashlib.sha256(blob).hexdigest() == PINNED[seed]


def test_every_kind_plants_its_token_in_the_output() -> None:
    rng = SplitMix64(3)
    seen: set[str] = set()
    for _ in range(200):
        step, planted = step_v2(rng)
        for p in planted:
            assert p.token in p.line and p.line in step.output
            assert any(c.isdigit() for c in p.token) and len(p.token) >= 6
        seen.add(step.tool)
    assert {"Bash", "PowerShell", "Read", "Grep"} <= seen
    assert len(KINDS) == 9


def outputs(messages: list[Message]) -> list[str]:
    return [r.text for m in messages for r in m.tool_results]


def test_hard_shapes_are_present() -> None:
    messages = [m for _, ms in corpus(0, 3) for m in ms]
    texts = outputs(messages)
    assert any(max(len(line) for line in t.split("\n")) > 2000 for t in texts)
    assert any("C:\\build\\out\\pkg-" in t for t in texts)
    assert any("Traceback (most recent call last):" in t for t in texts)
    assert any(any(ord(c) > 0x3000 for c in t) for t in texts)
    edits = [u for m in messages for u in m.tool_uses if u.tool == "Edit"]
    assert edits and all("BUILD_ID" in u.input["old_string"] for u in edits)


def test_facts_include_lines_no_pattern_scores() -> None:
    messages = session(0, 50)
    found = facts(messages)
    assert len(found) >= 10
    lines = [line for text in outputs(messages) for line in text.split("\n")]
    fact_lines = [next(line for line in lines if f.token in line) for f in found]
    assert any(fact_score(line) == 0 for line in fact_lines)
