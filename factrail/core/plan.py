"""The judge's plan: state fitting, windows, questions, batching and the typed decision.

`build_plan` turns a transcript into judge requests. Each request carries a state (the
conversation with every tool output replaced by a size note; result content is never included)
fitted under `max_state_tokens`, and two "noul" questions per candidate call. `Plan.decide` turns
the answers (or none, for the rules path) into one action per call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from factrail.core.model import Action, Message, ToolCall, collect_tool_calls, goal_from_messages
from factrail.core.model import is_pinned as _is_pinned
from factrail.core.text import abridge, compact_json, truncate
from factrail.core.tokens import estimate_tokens

Egress = Literal["full", "metadata"]
Reason = Literal["pinned", "kept", "result_dropped", "call_dropped", "reduced", "rules"]

STATE_CONTEXT = (
    "A coding assistant's conversation is being compacted to free room in its context. "
    "`history` is the whole conversation, oldest first; every tool output is replaced by a "
    "short `result` note and long texts may be abridged. Each question asks whether a tool "
    "call, or its full output, must stay verbatim. What is not kept is deleted for good, "
    "though the assistant can always re-run a tool or re-read a file."
)
"""The fixed framing at the head of every judge state."""

ENVELOPE_TOKENS = 20
"""Token overhead of a request envelope around its state and questions."""

_INPUT_CAPS = ((1000, "full"), (200, "inputs<=200"), (60, "inputs<=60"))
_ABRIDGE_OVER, _ABRIDGE_HEAD, _ABRIDGE_TAIL = 590, 400, 150
_ONE_LINE_INPUT_CHARS, _ONE_LINE_VALUE_CHARS = 60, 200


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactOptions:
    """Knobs of one compaction's plan (`factrail.settings.Settings.plan_options` holds their
    defaults); an empty goal means: derived from the last prompts."""

    goal: str = ""
    keep_threshold: float
    preserve_recent: int
    max_state_tokens: int
    max_request_tokens: int
    head_chars: int
    egress: Egress

    def __post_init__(self) -> None:
        if not 0.0 <= self.keep_threshold <= 1.0:
            raise ValueError("keep_threshold must lie in [0, 1]")


@dataclass(frozen=True, slots=True)
class CallAnswer:
    """The judge's two probabilities for one call."""

    keep_call: float
    keep_result: float


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    """One judge request: a fitted state and the questions about some of its calls."""

    state: dict[str, Any]
    questions: dict[str, dict[str, str]]
    state_tokens: int
    calls: list[tuple[str, str]]
    """(short id, tool_use_id) of every call this request asks about, in order."""


@dataclass(frozen=True, slots=True)
class CallDecision:
    """What happens to one call, and why."""

    id: str
    tool_use_id: str
    tool: str
    answer: CallAnswer | None
    action: Action
    reason: Reason


@dataclass(frozen=True, slots=True)
class Decisions:
    """One decision per paired call, the actions to apply and the freshly received answers."""

    decisions: list[CallDecision]
    actions: dict[str, Action]
    new_answers: dict[str, CallAnswer]

    def count(self, reason: Reason) -> int:
        """How many calls were decided for `reason`."""
        return sum(1 for d in self.decisions if d.reason == reason)

    @property
    def kept(self) -> int:
        return self.count("kept")

    @property
    def results_dropped(self) -> int:
        return self.count("result_dropped")

    @property
    def calls_dropped(self) -> int:
        return self.count("call_dropped")

    @property
    def pinned(self) -> int:
        return self.count("pinned")

    @property
    def rules(self) -> int:
        return self.count("rules")

    @property
    def reduced(self) -> int:
        return self.count("reduced")


class PlanError(Exception):
    """A single call's questions do not fit next to its state under `max_request_tokens`."""

    def __init__(self, state_tokens: int, max_request_tokens: int) -> None:
        super().__init__(
            f"no room for questions: state takes {state_tokens} tokens "
            f"of a {max_request_tokens}-token request"
        )
        self.state_tokens = state_tokens
        self.max_request_tokens = max_request_tokens


class StateTooLarge(Exception):
    """No fitting stage brings the state under `max_state_tokens`."""

    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(f"judge state of {tokens} tokens exceeds {limit}")
        self.tokens = tokens
        self.limit = limit


