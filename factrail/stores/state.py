"""Per-session state: the reduction plan, hysteresis, taint, what the provider's usage taught
(calibration, cache reach) and remembered answers.

Losing this state costs prompt-cache hits and judge calls, never correctness, so every store
fails open: `load` returns None on any error and `save` swallows (and logs) failures.
Session keys arrive already hashed or sanitised; request bodies are never stored.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, Literal, Protocol, TypeGuard, TypeVar, get_args

import orjson

from factrail.core.plan import CallAnswer
from factrail.core.reapply import PlanEntry, Ref, seal
from factrail.policy.taint import holds_taint
from factrail.stores.schema import (
    ANSWERS_SCHEMA,
    PLAN_SCHEMA,
    STATE_SCHEMA,
    TURN_SCHEMA,
    VERSION,
    version_of,
)

T = TypeVar("T")
MAX_ANSWERS = 20_000
MAX_SETTLED = 50_000
MAX_HISTORY = 5
MAX_TURNS = 1000
"""The turn records a session's turn log keeps (the newest; `StateStore.turns`)."""
CALIBRATION_WEIGHT = 0.3
CALIBRATION_RANGE = (0.25, 4.0)
REACH_WEIGHT = 0.5
"""Each measured cache reach is averaged with the one before, so one miss of a best-effort cache
(a request routed to another machine) does not price the session as if it had none."""
REACH_RANGE = (0.0, 1.0)
ANSWER_FIELDS = ("keepCall", "keepResult")
ORIGINS = ("start", "continued")


Operation = Literal[
    "load", "save", "observe", "lease", "release", "link", "linked", "recent", "ping", "turns"
]
"""A store call, as its failures are counted (`factrail_state_store_errors_total{operation}`):
`observe` is what answers taught (calibration, cache reach, bill, turn log); `turns` reads the
turn log."""
OPERATIONS: tuple[Operation, ...] = get_args(Operation)


class StoreConfigError(ValueError):
    """A state store URL that names an unknown or not yet available backend."""


@dataclass(slots=True)
class Failures:
    """A store's failed calls: each one heard by `on_error(operation)` (a metric), logged as a
    warning on the first of a run of failures and at debug level until a call succeeds."""

    log: logging.Logger
    where: str
    """The store, as the log names it (a path, or a URL without credentials)."""
    on_error: Callable[[str], None] | None = None
    failing: bool = False

    def failed(self, operation: Operation, error: BaseException) -> None:
        level = logging.DEBUG if self.failing else logging.WARNING
        self.log.log(level, "state store %s failed (%s): %s", operation, self.where, error)
        self.failing = True
        if self.on_error is not None:
            self.on_error(operation)

    def succeeded(self) -> None:
        self.failing = False


@dataclass
class SessionState:
    """Everything remembered about one session between requests."""

    plan: dict[str, PlanEntry]  # tool_use_id -> how its result was reduced
    baseline_tokens: int | None = None  # estimated tokens right after the last compaction
    compactions: int = 0
    bets: int | None = 0
    """Of `compactions`, those the cost gate ran on a bet that they pay back (`pays`); the
    others were forced past the danger line or ran on a cold cache. A session that cost more
    than sent whole without a bet paid for staying under its trigger, not for a lost bet.
    None: not counted (a version-1 record with compactions and no `bets`)."""
    forced: int | None = 0
    """Of `compactions`, those the cost gate forced past the danger line (None: not counted, a
    record with compactions written before the count)."""
    cold: int | None = 0
    """Of `compactions`, those run on a cold cache (None: not counted, as `forced`)."""
    shadow: int = 0
    """Of `compactions`, those only projected in shadow mode (never sent)."""
    taint: dict[str, Any] | None = None
    """The sticky taint record (`policy.taint.taint_write`), kept as written."""
    calibration: float | None = None  # upstream prompt_tokens / our estimate, smoothed
    reach: float | None = None
    """The share of the unchanged prefix the provider read from its cache on the session's
    compactions, smoothed (None: never measured)."""
    cached: int | None = None
    """The input tokens the session's last answered turn read from the provider's cache (None:
    none reported yet)."""
    mark: dict[str, Any] | None = None
    """Where the gateway last put the frozen zone's cache marker (opaque to the step; see
    `app.cache_marks.Anchor`)."""
    billed: float | None = None
    """The billed-equivalent input tokens of the session's answered turns that factrail
    stepped, from the provider's own usage (None: none reported yet; `policy.cost`)."""
    spared: float | None = None
    """What those turns cost less than sent whole, estimated (`policy.cost.spared`; negative:
    the session has so far cost more through factrail)."""
    projected_billed: float | None = None
    """Shadow mode's projected bill: what the answered turns would have been billed had their
    projected compactions been sent (None: none reported yet)."""
    projected_spared: float | None = None
    """What those projected turns would have cost less than sent whole."""
    turns: int = 0
    """The answered turns `observe` counted (each one that brought a turn record)."""
    answers: dict[str, dict[str, float]] = field(default_factory=dict)  # see remember_answers
    updated_ms: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    """The last compactions, newest last, as `factrail inspect` shows them (each kept as
    written, with its version: `schema.COMPACTION_SCHEMA`)."""
    settled: list[str] = field(default_factory=list)
    """Calls an earlier compaction already decided (reduced or left as they were): frozen until
    the hard line, so a compaction breaks the prompt cache only from what is newer."""
    origin: str | None = None
    """How the session was first seen: `start` (its transcript from the beginning) or
    `continued` (the continuation of one not seen: a client's own compaction, an unknown
    response chain). Only a session seen from its start can be proven clean once its
    transcript no longer shows every call."""


