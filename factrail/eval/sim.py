"""`factrail eval --sim`: repeated in-flight compaction, one request per assistant turn.

For a transcript of E estimated tokens replayed at a length of L windows, the window is E/L tokens
and the trigger 0.6 of it. The agent sends `messages[:i]` before every assistant message i. The
rails go through `SessionCompactor` — the gateway's own code path: soft line, hard line,
hysteresis and re-application of the stored plan — so what is measured is what the proxy does,
down to the notes: unless `save_outputs` is off, every reduced original is saved (to a temporary
folder) and its note names the saved copy as the gateway's notes do.
Rival strategies are applied to every request once its context is past the soft line, as a
stateless proxy or a context-editing API would, under the rules' decisions with the reference's
pinned tail (`strategies.PRESERVE_RECENT`, 6 messages) whatever factrail's own
`preserve_recent`: a rival's rule does not change with factrail's settings.

Per strategy and length it reports:
- `needed`/`kept`/`rate`: uses of facts (a token a tool result introduced, written by the agent at
  turn i) in requests whose full context was past the soft line, and how many were still visible
  in what the strategy sent — the facts kept at the moment of use;
- `compactions`: requests whose prefix broke against the previous request (a prompt-cache miss
  from that point on; for the rails this is exactly the compactions);
- `peak_fill`: the largest request over the window (`peak_fill_median`: the median over
  transcripts of each one's largest; `over_window`: transcripts whose largest request did not
  fit the window);
- `cache_share`: the share of input tokens that is a byte-identical prefix of the previous
  request; `billed`: input billed under a price profile (`anthropic` by default: cached reads
  0.1×, the rest written at 1.25×; `openai`: cached 0.5×; `none`: no cache), in token-units;
  `billed_ratio`: that over sending everything, as an agent would, under the same profile;
- `compactions_per_session`: prefix breaks per transcript;
- on the `none` rows, `soft_floor`: the least billed ratio of any strategy that sends requests as
  they are below the soft line (as factrail does) and past it keeps nothing but the text of each
  older message (no result, no argument), forwarding each new message whole — a lower bound that
  ignores even the one write of what it cut; and `floor_at_goal` (`cache_floor`).
"""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import accumulate
from pathlib import Path
from typing import Any

from factrail import runtime
from factrail.core.model import Action, Message, input_json, transcript_tokens
from factrail.core.plan import rules_actions
from factrail.core.tokens import TokenCache
from factrail.eval.facts import Fact, Visibility, candidate_tokens, facts
from factrail.eval.strategies import (
    NAMES,
    PRESERVE_RECENT,
    clear_oldest,
    erase,
    mask,
    middle_out,
)
from factrail.policy.cost import Prices, Profile, prices
from factrail.policy.trigger import soft_line
from factrail.session import EngineOptions
from factrail.settings import Settings
from factrail.stores.outputs import OutputStore

LENGTHS = (0.8, 1.0, 1.2, 1.5)
SIM_SECRET = hashlib.sha256(b"factrail eval --sim").digest()
"""Keys the capabilities the sim's notes name: fixed, so that a run is reproducible (how many
tokens a capability costs depends on its digits), and worth nothing outside the temporary
folder it saves to."""
TRIGGER_SHARE = 0.6

Strategy = Callable[[Sequence[Message], Mapping[str, Action]], list[Message]]


@dataclass(slots=True)
class SimRow:
    """One transcript at one length under one strategy."""

    transcript: str
    length: float
    strategy: str
    requests: int = 0
    compactions: int = 0
    needed: int = 0
    kept: int = 0
    peak_fill: float = 0.0
    sent_tokens: int = 0
    cached_tokens: int = 0
    billed: float = 0.0
    billed_everything: float = 0.0
    floor: float = 0.0
    """On the `none` row: what `soft_floor` bills (see `totals`)."""
    bets: int = 0
    """On the `rails` row: compactions the cost gate ran on a bet (`pays`), not because the
    request was past the danger line or the cache was cold."""
    lost: list[str] = field(default_factory=list)


class EngineDocument:
    """A transcript already in the engine's model (the sim's requests need no wire format)."""

    format = "engine"
    live = 0

    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = list(messages)
        self.system_texts: list[str] = []

    def emit(self, messages: Sequence[Message]) -> list[Message]:
        return list(messages)