def questions_for(call: ToolCall) -> dict[str, dict[str, str]]:
    """The two noul questions about one call, keyed `call_<id>` and `result_<id>`."""
    return {
        f"call_{call.id}": {
            "type": "noul",
            "instructions": (
                f"Tool call {call.id} ({call.tool}) should stay in the history: knowing this "
                "call was made, with its input, still matters for what the assistant does next"
            ),
        },
        f"result_{call.id}": {
            "type": "noul",
            "instructions": (
                f"The full output of tool call {call.id} ({call.tool}, {call.result_chars} "
                "chars) should stay in the history verbatim: the assistant still needs its "
                "contents and re-running the tool would not do"
            ),
        },
    }


def result_note(call: ToolCall) -> str:
    """The stand-in for a tool output: its outcome and size, never its content."""
    return f"{'error' if call.is_error else 'ok'}, {call.result_chars} chars (omitted)"


def input_field(call: ToolCall, cap: int, egress: Egress) -> str:
    """A call's input as the state shows it: capped JSON, or only its shape under metadata."""
    raw = compact_json(call.input)
    if egress == "metadata":
        return compact_json({"kind": "object", "keys": sorted(call.input), "chars": len(raw)})
    return truncate(raw, cap)


def one_line(call: ToolCall, egress: Egress) -> str:
    """`<tN> <tool> <input ≤60> → <ok|error> <N>ch`; metadata shows only the sorted key names."""
    if egress == "metadata":
        brief = f"keys={','.join(sorted(call.input))}" if call.input else ""
    else:
        pairs = (
            f"{k}={truncate(v if isinstance(v, str) else compact_json(v), _ONE_LINE_VALUE_CHARS)}"
            for k, v in call.input.items()
        )
        brief = " ".join(" ".join(pairs).split())
    brief = truncate(brief, _ONE_LINE_INPUT_CHARS)
    head = " ".join(p for p in (call.id, call.tool, brief) if p)
    return f"{head} → {'error' if call.is_error else 'ok'} {call.result_chars}ch"


@dataclass(slots=True)
class _Entry:
    """One history entry while the state is being fitted."""

    index: int
    role: str
    text: str
    chars: int
    """Length of the original text (for the collapsed note)."""
    pinned: bool
    calls: list[ToolCall]
    lines: list[str] | None = None
    """One-line call strings once the entry's calls are compacted."""

    def render(self, cap: int, egress: Egress) -> dict[str, Any]:
        out: dict[str, Any] = {"i": self.index, "role": self.role, "text": self.text}
        if self.lines is not None:
            out["tool_calls"] = list(self.lines)
        elif self.calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "tool": c.tool,
                    "input": input_field(c, cap, egress),
                    "result": result_note(c),
                }
                for c in self.calls
            ]
        return out


@dataclass(frozen=True, slots=True)
class _Fitted:
    state: dict[str, Any]
    tokens: int
    stage: str


def _state(goal: str, history: list[dict[str, Any]]) -> dict[str, Any]:
    return {"context": STATE_CONTEXT, "goal": goal, "history": history}


def _cost(entry: dict[str, Any]) -> int:
    return estimate_tokens(compact_json(entry)) + 1


def fit_state(goal: str, entries: Sequence[_Entry], options: CompactOptions) -> _Fitted:
    """Shrink the state stage by stage until it fits; raise `StateTooLarge` if nothing does."""
    limit, egress = options.max_state_tokens, options.egress
    base = estimate_tokens(compact_json(_state(goal, [])))
    work = [replace(e, calls=list(e.calls)) for e in entries]

    for cap, stage in _INPUT_CAPS:
        costs = [_cost(e.render(cap, egress)) for e in work]
        if base + sum(costs) <= limit:
            return _Fitted(
                _state(goal, [e.render(cap, egress) for e in work]), base + sum(costs), stage
            )

    cap = _INPUT_CAPS[-1][0]
    cost = {id(e): _cost(e.render(cap, egress)) for e in work}

    def fits() -> bool:
        return base + sum(cost[id(e)] for e in work) <= limit

    def done(stage: str) -> _Fitted:
        history = [e.render(cap, egress) for e in work]
        return _Fitted(_state(goal, history), base + sum(_cost(h) for h in history), stage)

    def update(e: _Entry) -> None:
        cost[id(e)] = _cost(e.render(cap, egress))

    unpinned = [e for e in work if not e.pinned]
    ordered = unpinned + [e for e in work if e.pinned]
    steps: list[tuple[str, Iterable[_Entry], Callable[[_Entry], bool]]] = [
        ("texts-abridged", ordered, _abridge),
        ("old-messages-collapsed", unpinned, _collapse),
        ("old-calls-compacted", unpinned, lambda e: _compact_calls(e, egress)),
    ]
    for stage, scope, step in steps:
        for e in scope:
            if step(e):
                update(e)
                if fits():
                    return done(stage)

    for e in unpinned:
        if not e.calls:
            work.remove(e)
            if fits():
                return done("old-messages-left-out")

    work = _merge_runs(work)
    fitted = done("old-calls-merged")
    if fitted.tokens > limit:
        raise StateTooLarge(fitted.tokens, limit)
    return fitted


