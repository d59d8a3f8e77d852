"""Byte-stable between compactions: a turn that does not compact forwards the previous forwarded
request, extended, byte for byte (result texts, briefed arguments, everything factrail changed).

Each session is replayed as an agent sends it, one request per assistant turn, through the
gateway's own step at triggers small enough to compact it several times (past the hard line
too, where old arguments are briefed).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from factrail.core.formats import openai_chat
from factrail.core.model import Message, transcript_tokens
from factrail.eval.synthetic import corpus
from factrail.judges.rules import RulesJudge
from factrail.session import SessionCompactor
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.outputs import OutputStore
from tests.options import engine_options

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "dev"
REAL = (
    "gemini_cli__metaphi-agent__figma-eval-6d91b0b6",
    "codex__mesayanroy__Valdyum-Labs",
    "claude_code__SublyFi__privacy-x402",
    "sweagent_v1__lgetter__trajs_pylint-dev__pylint-4970",
)


def _wire(messages: Any) -> list[dict[str, Any]]:
    return [m for m in messages if isinstance(m, dict)]


def chat_wire(messages: list[Message]) -> list[dict[str, Any]]:
    """Engine messages as an OpenAI chat message list (results as `tool` messages)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.tool_results:
            if m.text:
                out.append({"role": m.role, "content": m.text})
            for r in m.tool_results:
                out.append({"role": "tool", "tool_call_id": r.tool_use_id, "content": r.text})
            continue
        wire: dict[str, Any] = {"role": m.role, "content": m.text}
        if m.tool_uses:
            wire["tool_calls"] = [
                {
                    "id": u.tool_use_id,
                    "type": "function",
                    "function": {"name": u.tool, "arguments": json.dumps(u.input)},
                }
                for u in m.tool_uses
            ]
        out.append(wire)
    return out


def replay(wire: list[dict[str, Any]], share: float, outputs: Path) -> tuple[int, int]:
    """Replay `wire` turn by turn at a trigger of `share` of the whole session; assert the
    byte-stability property; return (compactions, turns that did not compact)."""
    trigger = max(1, int(share * transcript_tokens(openai_chat.parse(wire).messages)))
    compactor = SessionCompactor(
        engine_options(trigger_tokens=trigger, trigger_percent=0.0, rearm_tokens=0),
        state=MemoryStateStore(),
        outputs=OutputStore(outputs),
        judge=RulesJudge(),
    )
    previous: list[str] | None = None
    compactions = steady = 0
    try:
        for i, m in enumerate(wire):
            if m.get("role") != "assistant" or i < 2:
                continue
            request = wire[:i]
            result = asyncio.run(compactor.compact("s", openai_chat.parse(request)))
            sent = request if result.document is None else result.document
            dumped = [json.dumps(x, sort_keys=True) for x in sent]
            if result.outcome == "compacted":
                compactions += 1
            elif previous is not None:
                steady += 1
                assert dumped[: len(previous)] == previous, f"turn {i}: the prefix broke"
            previous = dumped
    finally:
        compactor.close()
    return compactions, steady


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("share", [0.25, 0.5])
def test_synthetic_sessions_are_byte_stable_between_compactions(
    seed: int, share: float, tmp_path: Path
) -> None:
    _, messages = corpus(seed, 1)[0]
    compactions, steady = replay(chat_wire(list(messages)), share, tmp_path)
    assert compactions >= 1 and steady > compactions


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the dev corpus is not beside this checkout")
@pytest.mark.parametrize("prefix", REAL)
@pytest.mark.parametrize("share", [0.25, 0.5])
def test_real_sessions_are_byte_stable_between_compactions(
    prefix: str, share: float, tmp_path: Path
) -> None:
    path = next(CORPUS.glob(prefix + "*.json"))
    raw = json.loads(path.read_text(encoding="utf-8"))
    wire = _wire(raw if isinstance(raw, list) else raw["messages"])
    compactions, steady = replay(wire, share, tmp_path)
    assert compactions >= 1 and steady > 0