@lru_cache(maxsize=4096)
def _tokens_of(text: str) -> frozenset[str]:
    return frozenset(candidate_tokens(text))


def is_shown(token: str, messages: Sequence[Message], visibility: Visibility) -> bool:
    """Whether the token is visible anywhere in what was sent (strict: as a whole token)."""
    for m in messages:
        texts = [m.text, *(r.text for r in m.tool_results)]
        texts.extend(input_json(u) for u in m.tool_uses)
        for t in texts:
            if token in t and (visibility == "compat" or token in _tokens_of(t)):
                return True
    return False


class _Meter:
    """Token accounting shared by every strategy of one transcript."""

    def __init__(self) -> None:
        self.count = TokenCache(min_len=64)

    def message(self, m: Message) -> int:
        return transcript_tokens([m], self.count)

    def total(self, messages: Sequence[Message]) -> int:
        return transcript_tokens(messages, self.count)


def _uses_by_turn(all_facts: Iterable[Fact]) -> dict[int, list[Fact]]:
    uses: dict[int, list[Fact]] = {}
    for f in all_facts:
        for i in f.uses:
            uses.setdefault(i, []).append(f)
    return uses


def shared_prefix(previous: Sequence[object], current: Sequence[object]) -> int:
    """How many leading items two requests share (what a provider's prompt cache re-reads)."""
    n = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        n += 1
    return n


class _Run:
    """Accumulates one strategy's requests for one transcript and length."""

    def __init__(self, row: SimRow, window: float, meter: _Meter, price: Prices) -> None:
        self.row = row
        self.window = window
        self.meter = meter
        self.price = price
        self.previous: list[Message] = []

    def request(
        self,
        sent: Sequence[Message],
        full_tokens: int,
        previous_full: int,
        at_stake: Sequence[Fact],
        visibility: Visibility,
    ) -> None:
        row = self.row
        sizes = [self.meter.message(m) for m in sent]
        tokens = sum(sizes)
        shared = shared_prefix(self.previous, sent)
        cached = sum(sizes[:shared])
        if self.previous and shared < len(self.previous):
            row.compactions += 1
        row.requests += 1
        row.sent_tokens += tokens
        row.cached_tokens += cached
        row.billed += self.price.billed(cached, tokens - cached)
        row.billed_everything += self.price.billed(previous_full, full_tokens - previous_full)
        row.peak_fill = max(row.peak_fill, tokens / self.window if self.window else 0.0)
        for f in at_stake:
            row.needed += 1
            if is_shown(f.token, sent, visibility):
                row.kept += 1
            else:
                row.lost.append(f.token)
        self.previous = list(sent)


def options_at(options: EngineOptions, trigger: int, window: float) -> EngineOptions:
    """`options` with one trigger and one window for every model, and no re-arm gap: how the
    simulation replays a transcript at a length."""
    return replace(
        options,
        trigger=replace(
            options.trigger,
            tokens=trigger,
            percent=0.0,
            rearm=0,
            by_model={},
            windows={"": int(window)},  # every model: this length's window
        ),
    )


async def simulate(
    name: str,
    messages: Sequence[Message],
    options: EngineOptions,
    *,
    lengths: Sequence[float] = LENGTHS,
    strategies: Sequence[str] = ("rails", "erase", "clear-oldest", "mask", "middle-out", "none"),
    visibility: Visibility = "strict",
    profile: Profile = "anthropic",
    cache_ttl_s: float | None = None,
    model: str = "",
    settings: Settings | None = None,
) -> list[SimRow]:
    """Every (length, strategy) row for one transcript; the rails run as the gateway would
    under `options`, at a trigger of 0.6 of each length's window (outputs saved to a temporary
    folder when `options.save_outputs`). `cache_ttl_s`: the cache lifetime the simulated client
    asks for (3600: Anthropic's one-hour cache, whose writes cost 2× input); `model`: the model
    it asks for (the profile's prices for it, and what the rails' gate is told). `settings`
    (default: the environment's) are what the runtime builds the rest from: the rules judge and
    a state store in memory whatever they name."""
    price = prices(profile, model, cache_ttl_s, options.model_prices)
    base = settings if settings is not None else Settings()
    sim = base.model_copy(update={"state_url": "memory://", "judge": "rules"})
    with tempfile.TemporaryDirectory(prefix="factrail-sim-") as folder:
        outputs = OutputStore(Path(folder), secret=SIM_SECRET) if options.save_outputs else None
        pricing = (price, cache_ttl_s, model)
        return await _simulate(name, messages, replace(options, price_profile=profile), outputs,
                               lengths, strategies, visibility, pricing, sim)  # fmt: skip


