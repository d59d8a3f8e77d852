"""Re-applying a session's stored plan: the reductions of earlier turns, byte for byte.

Every tool result reduced in an earlier turn is replaced by the exact same reduced text, so the
upstream prompt prefix stays byte-identical from turn to turn and provider caches stay warm.

No secret of a result reaches the state store: an entry knows where each secret of its reduced
text and briefed arguments lies in the call's originals (`plan_entry`), a store keeps it sealed
(those chars blanked, `seal`), and re-applying fills them back from the originals the client
sends again (`unseal`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from factrail.core.model import Message
from factrail.core.redact import secret_spans

BLANK = "*"
"""What a sealed entry holds in place of each char of a secret."""

Ref = tuple[int, int, int, int]
"""(leaf, start, end, at): chars `start:end` of text `leaf` (0: the reduced text; 1…: the
briefed input's strings in order) are those from `at` on of its source (leaf 0: the original
result; the others: the original input's strings joined by NUL)."""


@dataclass(frozen=True)
class PlanEntry:
    """How one tool result was reduced: matched by tool_use_id and the hash of its original."""

    original_hash: str
    reduced_text: str
    input: dict[str, Any] | None = None
    """The briefed tool input, if the call's arguments were reduced too."""
    refs: tuple[Ref, ...] | None = field(default=None, compare=False)
    """Where each secret of `reduced_text` and `input` lies in the originals (None: not looked
    for, so the entry is stored only if it holds none)."""
    sealed: bool = field(default=False, compare=False)
    """Read from a store: the refs' chars are `BLANK`s until `unseal` fills them back."""


def text_hash(text: str) -> str:
    """Stable short hash (blake2b, 16 bytes, hex) of an original result text."""
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _leaves(value: Any) -> list[str]:
    """The strings inside a JSON value, in order (object keys aside)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _leaves(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _leaves(v)]
    return []


def _with_leaves(value: Any, leaves: list[str]) -> Any:
    """`value` with its strings taken, in order, from `leaves` (consumed)."""
    if isinstance(value, str):
        return leaves.pop(0)
    if isinstance(value, list):
        return [_with_leaves(v, leaves) for v in value]
    if isinstance(value, dict):
        return {k: _with_leaves(v, leaves) for k, v in value.items()}
    return value


def _secrets(text: str) -> set[str]:
    """The secrets `redact` finds in `text`."""
    return {text[start:end] for start, end in secret_spans(text)}


def _spans(text: str, secrets: set[str]) -> list[tuple[int, int]]:
    """Where `text` holds a secret: those `redact` finds in it, and every occurrence of the
    `secrets` of its original, which a reduction may quote out of context (`ids: …`)."""
    spans = secret_spans(text)
    for secret in secrets:
        at = text.find(secret)
        while at >= 0:
            spans.append((at, at + len(secret)))
            at = text.find(secret, at + 1)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _locate(leaf: int, text: str, source: str, secrets: set[str]) -> list[Ref]:
    """Refs placing each secret of `text` in `source`, in the longest pieces found there; a
    char not in `source` (a note, an ellipsis the reduction added) is no secret of it."""
    refs: list[Ref] = []
    for start, end in _spans(text, secrets):
        at = start
        while at < end:
            found = source.find(text[at:end])
            if found >= 0:
                refs.append((leaf, at, end, found))
                break
            low, high = 0, end - at  # a prefix of `low` chars is in `source`, one of `high` not
            while high - low > 1:
                mid = (low + high) // 2
                low, high = (mid, high) if text[at : at + mid] in source else (low, mid)
            if low:
                refs.append((leaf, at, at + low, source.find(text[at : at + low])))
            at += max(low, 1)
    return refs


def plan_entry(
    original: str, reduced: str, briefed: dict[str, Any] | None, call_input: Any
) -> PlanEntry:
    """The entry re-applying `reduced` (and the `briefed` arguments) over `original` (and the
    call's `call_input`), with where their secrets lie in those originals."""
    refs = _locate(0, reduced, original, _secrets(original))
    if briefed is not None:
        source = "\0".join(_leaves(call_input))
        secrets = _secrets(source)
        for i, leaf in enumerate(_leaves(briefed), 1):
            refs += _locate(i, leaf, source, secrets)
    return PlanEntry(text_hash(original), reduced, briefed, tuple(refs))


def _blank(text: str, spans: Sequence[tuple[int, int]]) -> str:
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces += (text[last:start], BLANK * (end - start))
        last = end
    return "".join((*pieces, text[last:]))


def _leaf_spans(refs: Sequence[Ref], leaf: int) -> list[tuple[int, int]]:
    return sorted((start, end) for i, start, end, _ in refs if i == leaf)


def seal(entry: PlanEntry) -> PlanEntry | None:
    """The entry as a store keeps it: each secret's chars blanked (None: it holds secrets
    nobody placed, so it cannot be kept)."""
    if entry.sealed:
        return entry
    if entry.refs is None:
        texts = [entry.reduced_text, *_leaves(entry.input)]
        return None if any(secret_spans(t) for t in texts) else replace(entry, refs=())
    if not entry.refs:
        return entry
    text = _blank(entry.reduced_text, _leaf_spans(entry.refs, 0))
    briefed = entry.input
    if briefed is not None:
        leaves = _leaves(briefed)
        leaves = [_blank(s, _leaf_spans(entry.refs, i)) for i, s in enumerate(leaves, 1)]
        briefed = _with_leaves(briefed, leaves)
    return PlanEntry(entry.original_hash, text, briefed, entry.refs, sealed=True)


def _fits(text: str, template: str, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether `text` is `template` with its blanked `spans` filled (by anything)."""
    if len(text) != len(template):
        return False
    last = 0
    for start, end in (*spans, (len(text), len(text))):
        if text[last:start] != template[last:start]:
            return False
        last = end
    return True


def _fill(template: str, refs: Sequence[Ref], leaf: int, source: str) -> str | None:
    pieces: list[str] = []
    last = 0
    for _, start, end, at in sorted(r for r in refs if r[0] == leaf):
        if at + end - start > len(source):
            return None
        pieces += (template[last:start], source[at : at + end - start])
        last = end
    return "".join((*pieces, template[last:]))


def unseal(entry: PlanEntry, result: str, call_input: Any) -> PlanEntry | None:
    """The sealed `entry` with its secrets filled back from the call as the client sent it:
    its original `result` (or the reduced text itself) and `call_input`; None when the call
    is not the one the entry was made for."""
    if not entry.sealed:
        return entry
    refs = entry.refs or ()
    if text_hash(result) == entry.original_hash:
        text = _fill(entry.reduced_text, refs, 0, result)
    elif _fits(result, entry.reduced_text, _leaf_spans(refs, 0)):
        text = result
    else:
        return None
    if text is None:
        return None
    briefed = entry.input
    if briefed is not None:
        sent = _leaves(call_input)
        templates = _leaves(briefed)
        if len(sent) == len(templates) and all(
            _fits(s, t, _leaf_spans(refs, i))
            for i, (s, t) in enumerate(zip(sent, templates, strict=True), 1)
        ):
            leaves: list[str | None] = list(sent)  # the client sent the briefed arguments back
        else:
            source = "\0".join(sent)
            leaves = [_fill(t, refs, i, source) for i, t in enumerate(templates, 1)]
        if any(leaf is None for leaf in leaves):
            return None
        briefed = _with_leaves(briefed, [leaf for leaf in leaves if leaf is not None])
    return PlanEntry(entry.original_hash, text, briefed, entry.refs)


def reapply_plan(
    messages: Sequence[Message], plan: MutableMapping[str, PlanEntry]
) -> tuple[list[Message], set[str]]:
    """Swap in every stored reduction whose original still hashes the same (or which the client
    sent back as it was sent): the messages to send and the ids re-applied.

    Both the reduced result text and the briefed arguments of the call are reproduced, so a turn
    that does not compact forwards the previous forwarded request, extended, byte for byte.
    Matching on the id *and* the hash means a reused tool-call id never picks up a wrong
    reduction. A sealed entry is unsealed in `plan` from the call the client sent; one whose
    call is there but cannot fill it is dropped. Messages without a planned result are shared,
    not copied.
    """
    if not plan:
        return list(messages), set()
    inputs = _sealed_inputs(messages, plan)
    out: list[Message] = []
    done: dict[str, str] = {}
    for m in messages:
        if not any(r.tool_use_id in plan for r in m.tool_results):
            out.append(m)
            continue
        copy = m.copy()
        for r in copy.tool_results:
            entry = plan.get(r.tool_use_id)
            if entry is None:
                continue
            if entry.sealed:
                opened = unseal(entry, r.text, inputs.get(r.tool_use_id))
                if opened is None:
                    if text_hash(r.text) == entry.original_hash:
                        del plan[r.tool_use_id]
                    continue
                entry = plan[r.tool_use_id] = opened
            if r.text != entry.reduced_text and text_hash(r.text) != entry.original_hash:
                continue
            done[r.tool_use_id] = r.text
            r.text = entry.reduced_text
        out.append(copy)
    for i, m in enumerate(out):
        if not any(u.tool_use_id in done for u in m.tool_uses):
            continue
        copy = m.copy()
        for u in copy.tool_uses:
            entry = plan.get(u.tool_use_id)
            if entry is None or u.tool_use_id not in done:
                continue
            if entry.input is not None:
                u.input = entry.input
            if u.text == done[u.tool_use_id]:
                u.text = entry.reduced_text
        out[i] = copy
    return out, set(done)


def _sealed_inputs(messages: Sequence[Message], plan: Mapping[str, PlanEntry]) -> dict[str, Any]:
    """The call inputs, as the client sent them, of the plan's sealed entries."""
    if not any(e.sealed for e in plan.values()):
        return {}
    return {
        u.tool_use_id: u.input
        for m in messages
        for u in m.tool_uses
        if (e := plan.get(u.tool_use_id)) is not None and e.sealed
    }
