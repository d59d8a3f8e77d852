"""Every real development transcript round-trips losslessly through the OpenAI chat adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factrail.core.formats import openai_chat, parse_any

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "dev"
FILES = sorted(CORPUS.glob("*.json")) if CORPUS.is_dir() else []

pytestmark = [
    pytest.mark.corpus,
    pytest.mark.skipif(not FILES, reason="shared corpus is absent"),
]


@pytest.mark.parametrize("path", FILES, ids=[p.stem[:40] for p in FILES])
def test_corpus_round_trips(path: Path) -> None:
    raw = path.read_text(encoding="utf-8")
    wire = json.loads(raw)["messages"]
    doc = openai_chat.parse(wire)
    assert json.dumps(doc.emit(doc.messages), ensure_ascii=False) == json.dumps(
        wire, ensure_ascii=False
    )
    new = [m.copy() for m in doc.messages]
    for m in new:
        for r in m.tool_results:
            r.text = r.text[:50]
    again = openai_chat.parse(doc.emit(new))
    assert [[r.text for r in m.tool_results] for m in again.messages] == [
        [r.text for r in m.tool_results] for m in new
    ]
    assert json.loads(raw)["messages"] == wire
    assert parse_any(raw).format == "openai-chat"
