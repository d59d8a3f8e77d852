"""Re-run notes, stub layout and reduction at a tier (engine spec §2.2–§2.4, §2.6)."""

from __future__ import annotations

import pytest

from factrail.core.analysis import Analysis
from factrail.core.marks import (
    full_output_phrase,
    is_compacted,
    saved_output_phrase,
    swap_full_output_note,
)
from factrail.core.rails import FACT_HEAD_CHARS, TIERS, evicted, facts_only, rerun_note, stub_layout
from factrail.core.render import DEFAULT_SELECTION, Renderer, Selection, Slot
from factrail.core.tokens import estimate_tokens


def reduce_result(
    text: str,
    *,
    tool_use_id: str,
    is_error: bool,
    rerunnable: bool,
    tier: int,
    selection: Selection = DEFAULT_SELECTION,
) -> str:
    """`text` reduced at `tier` by the renderer the engine reduces every result with."""
    renderer = Renderer(FACT_HEAD_CHARS, selection, Analysis())
    slot = Slot(tool_use_id, 0, text, estimate_tokens(text), is_error, rerunnable, final=False)
    return renderer.render(slot, tier).text


def test_rerun_note_golden() -> None:
    assert rerun_note("x" * 160, "u1") == "x" * 160
    assert rerun_note("x" * 500, "u1") == (
        "[factrail omitted 500 chars: reproducible, re-run the call to see it; "
        "full output under `u1` in this transcript]"
    )


def _log(n: int) -> str:
    lines = [f"step {i:03d} ok" for i in range(n)]
    lines[40] = "error: connection refused on port 5432"
    return "\n".join(lines)


@pytest.mark.parametrize("selection", [DEFAULT_SELECTION, Selection(value=False)])
def test_stub_layout_golden(selection: Selection) -> None:
    """The stub's lines chosen by token value or by regex alone."""
    text = "HEAD line one\nHEAD line two\n" + _log(600) + "\nTAIL done"
    out = reduce_result(
        text, tool_use_id="u7", is_error=False, rerunnable=False, tier=3, selection=selection
    )
    head, rest = out.split("\n[factrail omitted ", 1)
    assert text.startswith(head) and 100 < len(head) <= 200 and not head.endswith("\n")
    mark, rest = rest.split("\n", 1)
    stub = stub_layout(text, False, TIERS[3], 200)
    assert stub is not None
    assert mark == (
        f"{stub.tail_start - stub.head_end} chars of this output, kept 1 fact line; "
        "full output under `u7` in this transcript]"
    )
    facts, tail = rest.split("\n…\n", 1)
    assert facts == "error: connection refused on port 5432"
    assert text.endswith(tail) and tail.endswith("TAIL done") and len(tail) <= 120
    assert is_compacted(out)


def test_error_keeps_a_long_head_and_says_so() -> None:
    text = _log(800)
    out = reduce_result(text, tool_use_id="u2", is_error=True, rerunnable=False, tier=3)
    assert out.index("\n[factrail omitted ") > 1000
    assert " of this output (error); " in out


def test_small_and_dense_results_stay_whole() -> None:
    small = _log(100)
    assert reduce_result(small, tool_use_id="u", is_error=False, rerunnable=False,
                         tier=1) == small  # fmt: skip
    dense = "\n".join(f"pid {4000 + i}" for i in range(1500))
    assert stub_layout(dense, False, TIERS[1], 200) is None
    assert stub_layout(dense, False, TIERS[2], 200) is not None


def test_reads_become_notes_by_tier() -> None:
    text = "line of code\n" * 200

    def read(text: str, tier: int) -> str:
        return reduce_result(text, tool_use_id="u3", is_error=False, rerunnable=True, tier=tier)

    assert read(text[:2900], 0) == text[:2900]
    assert read(text, 1).startswith("[factrail omitted 2600 ")


def test_reduction_never_lengthens() -> None:
    # A stub whose head and tail are most of the text would not be shorter: keep the original.
    text = "a" * 200 + "\n" + "b" * 10 + "\n" + "c" * 120
    for tier in range(len(TIERS)):
        out = reduce_result(text, tool_use_id="u" * 300, is_error=False, rerunnable=False,
                            tier=tier)  # fmt: skip
        assert out == text
    assert facts_only("short", "u9") == "short"
    assert evicted("short", "u9") == "short"


def test_is_compacted_is_strict() -> None:
    # §9.2: text that merely contains the prefix mid-line is not a reduced result.
    assert not is_compacted("grep hit: [factrail omitted 12 chars of this output; full output x]")
    assert not is_compacted("[factrail omitted many chars]")
    assert is_compacted("[jev-compaction truncated 300 chars]")
    assert is_compacted("x\n[fast-jev-compaction truncated 3 chars]")
    note = rerun_note("y" * 400, "u1")
    assert is_compacted(f"head\n{note}\ntail")


def test_swap_full_output_note() -> None:
    note = rerun_note("y" * 400, "u1")
    saved = swap_full_output_note(note, "u1", saved_output_phrase("c0ffee/u1", "/v1/r/"))
    assert saved.endswith("full output saved at /v1/r/c0ffee/u1 (`factrail outputs get` prints"
                          " it); read it for anything not kept here]")  # fmt: skip
    assert saved.count("c0ffee/u1") == 1  # every reduced result carries it: the id once
    assert is_compacted(saved)
    local = swap_full_output_note(note, "u1", saved_output_phrase("c0ffee/u1"))
    assert local.endswith("full output saved, `factrail outputs get c0ffee/u1` prints it;"
                          " read it for anything not kept here]")  # fmt: skip
    assert is_compacted(local)
    assert full_output_phrase("u1") not in saved
    # `u1` is not a prefix match of `u12`.
    assert swap_full_output_note(rerun_note("y" * 400, "u12"), "u1", "X") == rerun_note(
        "y" * 400, "u12"
    )
