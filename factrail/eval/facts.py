"""Facts by hindsight: tokens a tool introduced that the agent later wrote itself.

A candidate token is a run of ≥ 6 chars holding a digit (`req-9f3c2a`, `10.0.3.7`) or a word of
≥ 8 chars holding `/`, `_` or `.` and no digit (`src/main_loop.rs`). Unlike the reference, the
trailing `.`, `:` and `,` are stripped *before* the length and class checks, so `returned.` and
`12345.` are not tokens. A fact is needed across a cut when a tool result before the cut
introduced it and the agent wrote it at or after the cut.

Visibility: `strict` (default) counts a fact as shown only when it is a whole candidate token of
the visible text; `compat` accepts any plain substring, as the reference does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from factrail.core.model import Action, Message, input_json

Visibility = Literal["strict", "compat"]

_DIGIT_RUN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@#-]{5,}")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{7,}")
_TRAILING = ".:,"
_DIGIT = re.compile(r"[0-9]")
_MARK = re.compile(r"[/_.]")


def candidate_tokens(s: str) -> set[str]:
    """Digit runs (≥ 6 chars) and marked words (≥ 8 chars), trailing `.:,` stripped first.
    (Every visible text of every simulated request goes through here: the checks are regex
    searches, not a Python loop over characters, which took a third of a simulation's time.)"""
    digit, mark = _DIGIT.search, _MARK.search
    runs = (m.rstrip(_TRAILING) for m in _DIGIT_RUN.findall(s))
    out = {t for t in runs if len(t) >= 6 and digit(t)}
    words = (m.rstrip(_TRAILING) for m in _WORD.findall(s))
    out.update(t for t in words if len(t) >= 8 and not digit(t) and mark(t))
    return out


def agent_text(m: Message) -> str:
    """What the agent wrote: its text, then a newline and the compact JSON of each call input."""
    return m.text + "".join("\n" + input_json(u) for u in m.tool_uses)


@dataclass(slots=True)
class Fact:
    """A token a tool result introduced and the agent used later."""

    token: str
    source: str
    """tool_use_id of the result that introduced it."""
    introduced: int
    uses: list[int] = field(default_factory=list)

    def needed_across(self, cut: int) -> bool:
        """Introduced before the cut and used at or after it."""
        return self.introduced < cut and any(u >= cut for u in self.uses)

    def echoed_before(self, cut: int) -> bool:
        """The agent had already written it before the cut (so it stays visible anyway)."""
        return any(u < cut for u in self.uses)


def facts(messages: Sequence[Message]) -> list[Fact]:
    """Every used token, in order of introduction."""
    intro: dict[str, Fact] = {}
    for i, m in enumerate(messages):
        if m.role == "user":
            for r in m.tool_results:
                for t in sorted(candidate_tokens(r.text)):
                    if t not in intro:
                        intro[t] = Fact(t, r.tool_use_id, i)
        else:
            for t in candidate_tokens(agent_text(m)):
                f = intro.get(t)
                if f is not None and f.introduced < i:
                    f.uses.append(i)
    return [f for f in intro.values() if f.uses]


def needed_across(all_facts: Iterable[Fact], cut: int) -> list[Fact]:
    """The facts at stake for a cut."""
    return [f for f in all_facts if f.needed_across(cut)]


def visible_text(messages: Sequence[Message]) -> str:
    """Text, inputs and results of every message, each followed by a newline (no mirrors)."""
    parts: list[str] = []
    for m in messages:
        parts.append(m.text + "\n")
        parts.extend(input_json(u) + "\n" for u in m.tool_uses)
        parts.extend(r.text + "\n" for r in m.tool_results)
    return "".join(parts)


class Shown:
    """Answers "is this token still visible?" for one transcript under a visibility mode."""

    def __init__(self, messages: Sequence[Message], visibility: Visibility = "strict") -> None:
        self.text = visible_text(messages)
        self.visibility = visibility
        self._tokens = candidate_tokens(self.text) if visibility == "strict" else None

    def __call__(self, token: str) -> bool:
        if self._tokens is not None:
            return token in self._tokens
        return token in self.text


@dataclass(frozen=True, slots=True)
class Labels:
    """Hindsight labels of one call at a cut."""

    keep_result: bool
    keep_call: bool

    @property
    def action(self) -> Action:
        """The decision these labels imply at threshold 0.5."""
        if self.keep_result:
            return "keep"
        return "drop_result" if self.keep_call else "drop_call"


def hindsight_labels(
    messages: Sequence[Message],
    cut: int,
    all_facts: Sequence[Fact] | None = None,
    visibility: Visibility = "compat",
) -> dict[str, Labels]:
    """Labels for every call before the cut, judged from the assistant messages after it.

    keep_result: one of its facts is needed across the cut, or a later call re-runs it exactly.
    keep_call: keep_result, or a token of its input shows in later agent text (substring under
    `compat` as the reference; whole-token under `strict`).
    """
    found = facts(messages) if all_facts is None else all_facts
    needed_sources = {f.source for f in needed_across(found, cut)}
    later = [m for m in messages[cut:] if m.role == "assistant"]
    reruns = {(u.tool, input_json(u)) for m in later for u in m.tool_uses}
    shown_later = Shown([Message("assistant", agent_text(m)) for m in later], visibility)
    labels: dict[str, Labels] = {}
    for m in messages[:cut]:
        for u in m.tool_uses:
            keep_result = u.tool_use_id in needed_sources or (u.tool, input_json(u)) in reruns
            keep_call = keep_result or any(shown_later(t) for t in candidate_tokens(input_json(u)))
            labels[u.tool_use_id] = Labels(keep_result, keep_call)
    return labels


def oracle_actions(
    messages: Sequence[Message],
    cut: int,
    pinned: Iterable[str] = (),
    all_facts: Sequence[Fact] | None = None,
) -> dict[str, Action]:
    """The hindsight decisions at a cut; pinned calls are kept."""
    labels = hindsight_labels(messages, cut, all_facts)
    actions: dict[str, Action] = {k: v.action for k, v in labels.items()}
    for tool_use_id in pinned:
        actions[tool_use_id] = "keep"
    return actions


def count_shown(at_stake: Iterable[Fact], shown: Shown) -> int:
    """How many facts are still visible."""
    return sum(1 for f in at_stake if shown(f.token))