class StateStore(Protocol):
    """Session state persistence (SQLite, memory; Redis later)."""

    def load(self, session: str) -> SessionState | None: ...
    def fetch(self, session: str) -> tuple[SessionState | None, bool]: ...
    def save(self, session: str, state: SessionState) -> None: ...
    def observe(self, session: str, observed: Observed) -> int | None:
        """Blend what an answer's usage taught into the session atomically (creating it if
        needed), appending its turn record (`Observed.turn`) to the session's turn log; a
        `save` never undoes it. Returns the cache read it replaced (None: it brings
        none, there was none, or the store failed)."""
        ...

    def lease(self, session: str, ttl_ms: int) -> str | None:
        """A token for the session's lease; None while another holder's runs; `""` when the
        store cannot say (the turn goes on without one: compaction fails open)."""
        ...

    def release(self, session: str, token: str) -> None: ...
    def link(self, response_id: str, session: str) -> None:
        """Remember that an answer id answered a request of `session` (for requests that
        continue it, with `previous_response_id` or an Anthropic thread's
        `previous_message_id`, on any worker or replica)."""
        ...

    def linked(self, response_id: str) -> str | None:
        """The session an answer id answered, if remembered."""
        ...

    def recent(self, limit: int) -> list[tuple[str, int]]: ...
    def turns(self, session: str, limit: int = MAX_TURNS) -> list[dict[str, Any]]:
        """The newest `limit` records of the session's turn log, oldest first, without their
        version (only those of `TURN_SCHEMA`); `[]` when none, or on any error."""
        ...

    def ping(self) -> bool: ...
    def close(self) -> None: ...


def _answer_key(tool_use_id: str, judge: str) -> str:
    return f"{tool_use_id}|{judge}"


def known_answers(state: SessionState, judge: str) -> dict[str, CallAnswer]:
    """The answers remembered from `judge` (its model and prompt version, `<model>|<version>`),
    by tool_use_id."""
    suffix = "|" + judge
    return {
        key[: -len(suffix)]: CallAnswer(keep_call=v["keepCall"], keep_result=v["keepResult"])
        for key, v in state.answers.items()
        if key.endswith(suffix)
    }


def remember_answers(state: SessionState, judge: str, new: Mapping[str, CallAnswer]) -> None:
    """Remember `judge`'s answers by tool_use_id, in sorted order; a re-answered call moves to
    the end; the oldest are dropped past the bound. Stored as `<tool_use_id>|<judge>` →
    `{"keepCall", "keepResult"}`."""
    for tool_use_id in sorted(new):
        answer = _answer(
            {"keepCall": new[tool_use_id].keep_call, "keepResult": new[tool_use_id].keep_result}
        )
        if answer is None:
            continue
        key = _answer_key(tool_use_id, judge)
        state.answers.pop(key, None)
        state.answers[key] = answer
    _trim_answers(state.answers)


