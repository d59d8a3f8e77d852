"""The rails and their rivals, each run on the same prefix under the same decisions.

- `rails`: factrail's `apply` with the reference eval's reduction (target 0.3, hard 0.3).
- `erase`: the upstream fast-jev rule: a dropped result over 420 chars keeps its first 300 plus
  a truncation note; `drop_call` removes the call and its result.
- `clear-oldest`: Anthropic context editing: all but the newest 3 tool results cleared.
- `mask`: JetBrains observation masking: all but the newest 10 observations replaced.
- `middle-out`: whole messages dropped from the middle outwards (message 0 and the pinned tail
  stay, a call never loses its result or vice versa) until the rails' output size is reached.
- `none`: nothing removed.

Pinned messages (0 and the newest `PRESERVE_RECENT`) are never touched by any rival.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from factrail.core.apply import Applied, Reduction, apply
from factrail.core.model import Action, Message, is_pinned, transcript_tokens

Strategy = Callable[[Sequence[Message], Mapping[str, Action]], list[Message]]

PRESERVE_RECENT = 6
RAILS_REDUCTION = Reduction(0.3, 0.3)
ERASE_HEAD = 300
ERASE_SLACK = 120
CLEAR_KEEP = 3
CLEARED = "[Tool result cleared]"
MASK_KEEP = 10
MASKED = "[Old tool output omitted]"
NAMES = ("rails", "erase", "clear-oldest", "mask", "middle-out", "none")


def rails(messages: Sequence[Message], actions: Mapping[str, Action]) -> Applied:
    """factrail's rails at the eval's fixed reduction."""
    return apply(messages, actions, reduction=RAILS_REDUCTION)


def erase_text(text: str) -> str:
    """The fast-jev truncation of one result (unchanged up to 420 chars)."""
    if len(text) <= ERASE_HEAD + ERASE_SLACK:
        return text
    cut = len(text) - ERASE_HEAD
    return (
        text[:ERASE_HEAD] + f"\n[fast-jev-compaction truncated {cut} chars of this tool result;"
        " re-run the tool if needed]"
    )


def erase(messages: Sequence[Message], actions: Mapping[str, Action]) -> list[Message]:
    """Truncate dropped results, remove erased calls, drop messages left empty."""
    out: list[Message] = []
    for m in messages:
        c = m.copy()
        c.tool_uses = [u for u in c.tool_uses if actions.get(u.tool_use_id) != "drop_call"]
        c.tool_results = [r for r in c.tool_results if actions.get(r.tool_use_id) != "drop_call"]
        for r in c.tool_results:
            if actions.get(r.tool_use_id) == "drop_result":
                r.text = erase_text(r.text)
        if c.text.strip() or c.tool_uses or c.tool_results:
            out.append(c)
    return out


def _replace_older(messages: Sequence[Message], keep: int, placeholder: str) -> list[Message]:
    """Replace every unpinned tool result except the newest `keep` with `placeholder`."""
    out = [m.copy() for m in messages]
    positions = [(i, j) for i, m in enumerate(out) for j in range(len(m.tool_results))]
    older = positions[: max(len(positions) - keep, 0)]
    for i, j in older:
        if not is_pinned(i, len(out), PRESERVE_RECENT):
            out[i].tool_results[j].text = placeholder
    return out


def clear_oldest(messages: Sequence[Message], actions: Mapping[str, Action]) -> list[Message]:
    """Anthropic context editing (`clear_tool_uses`, keep 3): older results cleared."""
    return _replace_older(messages, CLEAR_KEEP, CLEARED)


def mask(messages: Sequence[Message], actions: Mapping[str, Action]) -> list[Message]:
    """JetBrains observation masking (window 10): older observations replaced."""
    return _replace_older(messages, MASK_KEEP, MASKED)


def none(messages: Sequence[Message], actions: Mapping[str, Action]) -> list[Message]:
    """Nothing removed."""
    return [m.copy() for m in messages]


def _pair_groups(messages: Sequence[Message]) -> list[list[int]]:
    """Message indices joined whenever they share a tool_use_id (a call and its result)."""
    parent = list(range(len(messages)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, m in enumerate(messages):
        ids = [u.tool_use_id for u in m.tool_uses] + [r.tool_use_id for r in m.tool_results]
        for tool_use_id in ids:
            j = owner.setdefault(tool_use_id, i)
            parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(messages)):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def middle_out(budget_tokens: int) -> Strategy:
    """Drop whole message groups nearest the middle first until `budget_tokens` is met."""

    def run(messages: Sequence[Message], actions: Mapping[str, Action]) -> list[Message]:
        n = len(messages)
        sizes = [transcript_tokens([m]) for m in messages]
        total = sum(sizes)
        droppable = [
            g
            for g in _pair_groups(messages)
            if not any(is_pinned(i, n, PRESERVE_RECENT) for i in g)
        ]
        droppable.sort(key=lambda g: min(abs(2 * i - n) for i in g))
        dropped: set[int] = set()
        for g in droppable:
            if total <= budget_tokens:
                break
            dropped.update(g)
            total -= sum(sizes[i] for i in g)
        return [m.copy() for i, m in enumerate(messages) if i not in dropped]

    return run


RIVALS: dict[str, Strategy] = {
    "erase": erase,
    "clear-oldest": clear_oldest,
    "mask": mask,
    "none": none,
}
"""The rivals that need nothing but the messages and decisions (middle-out needs a budget)."""
