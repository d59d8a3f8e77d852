"""When and how deep: short of the danger line a compaction runs only when it pays back its
cache break (or the cache is cold); past it, always; what an earlier compaction decided stays
frozen; two turns of one session never interleave."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from factrail.core.formats import openai_chat
from factrail.core.model import collect_tool_calls, transcript_tokens
from factrail.judges.rules import RulesJudge
from factrail.session import SessionCompactor, gate
from factrail.session.turn import Asked
from factrail.settings import Settings, SettingsError
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.state import Observed
from tests.options import engine_options
from tests.test_session import chat
from tests.test_session import compactor as session_compactor


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def tokens_of(wire: list[dict[str, Any]]) -> int:
    return transcript_tokens(openai_chat.parse(wire).messages)


def make(
    trigger: int,
    profile: str = "anthropic",
    clock: Clock | None = None,
    rearm: int = 0,
    horizon: float = 1.0,
) -> SessionCompactor:
    clock = clock or Clock()
    return SessionCompactor(
        engine_options(
            trigger_tokens=trigger,
            trigger_percent=0.0,
            rearm_tokens=rearm,
            price_profile=profile,
            payback_horizon=horizon,
        ),
        state=MemoryStateStore(clock),
        outputs=None,
        judge=RulesJudge(),
        clock=clock,
    )


def between_the_lines(wire: list[dict[str, Any]]) -> int:
    """A trigger that puts `wire` between the soft line (5/6) and the hard line."""
    return int(tokens_of(wire) / 0.9)


async def test_a_soft_line_compaction_waits_until_it_pays_back() -> None:
    wire = chat(12)
    trigger = between_the_lines(wire)
    warm = await make(trigger).compact("s", openai_chat.parse(wire))
    assert warm.outcome == "passthrough"  # 6 turns in: breaking the cache would not pay back
    assert warm.decision == "waits"
    free = await make(trigger, "none").compact("s", openai_chat.parse(wire))
    assert free.outcome == "compacted" and free.invalidated_tokens > 0
    assert free.decision == "pays"


@pytest.mark.parametrize(("turns", "horizon", "decision"), [
    (18, 1.0, "pays"), (18, 0.5, "waits"), (12, 1.0, "waits"), (12, 2.0, "pays"),
])  # fmt: skip
async def test_the_payback_horizon_is_how_many_more_turns_the_gate_bets_on(
    turns: int, horizon: float, decision: str
) -> None:
    """The gate bets a session goes on for `payback_horizon` times the turns it has had: a
    compaction that pays back on that bet runs, else it waits."""
    wire = chat(turns)
    compactor = make(between_the_lines(wire), horizon=horizon)
    result = await compactor.compact("s", openai_chat.parse(wire))
    assert result.decision == decision
    assert result.outcome == ("compacted" if decision == "pays" else "passthrough")


async def test_past_the_danger_line_it_always_runs() -> None:
    """Danger: halfway from the trigger to the window, or a fifth past the trigger when the
    window is unknown (as here)."""
    wire = chat(12)
    past_danger = await make(int(tokens_of(wire) / 1.25)).compact("s", openai_chat.parse(wire))
    assert past_danger.outcome == "compacted" and past_danger.decision == "forced"
    short_of_it = await make(int(tokens_of(wire) / 1.1)).compact("s", openai_chat.parse(wire))
    assert short_of_it.outcome == "passthrough"  # past the trigger, but it would not pay back
    assert short_of_it.decision == "waits"


def _reduced(document: Any) -> set[str]:
    return {
        r.tool_use_id
        for m in openai_chat.parse(document).messages
        for r in m.tool_results
        if "[factrail omitted" in r.text
    }


async def test_a_compaction_forced_past_the_danger_line_pins_only_the_exchange_answered() -> None:
    """Short of the danger line the newest `preserve_recent` (4) messages are never reduced;
    past it only the last exchange is (`FACTRAIL_PRESERVE_RECENT` above 2 pins 2 there)."""
    wire = chat(12)
    messages = openai_chat.parse(wire).messages

    def pinned(n: int) -> set[str]:
        return {c.tool_use_id for c in collect_tool_calls(messages, n) if c.pinned}

    assert pinned(2) < pinned(4)
    forced = await make(int(tokens_of(wire) / 1.25)).compact("s", openai_chat.parse(wire))
    assert forced.decision == "forced"
    reduced = _reduced(forced.document)
    assert reduced & (pinned(4) - pinned(2))  # the exchange before the last gave way
    assert not reduced & pinned(2)
    paying = await make(between_the_lines(wire), "none").compact("s", openai_chat.parse(wire))
    assert paying.decision == "pays"
    reduced = _reduced(paying.document)
    assert reduced and not reduced & pinned(4)


async def test_past_the_danger_line_the_last_exchange_is_the_newest_call_and_what_follows() -> None:
    """When the agent wrote text after its last call and the user answered, the last exchange
    runs from that call to the end: its result stays whole."""
    wire = [
        *chat(12),
        {"role": "assistant", "content": "The build fails on id 7f3a0000."},
        {"role": "user", "content": "Go on."},
    ]
    messages = openai_chat.parse(wire).messages
    newest = max(i for i, m in enumerate(messages) if m.tool_uses)
    assert len(messages) - newest > 2
    last = {u.tool_use_id for u in messages[newest].tool_uses}
    forced = await make(int(tokens_of(wire) / 1.25)).compact("s", openai_chat.parse(wire))
    assert forced.decision == "forced"
    reduced = _reduced(forced.document)
    assert reduced and not reduced & last


async def test_a_cold_cache_makes_the_soft_line_compaction_free() -> None:
    wire = chat(12)
    trigger = between_the_lines(wire)
    clock = Clock()
    compactor = make(trigger, clock=clock)
    assert (await compactor.compact("s", openai_chat.parse(wire))).outcome == "passthrough"
    clock.now += 60  # still warm
    assert (await compactor.compact("s", openai_chat.parse(wire))).outcome == "passthrough"
    clock.now += 301  # idle past the five-minute TTL: the next request re-bills it all anyway
    cold = await compactor.compact("s", openai_chat.parse(wire))
    assert cold.outcome == "compacted" and cold.decision == "cold"


async def test_a_horizon_of_zero_never_bets_but_still_compacts_when_it_must_or_it_is_free() -> None:
    """`FACTRAIL_PAYBACK_HORIZON=0`: no compaction short of the danger line on a warm cache,
    however long the session has run; past the danger line, on a cold cache and where the
    provider has no cache to break, as always."""
    wire = chat(18)  # pays back on a horizon of 1 (above)
    clock = Clock()

    def never_bets(trigger: int, profile: str = "anthropic") -> SessionCompactor:
        return make(trigger, profile, clock, horizon=0.0)

    compactor = never_bets(between_the_lines(wire))
    warm = await compactor.compact("s", openai_chat.parse(wire))
    assert (warm.decision, warm.outcome) == ("waits", "passthrough")
    clock.now += 301
    cold = await compactor.compact("s", openai_chat.parse(wire))
    assert (cold.decision, cold.outcome) == ("cold", "compacted")
    forced = await never_bets(int(tokens_of(wire) / 1.25)).compact("t", openai_chat.parse(wire))
    assert (forced.decision, forced.outcome) == ("forced", "compacted")
    no_cache = await never_bets(between_the_lines(wire), "none").compact(
        "u", openai_chat.parse(wire)
    )
    assert (no_cache.decision, no_cache.outcome) == ("pays", "compacted")


async def test_a_session_counts_which_of_its_compactions_were_bets() -> None:
    """`bets` counts the compactions the gate ran because they pay back, not those forced past
    the danger line or run on a cold cache: a session that cost more than sent whole with no
    bet paid for staying under its trigger (`factrail inspect --list` says which)."""
    wire = chat(18)
    clock = Clock()

    async def counted(compactor: SessionCompactor, session: str) -> tuple[str, int, int | None]:
        result = await compactor.compact(session, openai_chat.parse(wire))
        state = compactor.state.load(session)
        assert state is not None and result.outcome == "compacted"
        return result.decision or "", state.compactions, state.bets

    assert await counted(make(between_the_lines(wire), clock=clock), "bet") == ("pays", 1, 1)
    forced = make(int(tokens_of(wire) / 1.25), clock=clock)
    assert await counted(forced, "forced") == ("forced", 1, 0)
    cold = make(between_the_lines(wire), clock=clock, horizon=0.0)
    assert (await cold.compact("cold", openai_chat.parse(wire))).decision == "waits"
    clock.now += 301
    assert await counted(cold, "cold") == ("cold", 1, 0)


def test_the_payback_horizon_setting_takes_zero_but_nothing_below() -> None:
    assert Settings(payback_horizon=0).engine_options().payback_horizon == 0
    with pytest.raises(SettingsError, match=r"payback_horizon=-1 is not allowed: .* ≥ 0"):
        Settings(payback_horizon=-1)


async def test_what_an_earlier_compaction_decided_stays_frozen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A shallow first compaction leaves some old results as they were; the second, deeper one
    changes nothing the first decided (reduced or not), only what is newer, so the provider
    re-reads its cache up to the newly reduced results. (Aimed at the re-arm gap alone, so the
    first cut is shallow.)"""
    monkeypatch.setattr(gate, "HEADROOM_TURNS", 0)
    wire = chat(40, size=1500)
    head = wire[:52]
    compactor = make(int(tokens_of(head) * 0.9), "none", rearm=1)
    first = await compactor.compact("s", openai_chat.parse(head))
    assert first.outcome == "compacted"
    state = compactor.state.load("s")
    assert state is not None
    untouched = [c for c in state.settled if c not in state.plan]
    assert untouched  # the first cut was shallow: some old results stayed verbatim
    grown = wire[:58]
    second = await compactor.compact("s", openai_chat.parse(grown))
    assert second.outcome == "compacted" and second.tokens_before < second.trigger_tokens
    earlier = _tools(first.document)
    later = _tools(second.document)
    for call in state.settled:
        assert later[call]["content"] == earlier[call]["content"]
    fresh = [c for c in later if c not in earlier or c not in state.settled]
    assert any(later[c]["content"] != _tools(grown)[c]["content"] for c in fresh)