@dataclass(frozen=True, slots=True)
class Observed:
    """What one answer's usage taught about its session (None: nothing of that kind)."""

    ratio: float | None = None
    """The upstream's prompt tokens over factrail's estimate (`SessionState.calibration`)."""
    reach: float | None = None
    """The share of the unchanged prefix a compaction turn read from the provider's cache
    (`SessionState.reach`)."""
    cached: int | None = None
    """The input tokens the turn read from the provider's cache (`SessionState.cached`)."""
    mark: dict[str, Any] | None = None
    """Where the gateway put the turn's cache marker (`SessionState.mark`)."""
    billed: float | None = None
    """The turn's billed-equivalent input tokens, added to `SessionState.billed`."""
    spared: float | None = None
    """What the turn cost less than sent whole, added to `SessionState.spared`."""
    projected_billed: float | None = None
    """Shadow mode's projected billed tokens, added to `SessionState.projected_billed`."""
    projected_spared: float | None = None
    """Shadow mode's projected sparing, added to `SessionState.projected_spared`."""
    turn: dict[str, Any] | None = None
    """The answered turn's record (small, JSON-serialisable): appended to the session's turn
    log (`StateStore.turns`) and counted in `SessionState.turns`."""


NOTHING = Observed()
"""An answer that taught its session nothing."""


def blend(
    previous: float | None, value: float, bounds: tuple[float, float], weight: float
) -> float | None:
    """`value`, clamped to `bounds`, blended into `previous` with `weight` (None, NaN and
    infinities are ignored)."""
    if not math.isfinite(value):
        return previous
    low, high = bounds
    value = min(max(value, low), high)
    if previous is None:
        return value
    return previous + weight * (value - previous)


def smooth_calibration(previous: float | None, ratio: float) -> float | None:
    """Blend a new `prompt_tokens / estimate` ratio into the previous one (None: ignore it)."""
    if ratio <= 0:
        return previous
    return blend(previous, ratio, CALIBRATION_RANGE, CALIBRATION_WEIGHT)


def take_observed(state: SessionState, observed: Observed) -> int | None:
    """Blend `observed` into `state`; the cache read it replaced (None: it brings none)."""
    if observed.ratio is not None:
        state.calibration = smooth_calibration(state.calibration, observed.ratio)
    if observed.reach is not None:
        state.reach = blend(state.reach, observed.reach, REACH_RANGE, REACH_WEIGHT)
    if observed.mark is not None:
        state.mark = dict(observed.mark)
    if observed.billed is not None and math.isfinite(observed.billed):
        state.billed = (state.billed or 0.0) + observed.billed
    if observed.spared is not None and math.isfinite(observed.spared):
        state.spared = (state.spared or 0.0) + observed.spared
    if observed.projected_billed is not None and math.isfinite(observed.projected_billed):
        state.projected_billed = (state.projected_billed or 0.0) + observed.projected_billed
    if observed.projected_spared is not None and math.isfinite(observed.projected_spared):
        state.projected_spared = (state.projected_spared or 0.0) + observed.projected_spared
    if observed.turn is not None:
        state.turns += 1
    if observed.cached is None or observed.cached < 0:
        return None
    previous, state.cached = state.cached, observed.cached
    return previous


OBSERVED_FIELDS = (
    "calibration",
    "reach",
    "cached",
    "mark",
    "billed",
    "spared",
    "projected_billed",
    "projected_spared",
    "turns",
)
"""The `SessionState` fields only `observe` writes (what answers taught the session)."""


def keep_observed(state: SessionState, stored: SessionState | None) -> SessionState:
    """`state` as a `save` writes it over `stored`: with the stored `OBSERVED_FIELDS`, which
    only `observe` writes (a turn never undoes what landed after its load)."""
    if stored is None:
        return state
    return replace(state, **{name: getattr(stored, name) for name in OBSERVED_FIELDS})


def without_observed(state: SessionState) -> SessionState:
    """`state` with its `OBSERVED_FIELDS` at their defaults (a store that keeps them apart)."""
    return replace(state, **_OBSERVED_DEFAULTS)


def with_observed(state: SessionState, stored: SessionState) -> SessionState:
    """`state` with each of the `OBSERVED_FIELDS` that `stored` holds (a store that keeps them
    apart)."""
    held = {name: getattr(stored, name) for name in OBSERVED_FIELDS}
    return replace(state, **{name: value for name, value in held.items() if value is not None})


def turn_blob(turn: Mapping[str, Any]) -> bytes | None:
    """A turn record as a turn log stores it (`schema.TURN_SCHEMA`); None when it cannot be
    serialised (the turn is counted, not logged)."""
    try:
        return orjson.dumps({**turn, VERSION: TURN_SCHEMA})
    except (orjson.JSONEncodeError, TypeError):
        return None


