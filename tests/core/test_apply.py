"""apply(): escalation, last resort, briefing, finality, idempotence (engine spec §3.5–§3.6)."""

from __future__ import annotations

import heapq
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factrail.core import apply as apply_module
from factrail.core import render as render_module
from factrail.core.analysis import Analysis
from factrail.core.apply import Reduction, apply, brief_value
from factrail.core.facts import fact_tokens
from factrail.core.marks import (
    full_output_phrase,
    is_compacted,
    saved_output_phrase,
    swap_full_output_note,
)
from factrail.core.model import Action, Message, ToolResult, ToolUse
from factrail.core.render import Selection
from factrail.core.text import compact_json
from factrail.core.tokens import estimate_tokens


def _log(n: int, tag: str) -> str:
    lines = [f"[{tag}] step {i} ok in {i % 97} ms" for i in range(n)]
    lines[n // 2] = f"[{tag}] error: upstream refused connection to 10.0.0.{n % 250}:8443"
    return "\n".join(lines)


def _transcript(n_calls: int = 6, size: int = 400) -> list[Message]:
    messages = [Message("user", "please fix the deploy")]
    for i in range(n_calls):
        cid = f"c{i}"
        if i % 3 == 2:
            use = ToolUse(cid, "Read", {"file_path": f"src/mod_{i}.py"})
            out = "\n".join(f"def f{j}(x):\n    return x * {j}" for j in range(size // 4))
        else:
            use = ToolUse(cid, "Bash", {"command": f"pytest -k case{i}"})
            out = _log(size, f"run{i}")
        messages.append(Message("assistant", f"running call {i}", [use]))
        messages.append(Message("user", "", tool_results=[ToolResult(cid, out)]))
    messages.append(Message("assistant", "done"))
    return messages


def _rules(messages: list[Message]) -> dict[str, Action]:
    return {u.tool_use_id: "drop_result" for m in messages for u in m.tool_uses}


def _size(messages: list[Message]) -> int:
    return sum(
        estimate_tokens(m.text)
        + sum(estimate_tokens(compact_json(u.input)) for u in m.tool_uses)
        + sum(estimate_tokens(r.text) for r in m.tool_results)
        for m in messages
    )


def test_rules_path_reduces_and_reports_tokens() -> None:
    messages = _transcript()
    got = apply(messages, _rules(messages), reduction=Reduction(0.3, 0.0))
    assert got.tokens_after <= got.tokens_before * 0.7 < got.tokens_before == _size(messages)
    assert got.tokens_after == _size(got.messages)
    got = apply(messages, _rules(messages), reduction=Reduction(0.9, 0.0))
    assert len(got.messages) == len(messages)
    assert got.touched == [bool(m.tool_results) for m in messages]
    assert set(got.changed) == {f"c{i}" for i in range(6)}
    assert all(is_compacted(t) for t in got.changed.values())
    # The input is never mutated.
    assert messages == _transcript()


def test_sizes_count_the_note_each_reduced_result_carries_once_saved() -> None:
    """`phrase`: what a note names once the original is saved, longer than the placeholder. The
    sizes count it, so what the rails report is what is sent; and a result is reduced only when
    it is shorter with it."""
    messages = _transcript(size=24)  # 167-char reads: a re-run note is shorter, until saved

    def saved(tool_use_id: str) -> str:
        return saved_output_phrase(f"{'c0ffee' * 5}ab/{tool_use_id}", "/v1/factrail/outputs/")

    plain = apply(messages, _rules(messages), reduction=Reduction(0.9, 0.0))
    got = apply(messages, _rules(messages), reduction=Reduction(0.9, 0.0), phrase=saved)
    sent = [m.copy() for m in got.messages]
    for m in sent:
        for r in m.tool_results:
            r.text = swap_full_output_note(r.text, r.tool_use_id, saved(r.tool_use_id))
    assert got.changed
    assert abs(got.tokens_after - _size(sent)) <= 2 * len(got.changed)
    assert plain.tokens_after < _size(sent)  # without the phrase the rails would under-count
    originals = {r.tool_use_id: r.text for m in messages for r in m.tool_results}
    for tool_use_id, text in got.changed.items():
        final = swap_full_output_note(text, tool_use_id, saved(tool_use_id))
        assert len(final) < len(originals[tool_use_id])
    # A result whose note would be no shorter once it names the saved copy stays whole.
    short = [i for i, t in plain.changed.items() if len(t) + len(saved(i)) - len(
        full_output_phrase(i)) >= len(originals[i])]  # fmt: skip
    assert short and not set(short) & set(got.changed)


def test_stricter_target_gives_higher_tier_and_fewer_tokens() -> None:
    messages = _transcript()
    loose = apply(messages, _rules(messages), reduction=Reduction(0.05, 0.0))
    strict = apply(messages, _rules(messages), reduction=Reduction(0.95, 0.0))
    assert strict.tier > loose.tier
    assert strict.tokens_after < loose.tokens_after
    assert strict.tier <= 3


def test_hard_line_evicts_the_oldest_first() -> None:
    messages = _transcript()
    got = apply(messages, _rules(messages), reduction=Reduction(0.97, 0.97))
    assert got.tier == 4
    shrink = {}
    for m, new in zip(messages, got.messages, strict=True):
        for r, n in zip(m.tool_results, new.tool_results, strict=True):
            shrink[r.tool_use_id] = len(n.text) / len(r.text)
    assert shrink["c0"] == min(shrink.values())
    assert shrink["c0"] < shrink["c5"]


def test_applying_twice_is_idempotent_on_results() -> None:
    messages = _transcript()
    first = apply(messages, _rules(messages), reduction=Reduction(0.9, 0.9))
    assert len(first.changed) == 6
    again = apply(
        first.messages, _rules(messages), reduction=Reduction(0.9, 0.0), final=set(first.changed)
    )
    assert again.changed == {} and again.briefed == {}
    assert again.messages == first.messages


def test_final_results_are_kept_even_if_their_text_is_not_marked() -> None:
    messages = _transcript()
    got = apply(messages, _rules(messages), reduction=Reduction(0.9, 0.0), final={"c0"})
    assert "c0" not in got.changed and "c1" in got.changed


def test_keep_is_never_touched_even_past_the_hard_line() -> None:
    messages = _transcript()
    actions = _rules(messages)
    actions["c0"] = "keep"
    got = apply(messages, actions, reduction=Reduction(0.99, 0.99))
    assert "c0" not in got.changed and got.tier == 4


def test_drop_call_briefs_a_long_command() -> None:
    command = "x" * 505
    messages = [
        Message("user", "go"),
        Message("assistant", "", [ToolUse("k", "Bash", {"command": command, "n": 3})]),
        Message("user", "", tool_results=[ToolResult("k", "ok")]),
    ]
    got = apply(messages, {"k": "drop_call"}, reduction=Reduction(0.3, 0.0))
    new = got.briefed["k"]["command"]
    assert new.endswith("…[factrail omitted 305 chars]") and new.startswith("x" * 200)
    assert got.briefed["k"]["n"] == 3
    assert got.messages[1].tool_uses[0].input["command"] == new
    assert messages[1].tool_uses[0].input["command"] == command
    # Briefing again (even with a smaller cap) keeps the original count.
    assert brief_value(new, 160) == new
    # So is one briefed before the mark named factrail.
    assert brief_value("x" * 200 + "…[305 chars]", 160) == "x" * 200 + "…[305 chars]"
    again = apply(got.messages, {"k": "drop_call"}, reduction=Reduction(0.3, 0.0))
    assert again.briefed == {}


def test_reads_brief_their_arguments_at_160() -> None:
    pattern = "p" * 300
    messages = [
        Message("user", "go"),
        Message("assistant", "", [ToolUse("g", "Grep", {"pattern": pattern})]),
        Message("user", "", tool_results=[ToolResult("g", "src/a.py:1: hit\n" * 300)]),
    ]
    got = apply(messages, {"g": "drop_result"}, reduction=Reduction(0.3, 0.0))
    assert got.briefed["g"]["pattern"] == "p" * 160 + "…[factrail omitted 140 chars]"
    assert got.changed["g"].startswith("[factrail omitted 4800 chars: reproducible, re-run")


def _session(*calls: tuple[str, str, dict[str, Any], str]) -> list[Message]:
    """A user turn, then each `(id, tool, input, result)` call and its result."""
    out = [Message("user", "go")]
    for tool_use_id, tool, input, result in calls:
        out.append(Message("assistant", "", [ToolUse(tool_use_id, tool, input)]))
        out.append(Message("user", "", tool_results=[ToolResult(tool_use_id, result)]))
    return out


def test_a_reduced_call_is_sent_with_its_long_arguments_briefed() -> None:
    body = "\n".join(f"def f{i}(): return {i}" for i in range(200))
    patch = "*** Begin Patch\n*** Update File: src/a.py\n" + "+x = 1\n" * 100 + "*** End Patch"
    command = "pytest -q " + "-k x " * 80
    messages = _session(
        ("w", "Write", {"file_path": "/r/m.py", "content": body}, "File created at /r/m.py"),
        ("p", "apply_patch", {"input": patch}, "Done"),
        ("r", "Bash", {"command": command}, "1 passed"),
        ("n", "Write", {"file_path": "/r/n.py", "content": body}, "File created at /r/n.py"),
    )
    actions: dict[str, Action] = {"w": "drop_result", "p": "drop_result", "r": "drop_result"}
    got = apply(messages, actions, reduction=Reduction(0.3, 0.0))
    # What the call wrote is on disk: its path stays, its content is cut to 200 chars.
    assert got.briefed["w"] == {
        "file_path": "/r/m.py",
        "content": body[:200] + f"…[factrail omitted {len(body) - 200} chars]",
    }
    assert got.briefed["p"] == {
        "input": patch[:200] + f"…[factrail omitted {len(patch) - 200} chars]"
    }
    # A long command goes briefed too; a write the action keeps goes whole.
    assert got.briefed["r"] == {
        "command": command[:200] + f"…[factrail omitted {len(command) - 200} chars]"
    }
    assert "n" not in got.briefed
    assert got.messages[1].tool_uses[0].input == got.briefed["w"]
    assert got.changed == {} and got.tokens_after < got.tokens_before
    # Frozen: a later compaction leaves what this one decided as it is.
    again = apply(got.messages, actions, reduction=Reduction(0.3, 0.0), final={"w", "p", "r"})
    assert again.briefed == {} and again.messages == got.messages
    # A call a judge said matters with its arguments keeps them (its result may still go).
    kept = apply(messages, actions, reduction=Reduction(0.3, 0.0), calls_kept={"w"})
    assert "w" not in kept.briefed and "p" in kept.briefed


def test_a_call_that_wrote_down_what_the_agent_read_keeps_its_arguments() -> None:
    figures = [f"{i}.{i * 7 % 1000:03d}" for i in range(100, 130)]
    paper = "\n".join(f"(M={f}, SD=1.5) in condition {i}" for i, f in enumerate(figures))
    notes = "\n".join(f"MEAN_{i} = {f}" for i, f in enumerate(figures))
    code = "\n".join(f"def f{i}(): return {i}" for i in range(200))
    messages = _session(
        ("r", "Bash", {"command": "curl -s http://x/paper"}, paper),
        ("n", "write", {"file_path": "/w/c.py", "content": notes}, "ok"),
        ("w", "write", {"file_path": "/w/m.py", "content": code}, "ok"),
    )
    actions: dict[str, Action] = {"r": "drop_result", "n": "drop_result", "w": "drop_result"}
    got = apply(messages, actions, reduction=Reduction(0.3, 0.0))
    # 30 figures the paper showed: the constants file is the agent's notes, and stays whole.
    assert "n" not in got.briefed
    assert got.briefed["w"]["content"].endswith(f"…[factrail omitted {len(code) - 200} chars]")
    # Short numbers are in every log and every module: sharing them makes no notes.
    log = "\n".join(f"[{i:02d}] test_{i} PASSED in {i}.0s" for i in range(100))
    module = "\n".join(f"def f{i}(): return {i} * {i + 1}" for i in range(100))
    messages = _session(
        ("l", "Bash", {"command": "cat build.log"}, log),
        ("m", "write", {"file_path": "/w/m.py", "content": module}, "ok"),
    )
    got = apply(messages, {"l": "drop_result", "m": "drop_result"}, reduction=Reduction(0.3, 0))
    assert "m" in got.briefed


def test_a_result_is_cut_only_when_that_saves_min_cut_chars() -> None:
    small = "\n".join(f"src/app/module_{i}.py:{i}: match" for i in range(20))  # ~600 chars
    large = "\n".join(f"src/app/module_{i}.py:{i}: match" for i in range(200))
    messages = _session(
        ("s", "Grep", {"pattern": "match", "path": "src/app"}, small),
        ("l", "Grep", {"pattern": "match", "path": "src"}, large),
    )
    actions: dict[str, Action] = {"s": "drop_result", "l": "drop_result"}
    assert set(apply(messages, actions, reduction=Reduction(0.9, 0.0)).changed) == {"s", "l"}
    got = apply(messages, actions, reduction=Reduction(0.9, 0.0), min_cut=800)
    # The small search would save under 800 chars: it stays whole, its paths in sight.
    assert set(got.changed) == {"l"}
    assert (
        len(small) - len(apply(messages, actions, reduction=Reduction(0.9, 0.0)).changed["s"]) < 800
    )


def test_regex_selection_without_value() -> None:
    messages = _transcript()
    got = apply(
        messages,
        _rules(messages),
        reduction=Reduction(0.3, 0.0),
        selection=Selection(value=False, pool=False),
    )
    assert any("error: upstream refused" in t for t in got.changed.values())


def test_mirror_follows_the_new_result() -> None:
    messages = _transcript(3)
    for m in messages:
        for u in m.tool_uses:
            u.text = "mirror"
    got = apply(messages, _rules(messages), reduction=Reduction(0.3, 0.0))
    uses = {u.tool_use_id: u for m in got.messages for u in m.tool_uses}
    assert uses["c0"].text == got.changed["c0"]


def _escalate_eagerly(engine: Any, slots: list[Any], after: int, need: float) -> tuple[int, int]:
    """Escalation as first written: every slot's next move scored up front."""
    heap: list[tuple[float, int, int, int]] = []

    def push(slot: Any) -> None:
        move = engine.next_move(slot)
        if move is not None:
            score, tier, gain = move
            heapq.heappush(heap, (-score, slot.order, tier, gain))

    if after > need:
        for slot in slots:
            push(slot)
    while after > need and heap:
        _, order, tier, gain = heapq.heappop(heap)
        slots[order].tier = tier
        after -= gain
        push(slots[order])
    return after, max((s.tier for s in slots if not s.final), default=0)


def _mixed(seed: int) -> list[Message]:
    rng = random.Random(seed)
    messages = [Message("user", "fix it")]
    for i in range(rng.randint(3, 12)):
        cid = f"m{i}"
        size = rng.choice((30, 120, 400, 1500))
        if rng.random() < 0.3:
            use = ToolUse(cid, "Read", {"file_path": f"src/m{i}.py"})
            out = "\n".join(f"x{j} = {rng.randint(0, 99999)}" for j in range(size))
        else:
            use = ToolUse(cid, "Bash", {"command": f"run {i}"})
            out = _log(size, f"t{i}") if rng.random() < 0.7 else "\n".join(["same line"] * size)
        messages.append(Message("assistant", f"call {i}", [use]))
        messages.append(Message("user", "", tool_results=[ToolResult(cid, out)]))
    return messages


def test_lazy_escalation_makes_the_moves_of_scoring_every_slot_up_front(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cases = [(_mixed(seed), Reduction(target, 0.0)) for seed in range(8) for target in (0.3, 0.7)]
    lazy = [apply(m, _rules(m), reduction=r) for m, r in cases]
    monkeypatch.setattr(apply_module, "_escalate", _escalate_eagerly)
    eager = [apply(m, _rules(m), reduction=r) for m, r in cases]
    assert any(a.tier >= 2 for a in lazy)
    for a, b in zip(lazy, eager, strict=True):
        assert (a.tier, a.changed, a.tokens_after) == (b.tier, b.changed, b.tokens_after)


def _paper(rows: int = 400) -> str:
    """A data file the agent reads: every line a measurement with its own figures."""
    return "\n".join(
        f"{i}\tcondition_{i % 7} mean {100 + i * 3.137:.3f} ms sd {i * 0.513:.3f}"
        for i in range(rows)
    )


def _quoting(said: str) -> list[Message]:
    """A read of `_paper()`, then the agent writing `said`, then later calls."""
    messages = [
        Message("user", "summarise the results"),
        Message("assistant", "", [ToolUse("r", "Read", {"file_path": "/data/results.tsv"})]),
        Message("user", "", tool_results=[ToolResult("r", _paper())]),
        Message("assistant", said, [ToolUse("b", "Bash", {"command": "ls"})]),
        Message("user", "", tool_results=[ToolResult("b", "notes.md")]),
    ]
    return messages


def test_a_read_the_agent_quoted_from_keeps_its_fact_lines_instead_of_a_rerun_note() -> None:
    """An agent that carries figures out of a read draws facts from it: the read is reduced
    like an observation (head, value-chosen lines, tail), not to a re-run note."""
    plain = apply(_quoting("Reading done."), {"r": "drop_result"}, reduction=Reduction(0.3, 0.0))
    assert plain.changed["r"].startswith("[factrail omitted ")
    assert "reproducible, re-run the call" in plain.changed["r"]

    quoted = _quoting("Condition 3 takes 109.411 ms on average.")
    got = apply(quoted, {"r": "drop_result"}, reduction=Reduction(0.3, 0.0))
    text = got.changed["r"]
    assert "reproducible" not in text
    assert text.startswith(_paper()[:40])  # the head stays
    assert text.endswith(_paper()[-40:])  # and the tail
    assert "fact lines; full output" in text
    assert len(text) < len(_paper()) // 2
    # The lines kept from the middle are whole lines of the read.
    kept = [line for line in text.split("\n") if "\tcondition_" in line]
    assert kept and all(line in _paper().split("\n") for line in kept)


def test_a_quoted_reads_extras_are_found_once_however_often_its_stub_is_rendered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every tier and pooling step renders a quoted read's stub again; what its re-run note
    would carry is found once per text, and a later compaction with the same memo finds it
    no more."""
    found: list[str] = []
    real = render_module.read_extras

    def counting(text: str, files: str | None = None) -> list[str]:
        found.append(text)
        return real(text, files)

    monkeypatch.setattr(render_module, "read_extras", counting)
    quoted = _quoting("Condition 3 takes 109.411 ms on average.")
    memo = Analysis()
    first = apply(quoted, {"r": "drop_result"}, reduction=Reduction(0.8, 0.0), memo=memo)
    assert "reproducible" not in first.changed["r"] and first.tier >= 2  # rendered at 2 tiers
    assert found == [_paper()]
    again = apply(quoted, {"r": "drop_result"}, reduction=Reduction(0.8, 0.0), memo=memo)
    assert again.changed == first.changed and found == [_paper()]


def test_a_search_whose_files_the_agent_opened_stays_a_rerun_note() -> None:
    """Opening the files a search named is what its note's `files:` line is for."""
    hits = "\n".join(f"src/pkg/module_{i}.py:{i + 1}: import thing" for i in range(300))
    messages = [
        Message("user", "go"),
        Message("assistant", "", [ToolUse("g", "Grep", {"pattern": "thing"})]),
        Message("user", "", tool_results=[ToolResult("g", hits)]),
        Message("assistant", "", [ToolUse("o", "Read", {"file_path": "src/pkg/module_7.py"})]),
        Message("user", "", tool_results=[ToolResult("o", "import thing")]),
    ]
    got = apply(messages, {"g": "drop_result"}, reduction=Reduction(0.3, 0.0))
    assert "reproducible, re-run the call" in got.changed["g"]
    assert "src/pkg/module_7.py" in got.changed["g"]


def test_a_quoted_read_keeps_the_ids_its_rerun_note_would_have_listed() -> None:
    """Its stub carries the note's extras: here the short lines holding the read's ids."""
    body = ["    total = compute_total(values, offset)" for _ in range(600)]
    body[450] = 'BUILD_ID = "bld-90203555"'
    text = "\n".join(body)
    messages = [
        Message("user", "go"),
        Message("assistant", "", [ToolUse("r", "Read", {"file_path": "/repo/build.py"})]),
        Message("user", "", tool_results=[ToolResult("r", text)]),
        Message("assistant", "I will call compute_total the same way.", []),
        Message("user", "ok"),
    ]
    got = apply(messages, {"r": "drop_result"}, reduction=Reduction(0.3, 0.0))
    out = got.changed["r"]
    assert "reproducible" not in out
    assert 'BUILD_ID = "bld-90203555"' in out.split("\n")
    # Unquoted, the same read is a re-run note carrying that line.
    messages[3] = Message("assistant", "I will call it the same way.", [])
    note = apply(messages, {"r": "drop_result"}, reduction=Reduction(0.3, 0.0)).changed["r"]
    assert "reproducible, re-run the call" in note
    assert 'BUILD_ID = "bld-90203555"' in note.split("\n")


def _notes_by_definition(messages: list[Message], ids: set[str]) -> set[str]:
    """`_notes` read literally: every call in `ids` against every result before it."""
    out: set[str] = set()
    shown: set[str] = set()
    for m in messages:
        for u in m.tool_uses:
            if u.tool_use_id in ids:
                written = {t for t in fact_tokens(compact_json(u.input)) if len(t) >= 4}
                if len(written & shown) >= apply_module.NOTES_FACTS:
                    out.add(u.tool_use_id)
        for r in m.tool_results:
            shown.update(t for t in fact_tokens(r.text) if len(t) >= 4)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.booleans()), max_size=8))
def test_notes_are_the_calls_that_wrote_down_what_earlier_results_showed(
    spec: list[tuple[int, int, bool]],
) -> None:
    """Each call writes `n` figures and its result shows `m`; the figures overlap from the start,
    so some calls reach `NOTES_FACTS` and some do not, wherever the last of them is."""
    messages = [Message("user", "go")]
    for i, (n, m, listed) in enumerate(spec):
        figures = " ".join(f"{1000 + k}" for k in range(n))
        use = ToolUse(f"c{i}", "Write", {"file_path": "notes.md", "content": figures})
        shown = "\n".join(f"row {1000 + k}" if listed else f"{1000 + k}" for k in range(m))
        messages.append(Message("assistant", "", [use]))
        messages.append(Message("user", "", tool_results=[ToolResult(f"c{i}", shown)]))
    ids = {f"c{i}" for i in range(0, len(spec), 2)} | {"absent"}
    got = apply_module._notes(messages, ids, lambda text: frozenset(fact_tokens(text)))
    assert got == _notes_by_definition(messages, ids)