def _abridge(e: _Entry) -> bool:
    if len(e.text) <= _ABRIDGE_OVER:
        return False
    e.text = abridge(e.text, _ABRIDGE_HEAD, _ABRIDGE_TAIL)
    return True


def _collapse(e: _Entry) -> bool:
    note = f"[… {e.chars} chars omitted …]"
    if not e.text or len(note) >= len(e.text):
        return False
    e.text = note
    return True


def _compact_calls(e: _Entry, egress: Egress) -> bool:
    if not e.calls or e.lines is not None:
        return False
    e.lines = [one_line(c, egress) for c in e.calls]
    return True


def _merge_runs(entries: list[_Entry]) -> list[_Entry]:
    """Fold adjacent unpinned, textless, compacted entries of one role into one entry."""
    merged: list[_Entry] = []
    for e in entries:
        prev = merged[-1] if merged else None
        if (
            prev is not None
            and _mergeable(prev)
            and _mergeable(e)
            and prev.role == e.role
            and prev.lines is not None
            and e.lines is not None
        ):
            prev.lines = prev.lines + e.lines
            prev.calls = prev.calls + e.calls
        else:
            merged.append(e)
    return merged


def _mergeable(e: _Entry) -> bool:
    return not e.pinned and e.text == "" and e.lines is not None


def _entries(
    messages: Sequence[Message],
    visible: Iterable[ToolCall],
    shows_text: Callable[[int], bool],
    preserve_recent: int,
) -> list[_Entry]:
    by_message: dict[int, list[ToolCall]] = {}
    for c in visible:
        by_message.setdefault(c.call_index, []).append(c)
    total = len(messages)
    out: list[_Entry] = []
    for i, m in enumerate(messages):
        text = m.text if shows_text(i) else ""
        calls = by_message.get(i, [])
        if not text.strip() and not calls:
            continue
        pinned = _is_pinned(i, total, preserve_recent)
        out.append(_Entry(i, m.role, text, len(text), pinned, calls))
    return out


@dataclass(frozen=True, slots=True)
class Plan:
    """The calls of a transcript, the requests to ask about them, and how to decide."""

    calls: list[ToolCall]
    requests: list[JudgeRequest]
    options: CompactOptions
    known: dict[str, CallAnswer]
    reduced: frozenset[str]
    floor: frozenset[str] = field(default_factory=frozenset)
    stage: str = ""
    state_tokens: int = 0

    def decide(self, answers: Mapping[str, float] | None) -> Decisions:
        """Decide every call; `None` is the rules path (remembered answers ignored).

        With answers, a call whose two answers are present and finite in [0, 1] is judged
        (fresh answers first, then remembered ones); any other unpinned, unreduced call falls to
        the rules (`drop_result`).
        """
        fresh: dict[str, CallAnswer] = {}
        if answers is not None:
            for request in self.requests:
                for short, tool_use_id in request.calls:
                    keep_call = probability(answers.get(f"call_{short}"))
                    keep_result = probability(answers.get(f"result_{short}"))
                    if keep_call is not None and keep_result is not None:
                        fresh[tool_use_id] = CallAnswer(keep_call, keep_result)
        threshold = self.options.keep_threshold
        decisions: list[CallDecision] = []
        for c in self.calls:
            answer = fresh.get(c.tool_use_id) or self.known.get(c.tool_use_id)
            action: Action
            reason: Reason
            if c.pinned:
                action, reason = "keep", "pinned"
            elif c.tool_use_id in self.reduced:
                action, reason = "drop_result", "reduced"
            elif answers is not None and answer is not None:
                if answer.keep_result >= threshold:
                    action, reason = "keep", "kept"
                elif answer.keep_call >= threshold:
                    action, reason = "drop_result", "result_dropped"
                else:
                    action, reason = "drop_call", "call_dropped"
            else:
                action, reason = "drop_result", "rules"
            decisions.append(CallDecision(c.id, c.tool_use_id, c.tool, answer, action, reason))
        return Decisions(decisions, {d.tool_use_id: d.action for d in decisions}, fresh)