def _tools(wire: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["tool_call_id"]: m for m in wire if m["role"] == "tool"}


async def test_two_turns_of_one_session_never_interleave() -> None:
    wire = chat(30)
    compactor = make(int(tokens_of(wire) * 0.8))
    a, b = await asyncio.gather(
        compactor.compact("s", openai_chat.parse(wire)),
        compactor.compact("s", openai_chat.parse(wire)),
    )
    assert sorted([a.outcome, b.outcome]) == ["compacted", "reapplied"]
    assert a.document == b.document
    state = compactor.state.load("s")
    assert state is not None and state.compactions == 1


async def test_a_later_compaction_invalidates_only_from_its_first_new_change() -> None:
    c, store = session_compactor(16000)
    wire = chat(30)
    first = await c.compact("s", openai_chat.parse(wire))
    assert first.outcome == "compacted"
    sent = first.document
    for k in range(31, 90):
        wire = chat(k)
        turn = await c.compact("s", openai_chat.parse(wire))
        if turn.outcome == "compacted":
            break
        sent = turn.document
    else:
        pytest.fail("no second compaction")
    # The first message that differs from what the previous turn forwarded (the system
    # message is outside the engine's transcript, hence the offset of one).
    differs = next(i for i, (a, b) in enumerate(zip(sent, turn.document, strict=False)) if a != b)
    state = store.load("s")
    assert state is not None
    assert state.history[-1]["first_changed_message"] == differs - 1
    after = openai_chat.parse(turn.document).messages[differs - 1 :]
    assert turn.invalidated_tokens == transcript_tokens(after)
    assert turn.invalidated_tokens < turn.tokens_after / 2  # the frozen zone stays cached


