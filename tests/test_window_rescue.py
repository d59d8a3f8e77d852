"""A request that would not fit the model's window: the rails cut even the results the agent
still works with (largest first, to head, fact lines and tail), save them whole, and the next
turns re-apply the cut byte for byte. Without a known window, or for a result kept verbatim,
nothing recent is touched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from factrail.core.apply import Reduction, apply
from factrail.core.formats import openai_chat
from factrail.core.model import Message, ToolResult, ToolUse, collect_tool_calls
from factrail.core.pressure import pressure
from factrail.judges.rules import RulesJudge
from factrail.session import SessionCompactor
from factrail.session.inspect import render, report
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.outputs import OutputStore
from tests.options import engine_options
from tests.test_session import OUTPUTS_SECRET, chat

WINDOW = 40_000
TRIGGER = 20_000
DANGER = TRIGGER + (WINDOW - TRIGGER) // 2


def flood(chars: int, tag: str = "git") -> str:
    """An output far larger than the window: `git add` hints, with one error line mid-way."""
    lines = [f"hint: {tag} object {i:06d} added to the index (mode 100644)" for i in range(9000)]
    lines[4500] = "error: unable to index file 'node_modules/.cache/lock': Permission denied"
    return "\n".join(lines)[:chars]


def with_flood(tool: str = "run_shell_command", chars: int = 400_000) -> list[dict[str, Any]]:
    wire = chat(6, size=2000)
    wire.append(
        {
            "role": "assistant",
            "content": "Staging everything.",
            "tool_calls": [
                {
                    "id": "call_flood",
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps({"command": "git add ."})},
                }
            ],
        }
    )
    wire.append({"role": "tool", "tool_call_id": "call_flood", "content": flood(chars)})
    return wire


def make(tmp_path: Path, windows: dict[str, int]) -> SessionCompactor:
    options = engine_options(
        trigger_tokens=TRIGGER,
        trigger_percent=0.0,
        rearm_tokens=0,
        price_profile="none",
        context_windows=windows,
    )
    return SessionCompactor(
        options,
        state=MemoryStateStore(),
        outputs=OutputStore(tmp_path / "outputs", secret=OUTPUTS_SECRET),
        judge=RulesJudge(),
    )


def content(doc: Any, tool_call_id: str) -> str:
    return next(m["content"] for m in doc if m.get("tool_call_id") == tool_call_id)


async def test_a_recent_result_that_overflows_the_window_is_cut_and_saved(tmp_path: Path) -> None:
    wire = with_flood()
    c = make(tmp_path, {"test-model": WINDOW})
    result = await c.compact("s", openai_chat.parse(wire), model="test-model")
    assert result.outcome == "compacted"
    assert result.tokens_before > WINDOW
    assert result.tokens_after <= DANGER
    assert result.rescued == 1
    out = result.document
    assert isinstance(out, list)
    cut = content(out, "call_flood")
    original = content(wire, "call_flood")
    assert cut.startswith(original[:150])  # the head, then the mark line
    assert "Permission denied" in cut  # the error line is a fact line worth its tokens
    assert cut.endswith(original[-60:])  # the tail
    assert c.writer is not None
    oid = f"{c.writer.outputs.capability('s')}/call_flood"
    assert f"/v1/factrail/outputs/{oid}" in cut
    saved = tmp_path / "outputs" / c.writer.outputs.capability("s") / "call_flood.txt"
    assert saved.read_text(encoding="utf-8") == original
    # Nothing the user or the agent wrote changed.
    assert [m.get("content") for m in out if m["role"] != "tool"] == [
        m.get("content") for m in wire if m["role"] != "tool"
    ]

    # `factrail inspect` says why a recent result was cut.
    state = c.state.load("s")
    assert state is not None
    shown = render(report("s", state))
    assert f"past 0.9 of the model's window ({WINDOW:,} tokens): 1 recent result(s)" in shown
    assert " *call_flood" in shown

    # The next turn extends what was sent, byte for byte (the cut is in the plan).
    nxt = [
        *wire,
        {"role": "assistant", "content": "The index is locked."},
        {"role": "user", "content": "fix it"},
    ]
    again = await c.compact("s", openai_chat.parse(nxt), model="test-model")
    assert again.outcome == "reapplied"
    assert again.document[: len(out)] == out


async def test_without_a_known_window_recent_results_stay_whole(tmp_path: Path) -> None:
    wire = with_flood()
    c = make(tmp_path, {})
    result = await c.compact("s", openai_chat.parse(wire), model="unknown-model")
    doc = result.document if result.document is not None else wire
    assert content(doc, "call_flood") == content(wire, "call_flood")


async def test_a_result_kept_verbatim_is_never_cut(tmp_path: Path) -> None:
    wire = with_flood(tool="Skill", chars=200_000)
    c = make(tmp_path, {"test-model": WINDOW})
    result = await c.compact("s", openai_chat.parse(wire), model="test-model")
    doc = result.document if result.document is not None else wire
    assert content(doc, "call_flood") == content(wire, "call_flood")


def _messages(sizes: dict[str, int]) -> list[Message]:
    msgs = [Message(role="user", text="go")]
    for rid, n in sizes.items():
        msgs.append(
            Message(role="assistant", text="", tool_uses=[ToolUse(rid, "Bash", {"command": "ls"})])
        )
        msgs.append(Message(role="user", text="", tool_results=[ToolResult(rid, flood(n, rid))]))
    return msgs


def test_the_rescue_cuts_the_largest_first_and_stops_once_it_fits() -> None:
    msgs = _messages({"small": 3_000, "medium": 40_000, "huge": 300_000})
    actions = {c.tool_use_id: "keep" for c in collect_tool_calls(msgs, preserve_recent=6)}
    plain = apply(msgs, actions, reduction=Reduction(0.3, 0.0))
    assert plain.changed == {}  # every result kept: the rails alone touch none of them
    before = plain.tokens_before
    fit = 1 - 0.6  # the window holds 60 % of the transcript
    got = apply(msgs, actions, reduction=Reduction(0.3, 0.0, fit=fit, rescue=fit))
    assert set(got.changed) == {"huge"}
    assert got.tokens_after <= before * (1 - fit)
    assert got.tier == 4


def test_no_rescue_below_the_fit_line() -> None:
    msgs = _messages({"medium": 40_000})
    actions = {"medium": "keep"}
    assert apply(msgs, actions, reduction=Reduction(0.3, 0.0, fit=0.0, rescue=0.5)).changed == {}


@pytest.mark.parametrize(
    ("fit", "rescue_to", "shares"),
    [
        (90_000, 80_000, (0.1, 0.2)),
        (90_000, None, (0.1, 0.1)),
        (120_000, 80_000, (0.0, 0.2)),  # below the fit line: no rescue asked
        (None, 80_000, (0.0, 0.0)),  # window unknown
    ],
)
def test_pressure_fit_and_rescue_shares(
    fit: float | None, rescue_to: float | None, shares: tuple[float, float]
) -> None:
    r = pressure(100_000, 100_000, aim=70_000, hard=85_000, fit=fit, rescue_to=rescue_to)
    assert (r.fit, r.rescue) == pytest.approx(shares)


async def test_past_the_fit_line_it_compacts_even_when_the_trigger_is_near_the_window(
    tmp_path: Path,
) -> None:
    # T at 95 % of the window: the danger line (39k) is past the fit line (36k); a request
    # between them would not pay back its cache break, but leaves no room for the answer.
    wire = with_flood(chars=113_000)
    options = engine_options(
        trigger_tokens=38_000,
        trigger_percent=0.0,
        rearm_tokens=0,
        price_profile="anthropic",
        context_windows={"test-model": WINDOW},
    )
    c = SessionCompactor(
        options,
        state=MemoryStateStore(),
        outputs=OutputStore(tmp_path / "outputs", secret=OUTPUTS_SECRET),
        judge=RulesJudge(),
    )
    result = await c.compact("s", openai_chat.parse(wire), model="test-model")
    assert 0.9 * WINDOW < result.tokens_before < 39_000
    assert result.outcome == "compacted"
    assert result.tokens_after <= 0.9 * WINDOW


async def test_a_window_the_client_asked_for_wins_over_the_table(tmp_path: Path) -> None:
    wire = with_flood()
    c = make(tmp_path, {"test-model": WINDOW})
    result = await c.compact("s", openai_chat.parse(wire), model="test-model", window=1_000_000)
    doc = result.document if result.document is not None else wire
    assert content(doc, "call_flood") == content(wire, "call_flood")
    assert result.trigger_tokens == TRIGGER  # min(absolute, percent × window): percent is off