async def _simulate(
    name: str,
    messages: Sequence[Message],
    options: EngineOptions,
    outputs: OutputStore | None,
    lengths: Sequence[float],
    strategies: Sequence[str],
    visibility: Visibility,
    pricing: tuple[Prices, float | None, str],
    settings: Settings,
) -> list[SimRow]:
    price, cache_ttl_s, model = pricing
    meter = _Meter()
    total = meter.total(messages)
    uses = _uses_by_turn(facts(messages))
    rows: list[SimRow] = []
    # texts[i]: the tokens of the text of the first i messages (no result, no argument).
    texts = list(accumulate((meter.message(Message(m.role, m.text)) for m in messages), initial=0))
    for length in lengths:
        window = total / length if length > 0 else float(total)
        trigger = int(TRIGGER_SHARE * window)
        soft = soft_line(trigger)
        runs = {s: _Run(SimRow(name, length, s), window, meter, price) for s in strategies}
        at_length = options_at(options, trigger, window)
        compactor = runtime.compactor(
            settings,
            judge=runtime.judge(settings).required(),
            state=runtime.state_store(settings),
            outputs=outputs,
            options=at_length,
        )
        rivals: dict[str, Strategy] = {
            "erase": erase,
            "clear-oldest": clear_oldest,
            "mask": mask,
            "middle-out": middle_out(int(soft)),
        }
        previous_full = previous_i = 0
        for i, m in enumerate(messages):
            if m.role != "assistant" or i < 2:
                continue
            context = list(messages[:i])
            full = meter.total(context)
            pressured = full >= soft
            if "none" in runs:
                runs["none"].row.floor += _floor_turn(
                    price, full, previous_full, texts[previous_i], pressured
                )
            at_stake = [f for f in uses.get(i, ()) if f.introduced < i] if pressured else []
            for s, run in runs.items():
                sent: Sequence[Message]
                if s == "rails":
                    doc = EngineDocument(context)
                    result = await compactor.compact(
                        name, doc, model=model, cache_ttl_s=cache_ttl_s
                    )
                    sent = result.document if result.document is not None else context
                elif s == "none" or not pressured:
                    sent = context
                else:
                    sent = rivals[s](context, rules_actions(context, PRESERVE_RECENT))
                run.request(sent, full, previous_full, at_stake, visibility)
            previous_full, previous_i = full, i
        if "rails" in runs and (state := compactor.state.load(name)) is not None:
            runs["rails"].row.bets = state.bets or 0  # the step counts them
        compactor.close()
        rows.extend(run.row for run in runs.values())
    return rows


def _floor_turn(
    price: Prices, full: int, previous_full: int, older_texts: int, pressured: bool
) -> float:
    """One turn of `soft_floor`: everything's bill below the soft line; past it the new tokens
    written once and, read from the cache, only the texts of the messages before them
    (`older_texts` tokens)."""
    if not pressured:
        return price.billed(previous_full, full - previous_full)
    return price.billed(older_texts, full - previous_full)


ABOVE_TOLERANCE = 1e-9
"""A session bills above sending everything only by more than rounding."""