async def test_past_the_hard_line_newer_results_give_way_before_what_was_decided(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the hard line the calls an earlier compaction decided may be re-decided, but not
    while the newer results alone bring the transcript under the line: re-deciding an old call
    would move the cache's loss back to it."""
    monkeypatch.setattr(gate, "HEADROOM_TURNS", 0)
    head = chat(40, size=1500)[:52]
    compactor = make(int(tokens_of(head) * 0.9), "none", rearm=1)
    first = await compactor.compact("s", openai_chat.parse(head))
    assert first.outcome == "compacted"
    state = compactor.state.load("s")
    assert state is not None
    settled = list(state.settled)
    assert [c for c in settled if c not in state.plan]  # old results it left as they were
    # Three calls with large outputs, then three small recent ones.
    grown = [*head, *chat(40, size=9000)[52:58], *chat(40, size=300)[58:64]]
    second = await compactor.compact("s", openai_chat.parse(grown))
    assert second.outcome == "compacted"
    after = compactor.state.load("s")
    assert after is not None and after.history[-1]["line"] == "hard-line"
    assert second.tokens_after < second.trigger_tokens
    earlier, later = _tools(first.document), _tools(second.document)
    for call in settled:
        assert later[call]["content"] == earlier[call]["content"]
    calls = {c["id"]: c for m in second.document for c in m.get("tool_calls") or []}
    before = {c["id"]: c for m in first.document for c in m.get("tool_calls") or []}
    assert all(calls[c] == before[c] for c in settled)


@pytest.mark.parametrize(
    ("profile", "turns", "opened"),
    [("anthropic", 1, False), ("anthropic", 10_000, True), ("none", 1, True)],
)
def test_opening_what_was_decided_must_pay_back_when_neither_gets_under(
    profile: str, turns: int, opened: bool
) -> None:
    """When the rails cannot get under the hard line either way, the old calls are re-decided
    only if what that saves on every later turn pays back what it re-bills once: not when it
    saves little for a session about to end under Anthropic's prices, but for one expected to go
    on, and always when there is no cache to lose."""
    from factrail.core.analysis import Analysis
    from factrail.core.apply import Reduction
    from factrail.core.plan import rules_actions

    # Twelve old calls whose outputs a stub can cut only a little, then twelve large ones.
    wire = [*chat(24, size=700)[:26], *chat(24, size=3000)[26:]]
    compactor = make(1000, profile)
    turn = compactor._turn("s", openai_chat.parse(wire), Asked("claude-x"), 0, None, True)
    turn.turns = turns
    actions = rules_actions(turn.work, 6)
    old = [u.tool_use_id for m in turn.work for u in m.tool_uses][:12]
    turn.state.settled = old
    unreachable = Reduction(target=0.99, hard=0.99)  # no rails get a transcript under this
    newer = compactor._rails(turn, actions, unreachable, frozenset(old), Analysis())
    every = compactor._rails(turn, actions, unreachable, frozenset(), Analysis())
    assert newer.tokens_after > every.tokens_after  # opening the old calls would save more
    chosen = compactor.gate.cheaper(turn, newer, every, unreachable)
    assert chosen is (every if opened else newer)


async def test_a_compaction_whose_rails_would_save_little_does_not_happen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gate's saving is an estimate (here 0.8 of the open results, down to the aim); outputs
    a little past what a stub can cut leave the rails little to remove, and re-billing the whole
    transcript for that would not pay back: the turn goes on as a passthrough (the same turn
    compacts when the check of the rails' actual saving is taken away)."""
    wire = chat(40, size=800)
    trigger = between_the_lines(wire)
    declined = await make(trigger).compact("s", openai_chat.parse(wire))
    assert declined.outcome == "passthrough" and declined.document is None
    assert declined.decision == "declined"
    monkeypatch.setattr(gate.CostGate, "pays_off", lambda *_: True)
    forced = await make(trigger).compact("s", openai_chat.parse(wire))
    assert forced.outcome == "compacted"
    assert forced.tokens_before - forced.tokens_after < forced.invalidated_tokens / 10


async def test_past_the_danger_line_a_compaction_that_cannot_get_under_it_must_pay_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bulk is in the last result, which the rails keep (the agent works with it): the old
    results are too small to get the request back under the danger line, so trimming them would
    re-bill the whole transcript for little; it happens only once the request would not fit the
    window otherwise."""
    wire = chat(12, size=800)
    wire[-2]["content"] = "\n".join(f"row {j}: value {j * 7919 % 100003}" for j in range(4000))
    size = tokens_of(wire)
    trigger = size // 2
    parsed = openai_chat.parse(wire)
    # Danger: halfway from the trigger to the window (0.85 of the request); fit: 0.9 of it.
    roomy = await make(trigger).compact("s", parsed, window=int(size * 1.2))
    assert roomy.outcome == "passthrough" and roomy.document is None
    assert roomy.decision == "declined"
    tight = await make(trigger).compact("s", openai_chat.parse(wire), window=int(size / 0.95))
    assert tight.outcome == "compacted" and tight.decision == "forced"
    assert tight.tokens_after > tight.tokens_before * 0.85  # still past where danger was
    monkeypatch.setattr(gate.CostGate, "relieves", lambda *_: True)
    forced = await make(trigger).compact("s", openai_chat.parse(wire), window=int(size * 1.2))
    assert forced.outcome == "compacted"


async def test_each_due_turn_is_counted_by_the_gate_s_decision() -> None:
    """`factrail_compaction_decisions_total{decision}`: every series from the start; a turn
    below the soft line is not due, so not counted."""
    from factrail.gateway.metrics import Metrics

    metrics = Metrics()
    wire = chat(12)

    def count(decision: str) -> float | None:
        return metrics.registry.get_sample_value(
            "factrail_compaction_decisions_total", {"decision": decision}
        )

    assert {d: count(d) for d in gate.DECISIONS} == dict.fromkeys(gate.DECISIONS, 0.0)
    below = await make(tokens_of(wire) * 2).compact("s", openai_chat.parse(wire))
    waits = await make(between_the_lines(wire)).compact("s", openai_chat.parse(wire))
    for result in (below, waits):
        metrics.record_turn(result, 0.0)
    assert below.decision is None
    assert count("waits") == 1 and sum(count(d) or 0 for d in gate.DECISIONS) == 1


async def test_the_one_hour_cache_a_client_asks_for_goes_cold_later_and_costs_more_to_break() -> (
    None
):
    """Anthropic's one-hour entries (`ttl: "1h"`) stay warm an hour, and are written at twice
    the input price: a compaction that pays back under the five-minute cache's 1.25 does not
    under 2, and an hour's idle, not five minutes', makes one free."""
    wire = chat(20)
    trigger = between_the_lines(wire)
    five = await make(trigger).compact("s", openai_chat.parse(wire))
    hour = await make(trigger).compact("s", openai_chat.parse(wire), cache_ttl_s=3600)
    assert (five.decision, hour.decision) == ("pays", "waits")
    clock = Clock()
    compactor = make(trigger, clock=clock)
    seen = await compactor.compact("s", openai_chat.parse(wire), cache_ttl_s=3600)
    assert seen.decision == "waits"
    clock.now += 600  # past five minutes: the one-hour entry is still there
    warm = await compactor.compact("s", openai_chat.parse(wire), cache_ttl_s=3600)
    assert warm.decision == "waits"
    clock.now += 3601
    cold = await compactor.compact("s", openai_chat.parse(wire), cache_ttl_s=3600)
    assert cold.decision == "cold" and cold.outcome == "compacted"


def long_reads(turns: int, chars: int) -> list[dict[str, Any]]:
    """A chat transcript of `turns` reads of `chars` chars each."""
    wire: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing deploy."},
    ]
    for i in range(turns):
        command = f'{{"command": "cat run{i}.log"}}'
        function = {"name": "Bash", "arguments": command}
        call = {"id": f"call_{i:03d}", "type": "function", "function": function}
        lines = [f"line {j} of output {i}, request req-{i:04d}{j:05d}" for j in range(chars // 40)]
        output = "\n".join(lines)[:chars]
        wire.append({"role": "assistant", "content": f"Step {i}.", "tool_calls": [call]})
        wire.append({"role": "tool", "tool_call_id": call["id"], "content": output})
    wire.append({"role": "assistant", "content": "Done reading."})
    return wire


@pytest.mark.parametrize(("chars", "decision"), [(80_000, "waits"), (85_000, "pays")])
async def test_getting_back_under_the_long_context_price_line_pays_at_once(
    chars: int, decision: str
) -> None:
    """GPT-6 bills a request past 272K input tokens at twice the input prices, all of it. Ten
    turns in, re-writing most of the transcript does not pay back for a request under the line
    (261K tokens); for one past it (278K) every later turn would cost twice as much, so the same
    compaction runs and brings it back under."""
    wire = long_reads(10, chars)
    size = tokens_of(wire)
    result = await make(int(size / 0.9), "openai").compact(
        "s", openai_chat.parse(wire), model="gpt-6-sol"
    )
    assert result.decision == decision
    if decision == "pays":
        assert size > 272_000 > result.tokens_after


async def cold_compaction(wire: list[dict[str, Any]], model: str) -> int:
    """The tokens left by a compaction of `wire` on a cold cache (so it runs whatever its price),
    the session seen once before."""
    clock = Clock()
    compactor = make(between_the_lines(wire), "auto", clock=clock)
    await compactor.compact("s", openai_chat.parse(wire[:4]), model=model)  # seen, small
    clock.now += 301
    result = await compactor.compact("s", openai_chat.parse(wire), model=model)
    assert result.outcome == "compacted" and result.decision == "cold"
    return result.tokens_after


async def test_dearer_writes_against_reads_make_deeper_compactions() -> None:
    """A compaction leaves room for twice as many turns as re-writing a token costs in reads,
    at least 24: Opus 5.5 reads at 0.05 and writes at 1.25, so 48 turns; Opus 5 (0.1, 1.25)
    24. The same cold-cache compaction aims lower on Opus 5.5."""
    wire = chat(40)
    assert await cold_compaction(wire, "claude-opus-5-5") < await cold_compaction(
        wire, "claude-opus-5"
    )


async def test_even_where_a_cache_miss_is_cheap_a_compaction_leaves_room_for_24_turns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GPT-4o reads its cache at half price and bills no writes: a re-write costs one turn of
    reads, yet room for 24 turns billed less on every corpus than twelve (the Codex CLI's
    40-call session at 90k went from 1.031 of direct to 0.981)."""
    wire = chat(60)
    deep = await cold_compaction(wire, "gpt-4o")
    monkeypatch.setattr(gate, "HEADROOM_TURNS", 12)
    assert deep < await cold_compaction(wire, "gpt-4o")


async def test_the_gate_prices_a_model_as_factrail_model_prices_says() -> None:
    """A model the tables do not know is priced by the profile's default, unless
    `FACTRAIL_MODEL_PRICES` names it: at reads of 0.05 the same compaction waits."""
    wire = chat(18)
    trigger = between_the_lines(wire)
    decisions = {}
    for prices in ({}, {"claude-next": {"cached": 0.05, "write": 1.25}}):
        compactor = SessionCompactor(
            engine_options(trigger_tokens=trigger, trigger_percent=0.0, rearm_tokens=0,
                           price_profile="anthropic", model_prices=prices),
            state=MemoryStateStore(Clock()), outputs=None, judge=RulesJudge(), clock=Clock(),
        )  # fmt: skip
        result = await compactor.compact("s", openai_chat.parse(wire), model="claude-next-1")
        decisions[bool(prices)] = result.decision
    assert decisions == {False: "pays", True: "waits"}


async def test_a_cache_that_read_nothing_of_the_frozen_zone_is_priced_so() -> None:
    """A provider that keeps its cache only at breakpoints, with none at the end of the frozen
    zone (hosted shell outputs cannot carry one), re-bills a later compaction from the head.
    The gateway measures that on the compaction turn (the share of the unchanged prefix it
    read, kept in the state store), and the gate prices the next compaction with it: the turn
    that compacts on a cache reaching the frozen zone waits on one that reached none of it.
    Two workers share the store: the one that measured is not the one that compacts next."""

    async def second_compaction(reach: float | None) -> tuple[int, str | None]:
        clock = Clock()
        one = make(16000, clock=clock)
        other = SessionCompactor(
            one.options, state=one.state, outputs=None, judge=RulesJudge(), clock=clock
        )
        compacted = 0
        for k in range(20, 120):
            worker = (one, other)[k % 2]
            turn = await worker.compact("s", openai_chat.parse(chat(k)))
            compacted += turn.outcome == "compacted"
            if compacted == 1 and turn.outcome == "compacted":  # the first compaction's answer
                worker.observe_usage("s", 0, 0, Observed(reach=reach))
            if compacted == 2:
                return k, turn.decision
        return 120, None

    reached, decision = await second_compaction(None)
    assert decision == "pays"
    assert await second_compaction(1.0) == (reached, "pays")
    later, _ = await second_compaction(0.0)
    assert later > reached


async def test_a_transcript_the_provider_is_asked_to_summarize_goes_whole_unless_it_must_not() -> (
    None
):
    """No turn follows a summary request on its transcript: no compaction pays back, not even
    on a cold cache (the summary keeps only what it is shown); past the danger line it still
    runs, or the request would not fit."""
    wire = chat(18)
    trigger = between_the_lines(wire)
    clock = Clock()
    assert (await make(trigger, "none").compact("s", openai_chat.parse(wire))).decision == "pays"
    summary = await make(trigger, "none", clock).compact("s", openai_chat.parse(wire), last=True)
    assert summary.outcome == "passthrough" and summary.decision == "waits"
    compactor = make(trigger, clock=clock)
    await compactor.compact("s", openai_chat.parse(wire), last=True)
    clock.now += 400  # cold
    summary = await compactor.compact("s", openai_chat.parse(wire), last=True)
    assert summary.outcome == "passthrough" and summary.decision == "waits"
    past = await make(int(tokens_of(wire) / 1.25)).compact("s", openai_chat.parse(wire), last=True)
    assert past.outcome == "compacted" and past.decision == "forced"
