"""Learned token value: how likely the agent is to use a candidate token of a result later.

Each candidate token (`factrail.core.candidate_tokens`) of a result gets a value from a
standardised logistic regression (13 features; fitted upstream on 191,076 tokens of 85 agent
transcripts, label: the agent used the token after compaction), from the token itself, its count
and place in the result, whether the call's input or the user named it, the result's distance
from the end and whether the agent has since said it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from ahocorasick import Automaton

from factrail.core.candidate_tokens import Tokens, token_occurrences, toks
from factrail.core.kernels import active
from factrail.core.model import Message, ToolUse, input_json

_K = active()

INTERCEPT = -2.884622
MU = (0.400888, 0.240747, 0.240281, 0.016752, 2.832681, 0.13081, 0.871874, 0.004401, 0.007997,
      3.024303, 0.478259, 9.281838, 0.050729)  # fmt: skip
SD = (0.490078, 0.427537, 0.427254, 0.128343, 0.642327, 0.239112, 0.385938, 0.066197, 0.089067,
      0.954716, 0.292466, 1.062772, 0.219443)  # fmt: skip
BETA = (-0.227483, 0.122111, -0.003107, 0.097325, -0.170036, -0.058623, 0.360508, 0.183316,
        0.152196, -0.008517, -0.118614, -0.332467, 0.520239)  # fmt: skip
_W = tuple(b / s for b, s in zip(BETA, SD, strict=True))
_Z0 = INTERCEPT - sum(w * m for w, m in zip(_W, MU, strict=True))

_HEX_CHARS = "0123456789abcdefABCDEF"


@dataclass(frozen=True, slots=True)
class ValueContext:
    """What the agent saw around one result: its call's input, the user prompt, reuse."""

    input: str
    user: str
    dist: int
    reused: frozenset[str]
    quoted: frozenset[str] = frozenset()
    """The tokens this result was the first to show (outside its call's input) that the agent
    has since written: the facts it drew from this output."""


def message_contexts(
    messages: Sequence[Message],
    tokens: Tokens = toks,
    text_tokens: Callable[[str], Collection[str]] | None = None,
    input_text: Callable[[ToolUse], str] = input_json,
) -> dict[str, ValueContext]:
    """The value context of every result, by tool_use_id (a later duplicate wins).

    `text_tokens(text)` is `toks(text)` of a whole output, from a memo the caller keeps anyway
    (its token scans): with the C kernels, scanning each output once beats finding what the
    agent said in them with an Aho–Corasick pass (pyahocorasick walks non-ASCII text slowly).
    `input_text` is `input_json`, or the caller's memo of it.
    """
    outs: list[tuple[int, str, str, str]] = []  # (event index, id, text, last input)
    spoken: list[tuple[int, str]] = []  # assistant texts and inputs, by event index
    own_input: dict[str, str] = {}  # each call's own input, by tool_use_id
    user = ""
    last_input = ""
    n = 0
    for m in messages:
        if m.role == "user":
            if not m.tool_results:
                user = m.text
                n += 1
            for r in m.tool_results:
                outs.append((n, r.tool_use_id, r.text, last_input))
                n += 1
        else:
            spoken.append((n, m.text))
            n += 1
            for u in m.tool_uses:
                last_input = own_input[u.tool_use_id] = input_text(u)
                spoken.append((n, last_input))
                n += 1
    said = sum(len(text) for _, text in spoken)
    if said <= sum(len(text) for _, _, text, _ in outs):
        # Tokenise what the agent said; find those tokens in the (larger) outputs.
        last_said: dict[str, int] = {}
        for i, text in spoken:
            for t in tokens(text):
                last_said[t] = i
        if text_tokens is not None and _K.token_scan is not None:  # scans are cheap
            intro = _first_holding(((i, text) for i, _, text, _ in outs), last_said, text_tokens)
        else:
            intro = _first_held(((i, text) for i, _, text, _ in outs), last_said.keys(), tokens)
    else:
        # Tokenise the outputs; find those tokens in what the agent said (a write's input may
        # be a whole file), newest first: the first found is the last said.
        intro = {}
        for i, _, text, _ in outs:
            for t in tokens(text):
                intro.setdefault(t, i)
        last_said = _first_held(reversed(spoken), intro.keys(), tokens)
    reused = frozenset(t for t, i in intro.items() if t in last_said and i < last_said[t])
    by_output: dict[int, list[str]] = {}
    for t in reused:
        by_output.setdefault(intro[t], []).append(t)
    total = len(outs)
    return {
        rid: ValueContext(
            input=inp,
            user=user,
            dist=total - k,
            reused=reused,
            quoted=frozenset(t for t in by_output.get(i, ()) if t not in own_input.get(rid, inp)),
        )
        for k, (i, rid, _, inp) in enumerate(outs)
    }