def decode_turn(blob: bytes | str) -> dict[str, Any] | None:
    """A stored turn record without its version; None when unreadable or of a version this
    reader does not know."""
    try:
        record = orjson.loads(blob)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict) or version_of(record) != TURN_SCHEMA:
        return None
    record.pop(VERSION, None)
    return record


def encode_state(state: SessionState) -> bytes:
    """The state as one JSON blob, a session record of version `STATE_SCHEMA` (answers
    trimmed to the bound)."""
    answers = dict(state.answers)
    _trim_answers(answers)
    plan = {
        key: _stored_entry(sealed)
        for key, entry in state.plan.items()
        if (sealed := seal(entry)) is not None
    }
    return orjson.dumps(
        {
            VERSION: STATE_SCHEMA,
            "plan": {VERSION: PLAN_SCHEMA, "entries": plan},
            "baseline_tokens": state.baseline_tokens,
            "compactions": state.compactions,
            "bets": state.bets,
            "forced": state.forced,
            "cold": state.cold,
            "shadow": state.shadow,
            "taint": state.taint,
            "calibration": state.calibration,
            "reach": state.reach,
            "cached": state.cached,
            "mark": state.mark,
            "billed": state.billed,
            "spared": state.spared,
            "projected_billed": state.projected_billed,
            "projected_spared": state.projected_spared,
            "turns": state.turns,
            "answers": {VERSION: ANSWERS_SCHEMA, "entries": answers},
            "updated_ms": state.updated_ms,
            "settled": state.settled[-MAX_SETTLED:],
            "history": state.history[-MAX_HISTORY:],
            "origin": state.origin,
        }
    )


def decode_state(blob: bytes | str) -> SessionState | None:
    """The state from a session record of version 1 or 2 (`schema.STATE_SCHEMA`); None when
    it is not a valid one, or is of a version this reader does not know."""
    try:
        raw = orjson.loads(blob)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(raw, dict):
        return None
    version = version_of(raw)
    if version == 1:
        plan = _plan_entries(raw.get("plan"), 1)
        answers = _answers(raw.get("answers"))
    elif version == 2:
        plan = _plan(raw.get("plan"))
        answers = _answers_record(raw.get("answers"))
    else:
        return None
    if plan is None:
        return None
    taint = raw.get("taint")
    calibration = raw.get("calibration")
    reach = raw.get("reach")
    origin = raw.get("origin")
    return SessionState(
        plan=plan,
        baseline_tokens=_int_or_none(raw.get("baseline_tokens")),
        compactions=_int_or_none(raw.get("compactions")) or 0,
        bets=_counted(raw, "bets"),
        forced=_counted(raw, "forced"),
        cold=_counted(raw, "cold"),
        shadow=_natural_or_zero(raw.get("shadow")),
        taint=taint if isinstance(taint, dict) else None,
        calibration=float(calibration) if _is_number(calibration) else None,
        reach=min(max(float(reach), 0.0), 1.0) if _is_number(reach) else None,
        cached=_int_or_none(raw.get("cached")),
        mark=raw["mark"] if isinstance(raw.get("mark"), dict) else None,
        billed=_finite(raw.get("billed")),
        spared=_finite(raw.get("spared")),
        projected_billed=_finite(raw.get("projected_billed")),
        projected_spared=_finite(raw.get("projected_spared")),
        turns=_natural_or_zero(raw.get("turns")),
        answers=answers,
        updated_ms=_int_or_none(raw.get("updated_ms")) or 0,
        settled=_of_type(raw.get("settled"), str, MAX_SETTLED),
        history=_of_type(raw.get("history"), dict, MAX_HISTORY),
        origin=origin if origin in ORIGINS else None,
    )


def kept_as_tainted(blob: bytes | str) -> bool:
    """Whether a stored session record is kept as a tainted one: its taint record says
    tainted (`policy.taint.holds_taint`), or the record is of a version this reader does not
    know (it may hold one). An undecodable record is garbage, not taint."""
    state = decode_state(blob)
    if state is not None:
        return holds_taint(state.taint)
    try:
        raw = orjson.loads(blob)
    except orjson.JSONDecodeError:
        return False
    return isinstance(raw, dict) and version_of(raw) not in (1, STATE_SCHEMA)