def probability(value: object) -> float | None:
    """`value` as a probability when it is a finite number in [0, 1], else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    p = float(value)
    return p if math.isfinite(p) and 0.0 <= p <= 1.0 else None


def _valid(answer: CallAnswer) -> bool:
    return probability(answer.keep_call) is not None and probability(answer.keep_result) is not None


def rules_actions(messages: Sequence[Message], preserve_recent: int) -> dict[str, Action]:
    """The rules without a plan: every unpinned call's result goes to the rails, pinned calls
    are kept, nothing is erased."""
    return {
        c.tool_use_id: "keep" if c.pinned else "drop_result"
        for c in collect_tool_calls(messages, preserve_recent)
    }


def build_plan(
    messages: Sequence[Message],
    options: CompactOptions,
    known_answers: Mapping[str, CallAnswer],
    reduced: Set[str],
) -> Plan:
    """Pair the calls, pick the candidates, fit their states and batch their questions.

    `reduced` holds the ids of results reduced by an earlier compaction (tracked by the caller);
    `known_answers` are remembered answers, reused and never re-asked.
    """
    calls = collect_tool_calls(messages, options.preserve_recent)
    known = {
        c.tool_use_id: known_answers[c.tool_use_id]
        for c in calls
        if not c.pinned and c.tool_use_id in known_answers and _valid(known_answers[c.tool_use_id])
    }
    done = frozenset(reduced)
    candidates = [
        c
        for c in calls
        if not c.pinned and c.tool_use_id not in done and c.tool_use_id not in known
    ]
    plan = Plan(calls, [], options, known, done)
    if not candidates:
        return plan
    goal = options.goal or goal_from_messages(messages)
    groups, floor = _windows(messages, calls, candidates, goal, options)
    requests = [r for cands, fitted in groups for r in _batch(cands, fitted, options)]
    stage = groups[0][1].stage if len(groups) == 1 and not floor else f"windows:{len(groups)}"
    if floor:
        stage += f" floor:{len(floor)}"
    return replace(
        plan,
        requests=requests,
        floor=frozenset(c.tool_use_id for c in floor),
        stage=stage,
        state_tokens=max((f.tokens for _, f in groups), default=0),
    )


def _windows(
    messages: Sequence[Message],
    calls: Sequence[ToolCall],
    candidates: list[ToolCall],
    goal: str,
    options: CompactOptions,
) -> tuple[list[tuple[list[ToolCall], _Fitted]], list[ToolCall]]:
    """One group when the whole history fits, else halving windows; unfittable calls: floor."""
    pr = options.preserve_recent
    try:
        whole = fit_state(goal, _entries(messages, calls, lambda _: True, pr), options)
        return [(candidates, whole)], []
    except StateTooLarge:
        pass
    total = len(messages)
    groups: list[tuple[list[ToolCall], _Fitted]] = []
    floor: list[ToolCall] = []

    def visit(group: list[ToolCall]) -> None:
        lo = min(c.call_index for c in group)
        hi = max(c.result_index for c in group)
        own = {c.tool_use_id for c in group}
        visible = [c for c in calls if c.pinned or c.tool_use_id in own]

        def shows(i: int) -> bool:
            return lo <= i <= hi or _is_pinned(i, total, pr)

        try:
            groups.append((group, fit_state(goal, _entries(messages, visible, shows, pr), options)))
        except StateTooLarge:
            if len(group) == 1:
                floor.append(group[0])
            else:
                for half in _halves(group):
                    visit(half)

    for half in _halves(candidates):
        visit(half)
    return groups, floor


def _halves(items: list[ToolCall]) -> list[list[ToolCall]]:
    cut = (len(items) + 1) // 2
    return [part for part in (items[:cut], items[cut:]) if part]


def _batch(
    candidates: list[ToolCall], fitted: _Fitted, options: CompactOptions
) -> list[JudgeRequest]:
    """Pack question pairs under `max_request_tokens` next to the group's state."""
    budget = max(0, options.max_request_tokens - (fitted.tokens + ENVELOPE_TOKENS))
    requests: list[JudgeRequest] = []
    questions: dict[str, dict[str, str]] = {}
    asked: list[tuple[str, str]] = []
    used = 0
    for c in candidates:
        pair = questions_for(c)
        cost = estimate_tokens(compact_json(pair))
        if asked and used + cost > budget:
            requests.append(JudgeRequest(fitted.state, questions, fitted.tokens, asked))
            questions, asked, used = {}, [], 0
        if not asked and cost > budget:
            raise PlanError(fitted.tokens, options.max_request_tokens)
        questions.update(pair)
        asked.append((c.id, c.tool_use_id))
        used += cost
    if asked:
        requests.append(JudgeRequest(fitted.state, questions, fitted.tokens, asked))
    return requests