def _first_holding(
    texts: Iterable[tuple[int, str]],
    wanted: Iterable[str],
    text_tokens: Callable[[str], Collection[str]],
) -> dict[str, int]:
    """`_first_held` from each text's own tokens (no token spans a newline, so a text holds a
    token as a token on some line exactly when the token is one of the text's)."""
    out: dict[str, int] = {}
    left = set(wanted)
    for i, text in texts:
        if not left:
            break
        held = text_tokens(text)
        if len(held) < len(left):
            found = [t for t in held if t in left]
        else:
            found = [t for t in left if t in held]
        for t in found:
            out[t] = i
        left.difference_update(found)
    return out


def _first_held(
    texts: Iterable[tuple[int, str]], wanted: Iterable[str], tokens: Tokens
) -> dict[str, int]:
    """The index of the first of `texts` (`(index, text)` in order) holding each `wanted` token
    as a token.

    One Aho–Corasick pass finds where a wanted token occurs at all; only the lines it occurs on
    are tokenised (no token spans a newline, so a text's tokens are its lines' tokens).
    """
    auto = Automaton()
    for t in wanted:
        auto.add_word(t, t)
    out: dict[str, int] = {}
    if not len(auto):
        return out
    auto.make_automaton()
    for i, text in texts:
        lines: dict[int, AbstractSet[str]] = {}
        for last, t in auto.iter(text):
            if t in out:
                continue
            start = text.rfind("\n", 0, last) + 1
            held = lines.get(start)
            if held is None:
                end = text.find("\n", last)
                held = lines[start] = tokens(text[start : len(text) if end < 0 else end])
            if t in held:
                out[t] = i
    return out


_W0, _W1, _W2, _W3, _W4, _W5, _W6, _W7, _W8, _W9, _W10, _W11, _W12 = _W


def _own(t: str) -> float:
    """The first six terms of a token's linear score: the ones that depend on the token alone.

    String methods stand in for the feature regexes: a file extension is `\\.[A-Za-z]{1,5}\\Z`
    (only the last dot can start one), a hex id is `[0-9a-fA-F]{8,}` from start to end.
    """
    n = len(t)
    raw = t.encode("utf-8", "surrogatepass")  # no multi-byte char holds an ASCII digit
    digits = len(raw) - len(raw.translate(None, b"0123456789"))
    dot = t.rfind(".")
    ext = t[dot + 1 :] if dot >= 0 else ""
    return (
        0
        + _W0 * (1.0 if digits else 0.0)
        + _W1 * (1.0 if ("/" in t or "\\" in t) else 0.0)
        + _W2 * (1.0 if 0 < len(ext) <= 5 and ext.isascii() and ext.isalpha() else 0.0)
        + _W3 * (1.0 if n >= 8 and not t.strip(_HEX_CHARS) else 0.0)
        + _W4 * math.log(n)
        + _W5 * (digits / n)
    )


def token_values(
    text: str,
    ctx: ValueContext,
    tokens: Iterable[str] | None = None,
    own: dict[str, float] | None = None,
    seen: Mapping[str, tuple[int, int]] | None = None,
    find: Callable[[str], AbstractSet[str] | str] | None = None,
) -> dict[str, float]:
    """The value of each candidate token of the full result `text` (or of the given tokens).

    `own` memoises the token-only terms across calls (the sum keeps its left-to-right order,
    so every value is the same float); `seen` is `token_occurrences(text)` when known; `find`
    gives, for the input and the user text, what candidate tokens can be looked up in with
    the same answers as in the text itself (`token_substrings`).
    """
    size = max(len(text), 1)
    if seen is None:
        seen = token_occurrences(text)
    wanted = toks(text) if tokens is None else tokens
    memo: dict[str, float] = {} if own is None else own
    dist = _W9 * math.log1p(ctx.dist)
    whole = _W11 * math.log(size)
    inp: AbstractSet[str] | str = ctx.input
    user: AbstractSet[str] | str = ctx.user
    reused = ctx.reused
    if find is not None:
        inp, user = find(ctx.input), find(ctx.user)
    log1p, exp = math.log1p, math.exp
    out: dict[str, float] = {}
    for t in wanted:
        head = memo.get(t)
        if head is None:
            head = memo[t] = _own(t)
        count, first = seen.get(t, (1, 0))
        z = _Z0 + (
            head
            + _W6 * log1p(count)
            + _W7 * (1.0 if t in inp else 0.0)
            + _W8 * (1.0 if t in user else 0.0)
            + dist
            + _W10 * (first / size)
            + whole
            + _W12 * (1.0 if t in reused else 0.0)
        )
        out[t] = 1.0 / (1.0 + exp(-z))
    return out