def totals(rows: Sequence[SimRow]) -> dict[str, Any]:
    """Per strategy and length: summed counts, rates, max peak fill, cache share, billed ratio,
    `above`: the sessions that billed more than sending them everything would, and
    `above_unbet`: those of them the rails never compacted on a bet (only past the danger line
    or on a cold cache: no payback horizon keeps them under)."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        key = f"{r.length:g}"
        t = out.setdefault(r.strategy, {}).setdefault(
            key,
            {
                "compactions": 0,
                "needed": 0,
                "kept": 0,
                "peak_fill": 0.0,
                "_sent": 0,
                "_cached": 0,
                "_billed": 0.0,
                "_everything": 0.0,
                "_floor": 0.0,
                "_peaks": [],
                "sessions": 0,
                "above": 0,
                "above_unbet": 0,
            },
        )
        t["_peaks"].append(r.peak_fill)
        t["compactions"] += r.compactions
        t["needed"] += r.needed
        t["kept"] += r.kept
        t["peak_fill"] = max(t["peak_fill"], r.peak_fill)
        t["_sent"] += r.sent_tokens
        t["_cached"] += r.cached_tokens
        t["_billed"] += r.billed
        t["_everything"] += r.billed_everything
        t["_floor"] += r.floor
        t["sessions"] += 1
        above = r.billed > r.billed_everything * (1 + ABOVE_TOLERANCE)
        t["above"] += above
        t["above_unbet"] += above and not r.bets
    for by_length in out.values():
        for t in by_length.values():
            peaks = sorted(t.pop("_peaks"))
            t["peak_fill_median"] = peaks[len(peaks) // 2] if peaks else 0.0
            t["over_window"] = sum(p > 1.0 for p in peaks)
            t["rate"] = t["kept"] / t["needed"] if t["needed"] else 1.0
            t["cache_share"] = t.pop("_cached") / t["_sent"] if t["_sent"] else 0.0
            t.pop("_sent")
            t["billed"] = round(t["_billed"])
            t["billed_ratio"] = t.pop("_billed") / t["_everything"] if t["_everything"] else 0.0
            floor = t.pop("_floor")
            if floor > 0 and t["_everything"]:
                t["soft_floor"] = floor / t["_everything"]
            t.pop("_everything")
            t["compactions_per_session"] = t["compactions"] / t["sessions"] if t["sessions"] else 0
    return out


CACHE_SHARE_GOAL = 0.95


def cache_floor(new_share: float, price: Prices, share: float = CACHE_SHARE_GOAL) -> float:
    """The least billed ratio (over sending everything) of any strategy that forwards every new
    message whole, once, at a prefix-cache share of at least `share`; `new_share` is the share
    of everything's input that is new (its own uncached share). Each new token is uncached once
    whatever a strategy does (n of them); at a cache share of `share` a strategy sends at least
    n / (1 − share) tokens, the rest read from the cache: billed ≥ n·(cached·share/(1 − share) +
    write), against everything's billed (1 − new)·cached + new·write per token it sends."""
    if not 0 < share < 1 or new_share <= 0:
        return 0.0
    floor = new_share * (price.cached * share / (1 - share) + price.write)
    everything = (1 - new_share) * price.cached + new_share * price.write
    return floor / everything


def with_floors(
    out: dict[str, Any],
    profile: Profile,
    cache_ttl_s: float | None = None,
    model: str = "",
    overrides: Mapping[str, Prices] | None = None,
) -> dict[str, Any]:
    """`totals` with, on each length of the `none` rows, `floor_at_goal`: `cache_floor` of
    that length (what the cache-share goal alone costs at least)."""
    price = prices(profile, model, cache_ttl_s, overrides)
    for t in out.get("none", {}).values():
        t["floor_at_goal"] = cache_floor(1 - t["cache_share"], price)
    return out


def run_sim(
    transcripts: Iterable[tuple[str, Sequence[Message]]],
    options: EngineOptions,
    *,
    lengths: Sequence[float] = LENGTHS,
    strategies: Sequence[str] = NAMES,
    visibility: Visibility = "strict",
    profile: Profile = "anthropic",
    cache_ttl_s: float | None = None,
    model: str = "",
    progress: Callable[[Iterable[Any]], Iterable[Any]] | None = None,
    settings: Settings | None = None,
) -> tuple[list[SimRow], dict[str, Any]]:
    """Simulate every transcript; return the rows and the per-strategy totals."""
    unknown = set(strategies) - set(NAMES)
    if unknown:
        raise ValueError(f"unknown strategies: {sorted(unknown)}")
    base = settings if settings is not None else Settings()

    async def go() -> list[SimRow]:
        rows: list[SimRow] = []
        items: Iterable[tuple[str, Sequence[Message]]] = transcripts
        if progress is not None:
            items = progress(items)
        for name, messages in items:
            rows.extend(
                await simulate(
                    name,
                    messages,
                    options,
                    lengths=lengths,
                    strategies=strategies,
                    visibility=visibility,
                    profile=profile,
                    cache_ttl_s=cache_ttl_s,
                    model=model,
                    settings=base,
                )
            )
        return rows

    rows = asyncio.run(go())
    return rows, with_floors(totals(rows), profile, cache_ttl_s, model, options.model_prices)