def _counted(raw: Mapping[str, Any], name: str) -> int | None:
    """A count of the record's compactions (`bets`, `forced`, `cold`); None when it has
    compactions and no count (a record written before the count, or null: a count carried
    over from one)."""
    count = _int_or_none(raw.get(name))
    if count is None and (_int_or_none(raw.get("compactions")) or 0) > 0:
        return None
    return count or 0


def _natural_or_zero(value: Any) -> int:
    return value if _natural(value) else 0


def _finite(value: Any) -> float | None:
    return float(value) if _is_number(value) else None


def _plan(record: Any) -> dict[str, PlanEntry] | None:
    """The plan of a version-2 session record: a plan record of version 2 (`PLAN_SCHEMA`);
    empty for a version this reader does not know; None when malformed."""
    if not isinstance(record, dict) or VERSION not in record:
        return None
    version = version_of(record)
    if version != 2:
        return {}
    return _plan_entries(record.get("entries"), version)


def _plan_entries(entries: Any, version: int) -> dict[str, PlanEntry] | None:
    """The entries of a plan of `version`; None when one is malformed."""
    if not isinstance(entries, dict):
        return None
    plan: dict[str, PlanEntry] = {}
    for key, item in entries.items():
        entry = _plan_entry(item, version)
        if entry is None:
            return None
        plan[key] = entry
    return plan


def _answers_record(record: Any) -> dict[str, dict[str, float]]:
    """The answers of a version-2 session record: an answers record of version 2
    (`ANSWERS_SCHEMA`); none for a version this reader does not know, or when malformed."""
    if not isinstance(record, dict) or version_of(record) != 2:
        return {}
    return _answers(record.get("entries"))


def _answers(entries: Any) -> dict[str, dict[str, float]]:
    """The valid answers of a map of them (the others dropped)."""
    answers: dict[str, dict[str, float]] = {}
    if isinstance(entries, dict):
        for key, value in entries.items():
            answer = _answer(value) if isinstance(value, dict) else None
            if answer is not None:
                answers[key] = answer
    return answers


def _stored_entry(entry: PlanEntry) -> dict[str, Any]:
    """A sealed plan entry as a version-2 plan stores it: `r` lists where its blanked secrets
    are (empty: it has none)."""
    return {
        "h": entry.original_hash,
        "t": entry.reduced_text,
        "i": entry.input,
        "r": [list(ref) for ref in entry.refs or ()],
    }


def _plan_entry(item: Any, version: int) -> PlanEntry | None:
    """An entry of a plan of `version`; None when malformed."""
    if not isinstance(item, dict):
        return None
    digest, text, briefed = item.get("h"), item.get("t"), item.get("i")
    if not isinstance(digest, str) or not isinstance(text, str):
        return None
    if briefed is not None and not isinstance(briefed, dict):
        return None
    if "r" not in item:
        if version != 1:
            return None
        # a version-1 entry not looked for secrets: `seal` looks at it when it is saved again
        return PlanEntry(digest, text, briefed)
    refs = _refs(item["r"])
    if refs is None:
        return None
    return PlanEntry(digest, text, briefed, refs, sealed=bool(refs))


def _refs(value: Any) -> tuple[Ref, ...] | None:
    """The stored refs of a sealed entry; None when malformed."""
    if not isinstance(value, list):
        return None
    refs: list[Ref] = []
    for ref in value:
        if not (isinstance(ref, list) and len(ref) == 4 and all(_natural(n) for n in ref)):
            return None
        leaf, start, end, at = ref
        if end < start:
            return None
        refs.append((leaf, start, end, at))
    return tuple(refs)


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _answer(value: Mapping[str, Any]) -> dict[str, float] | None:
    answer: dict[str, float] = {}
    for name in ANSWER_FIELDS:
        p = value.get(name)
        if not _is_number(p) or not 0.0 <= p <= 1.0:
            return None
        answer[name] = float(p)
    return answer


def _trim_answers(answers: dict[str, dict[str, float]]) -> None:
    excess = len(answers) - MAX_ANSWERS
    if excess > 0:
        for key in list(answers)[:excess]:
            del answers[key]


def _of_type(value: Any, kind: type[T], bound: int) -> list[T]:
    """The last `bound` items of a stored list that are of `kind` (nothing from a non-list)."""
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, kind)][-bound:]


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_OBSERVED_DEFAULTS: dict[str, Any] = {
    f.name: None if f.default is MISSING else f.default
    for f in fields(SessionState)
    if f.name in OBSERVED_FIELDS
}
"""Each of the `OBSERVED_FIELDS` at its default (all are plain values)."""
