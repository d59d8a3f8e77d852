"""Token value, message contexts, lazy cover and pooling (engine spec §2.7–§2.8)."""

from __future__ import annotations

import dataclasses
import heapq
import math
import re
from collections.abc import Set as AbstractSet

from hypothesis import example, given, settings
from hypothesis import strategies as st

from factrail.core import cover as cover_module
from factrail.core.candidate_tokens import (
    middle_tokens,
    token_occurrences,
    token_scan,
    token_substrings,
    toks,
)
from factrail.core.cover import Candidate, Middle, ValueParts, lazy_cover, value_parts
from factrail.core.facts import pick_fact_lines, scored_units
from factrail.core.keyscan import KeyScanner, ends
from factrail.core.model import Message, ToolResult, ToolUse
from factrail.core.pool import pool
from factrail.core.units import units
from factrail.core.value import (
    BETA,
    INTERCEPT,
    MU,
    SD,
    ValueContext,
    _first_held,
    _first_holding,
    message_contexts,
    token_values,
)

TEXT = "build ok\nartifact build/app_v2.bin size 4096\nrequest id req-0042af done\n" * 3
CTX = ValueContext(input="", user="", dist=3, reused=frozenset())


def test_model_constants() -> None:
    assert INTERCEPT == -2.884622
    values = token_values(TEXT, CTX)
    assert set(values) == {"build/app_v2.bin", "req-0042af"}
    assert all(0 < v < 1 for v in values.values())


def test_naming_a_token_in_the_input_or_prompt_or_reusing_it_raises_its_value() -> None:
    base = token_values(TEXT, CTX)["req-0042af"]
    for ctx in (
        ValueContext(input='{"id":"req-0042af"}', user="", dist=3, reused=frozenset()),
        ValueContext(input="", user="what happened to req-0042af?", dist=3, reused=frozenset()),
        ValueContext(input="", user="", dist=3, reused=frozenset({"req-0042af"})),
    ):
        assert token_values(TEXT, ctx)["req-0042af"] > base


def test_message_contexts_reuse_input_user_and_distance() -> None:
    messages = [
        Message("user", "fix the build"),
        Message("assistant", "", [ToolUse("a", "Bash", {"command": "make"})]),
        Message("user", "", tool_results=[ToolResult("a", "built out/app_v9.bin")]),
        Message(
            "assistant", "I will check out/app_v9.bin", [ToolUse("b", "Bash", {"command": "ls"})]
        ),
        Message("user", "", tool_results=[ToolResult("b", "listing")]),
        Message("user", "now ship it"),
    ]
    ctx = message_contexts(messages)
    assert ctx["a"].input == '{"command":"make"}' and ctx["b"].input == '{"command":"ls"}'
    assert ctx["a"].dist == 2 and ctx["b"].dist == 1
    assert ctx["a"].user == ctx["b"].user == "now ship it"
    assert ctx["a"].reused == frozenset({"out/app_v9.bin"})
    assert ctx["a"].quoted == frozenset({"out/app_v9.bin"}) and ctx["b"].quoted == frozenset()


def test_a_token_of_the_calls_own_input_is_not_a_quote_of_its_output() -> None:
    messages = [
        Message("user", "go"),
        Message("assistant", "", [ToolUse("a", "Read", {"file_path": "src/app/main.py"})]),
        Message("user", "", tool_results=[ToolResult("a", "# src/app/main.py\nBUILD = 'b-77123'")]),
        Message("assistant", "src/app/main.py holds build b-77123"),
    ]
    assert message_contexts(messages)["a"].quoted == frozenset({"b-77123"})


def test_with_parallel_calls_each_output_is_held_to_its_own_calls_input() -> None:
    reads = [
        ToolUse("a", "Read", {"file_path": "src/one/alpha.py"}),
        ToolUse("b", "Read", {"file_path": "src/two/beta.py"}),
    ]
    messages = [
        Message("user", "go"),
        Message("assistant", "", reads),
        Message(
            "user",
            "",
            tool_results=[
                ToolResult("a", "# src/one/alpha.py\nBUILD = 'b-11111'"),
                ToolResult("b", "# src/two/beta.py"),
            ],
        ),
        Message("assistant", "src/one/alpha.py holds build b-11111"),
    ]
    contexts = message_contexts(messages)
    assert contexts["a"].quoted == frozenset({"b-11111"})
    assert contexts["b"].quoted == frozenset()


_SAID_WORDS = ["out/app_v9.bin", "req-0042af", "v1.2.3-rc1", "xout/app_v9.bin", "out/app_v9.bin.gz"]
_SAID = st.sampled_from(_SAID_WORDS)
_OUTPUT = st.lists(st.sampled_from([*_SAID_WORDS, " ", "\n", "-", ".", "ok"]), max_size=12)


def _reused_reference(messages: list[Message]) -> frozenset[str]:
    """`reused` as first written: tokenise every output, then compare first sightings."""
    said: dict[str, int] = {}
    seen: dict[str, int] = {}
    for i, m in enumerate(messages):
        if m.role == "assistant":
            for t in toks(m.text):
                said[t] = i
        for r in m.tool_results:
            for t in toks(r.text):
                seen.setdefault(t, i)
    return frozenset(t for t, i in seen.items() if t in said and i < said[t])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(_SAID, max_size=2), _OUTPUT.map("".join)), max_size=5))
@example([(["req-0042af"], "ok"), ([], "req-0042af out/app_v9.bin")])  # said less than output
@example([(["out/app_v9.bin", "v1.2.3-rc1"], "out/app_v9.bin"), (["v1.2.3-rc1"], "v1.2.3-rc1")])
def test_reuse_is_a_sighting_before_the_last_mention(turns: list[tuple[list[str], str]]) -> None:
    # Only the lines where a said token occurs are tokenised: the same `reused` as tokenising
    # every output (a token inside a longer one, `xout/app_v9.bin`, is not a sighting).
    messages = [Message("user", "go")]
    for n, (said, output) in enumerate(turns):
        messages.append(Message("assistant", " ".join(said), [ToolUse(f"c{n}", "Bash", {})]))
        messages.append(Message("user", "", tool_results=[ToolResult(f"c{n}", output)]))
    messages.append(Message("assistant", " ".join(s for said, _ in turns for s in said)))
    want = _reused_reference(messages)
    got = message_contexts(messages)
    assert all(c.reused == want for c in got.values())
    # Each reused token is a quote of the first output that showed it, and of no other.
    first: dict[str, str] = {}
    for m in messages:
        for r in m.tool_results:
            for t in toks(r.text):
                first.setdefault(t, r.tool_use_id)
    assert {t: rid for rid, c in got.items() for t in c.quoted} == {t: first[t] for t in want}


def _cover_rescoring_all(cands: list[Candidate], covered: set[str], room: int) -> list[int]:
    """Lazy greedy coverage as first written: every popped candidate is re-scored, even one that
    no longer fits (it is only then dropped)."""
    seen, used, picks = set(covered), 0, []
    heap = [(-_first(c), i) for i, c in enumerate(cands) if c.tokens]
    heapq.heapify(heap)
    while heap:
        _, i = heapq.heappop(heap)
        c = cands[i]
        worth = sum(c.values.get(t, 0.0) for t in c.tokens if t not in seen) / (c.chars + 1)
        if worth <= 0:
            continue
        if heap and worth < -heap[0][0] - 1e-12:
            heapq.heappush(heap, (-worth, i))
            continue
        if used + c.chars + 1 > room:
            continue
        picks.append(i)
        used += c.chars + 1
        seen |= c.tokens
    return picks


def _first(c: Candidate) -> float:
    return sum(c.values.get(t, 0.0) for t in c.tokens) / (c.chars + 1)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.tuples(st.sets(st.sampled_from("abcdefg"), max_size=4), st.integers(0, 30)),
        max_size=10,
    ),
    st.dictionaries(st.sampled_from("abcdefg"), st.sampled_from([0.125, 0.25, 0.5, 1.0, 2.0])),
    st.integers(0, 80),
)
def test_lazy_cover_skips_what_no_longer_fits_without_changing_picks(
    spec: list[tuple[set[str], int]], values: dict[str, float], room: int
) -> None:
    # A candidate that no longer fits is dropped without being re-scored: it can never be picked,
    # and the picks (ties included: dyadic values make many) are those of re-scoring it first.
    cands = [Candidate(frozenset(t), chars, values) for t, chars in spec]
    assert lazy_cover(cands, set(), room) == _cover_rescoring_all(cands, set(), room)


def test_lazy_cover_prefers_value_per_char_and_counts_a_token_once() -> None:
    values = {"t1": 1.0, "t2": 1.0, "t3": 0.1}
    cands = [
        Candidate(frozenset({"t1", "t2"}), 11, values),
        Candidate(frozenset({"t1"}), 4, values),
        Candidate(frozenset({"t3"}), 1, values),
        Candidate(frozenset({"t2"}), 4, values),
    ]
    assert lazy_cover(cands, set(), 100) == [1, 3, 2]
    assert lazy_cover(cands, {"t1"}, 5) == [3]
    assert lazy_cover(cands, set(), 0) == []


def _observation(tag: str) -> str:
    lines = [f"row {i} took {i} ms {tag}-{i:05d}x" for i in range(300)]
    return "\n".join(lines)


def test_pooled_spend_never_exceeds_per_stub_greedy_spend() -> None:
    parts = []
    for tag in ("alpha", "beta", "gamma"):
        middle = _observation(tag)
        values = token_values(middle, CTX)
        parts.append(value_parts(middle, 600, values))
    greedy_spend = sum(p.spend() for p in parts)
    assert greedy_spend > 0
    picks = pool(parts, side=[])
    pooled_spend = sum(len(p.units[k]) + 1 for p, ks in zip(parts, picks, strict=True) for k in ks)
    assert 0 < pooled_spend <= greedy_spend
    # A token already visible elsewhere (side) is not worth keeping again.
    shown = "\n".join(parts[0].units)
    picks = pool(parts, side=[shown])
    assert picks[0] == []


def test_value_parts_keeps_error_lines_and_stays_under_the_regex_cap() -> None:
    middle = _observation("x") + "\nTraceback: boom\n"
    parts = value_parts(middle, 400, token_values(middle, CTX))
    kept = parts.lines()
    assert "Traceback: boom" in kept
    assert sum(len(u) + 1 for u in kept) <= 400


# --- fast paths equal the straightforward definitions they replace ---------------------------

_PIECE_WORDS = st.sampled_from(
    ["src", "a1", "mod_12", "case_5", "0.05s", "é1", "x", "::", "/", "-", "_", ".", " ", "\n",
     "v1.2.3", "ab12cd34", "ı", "٣", "#", "@", "\x00", "tests/test_5.py", ",", "é"]
)  # fmt: skip
_TEXTS = st.lists(_PIECE_WORDS, max_size=30).map("".join)


def _aligned_in(key: str, text: str) -> bool:
    """The definition: some occurrence of `key` has no alphanumeric char on either side."""
    return any(
        text.startswith(key, s)
        and (s == 0 or not text[s - 1].isalnum())
        and (s + len(key) == len(text) or not text[s + len(key)].isalnum())
        for s in range(len(text) - len(key) + 1)
    )


def _has_run(key: str) -> bool:
    return any(c.isalnum() for c in key)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXTS, max_size=12), _TEXTS)
def test_contained_equals_the_aligned_substring_definition(keys: list[str], text: str) -> None:
    want = {k for k in keys if _has_run(k) and _aligned_in(k, text)}
    assert KeyScanner(keys).found(text) == want
    pieces = text.split("\n")
    assert KeyScanner(keys).found_each(pieces) == [
        {k for k in keys if _has_run(k) and _aligned_in(k, p)} for p in pieces
    ]


def _token_matches(s: str) -> list[tuple[str, int]]:
    """The definition behind `toks`: `(token, match start)` of each kept match, in scan order."""
    out = []
    for m in re.finditer(r"[A-Za-z0-9][A-Za-z0-9_.:/@#-]{5,}", s):
        t = m.group().rstrip(".:,")
        if len(t) >= 6 and re.search("[0-9]", t):
            out.append((t, m.start()))
    for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_./-]{7,}", s):
        t = m.group().rstrip(".:,")
        if len(t) >= 8 and ("/" in t or "_" in t or "." in t) and not re.search("[0-9]", t):
            out.append((t, m.start()))
    return out


@settings(max_examples=200, deadline=None)
@given(_TEXTS)
def test_occurrences_count_each_token_match_once(text: str) -> None:
    want: dict[str, tuple[int, int]] = {}
    for t, start in _token_matches(text):
        n, first = want.get(t, (0, start))
        want[t] = (n + 1, first)
    assert token_occurrences(text) == want
    assert set(want) == toks(text)


def _value_parts_reference(middle: str, budget: int, values: dict[str, float]) -> ValueParts:
    """value_parts as first written: two regex picks, error lines, then one lazy cover."""
    all_units = units(middle)
    last = {u: i for i, u in enumerate(all_units)}
    distinct = [all_units[i] for i in sorted(last.values())]
    at = {u: k for k, u in enumerate(distinct)}
    scored = scored_units(middle)
    cap = sum(len(u) + 1 for _, u in pick_fact_lines(scored, budget))
    pre: list[int] = []
    used = 0
    for _, u in pick_fact_lines(scored, cap // 3):
        if used + len(u) + 1 <= cap:
            pre.append(at[u])
            used += len(u) + 1
    chosen = set(pre)
    for k, u in enumerate(distinct):
        if k not in chosen and re.search(ERROR_PIECE, u, re.I) and used + len(u) + 1 <= cap:
            pre.append(k)
            chosen.add(k)
            used += len(u) + 1
    covered: set[str] = set()
    for k in pre:
        covered |= toks(distinct[k])
    rest = [k for k in range(len(distinct)) if k not in chosen]
    cands = [Candidate(frozenset(toks(distinct[k])), len(distinct[k]), values) for k in rest]
    greedy = [rest[j] for j in lazy_cover(cands, covered, cap - used)]
    return ValueParts(tuple(distinct), sorted(pre), greedy, rest, values)


ERROR_PIECE = r"error|failed|exception|traceback|denied|not found|timed out"
_LOG_LINES = st.sampled_from(
    ["row 1 took 5 ms id-00042x", "error: disk full at /srv/a1/b.log", "ok", "ok",
     "GET /api/v1/items/123 200 12ms", "commit 9f3c2ab1 updated src/main.rs", "  ",
     "Traceback boom", "size=4096 bytes", "build/app_v2.bin", "x" * 230 + " tail_9.py",
     "Request TIMED OUT after 30s", "ERROR \u017f", "Not Found: /v1/\u212a"]
)  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(st.lists(_LOG_LINES, max_size=80).map("\n".join), st.lists(st.integers(0, 3000), max_size=4))
def test_middle_parts_equal_value_parts_at_every_budget(middle: str, budgets: list[int]) -> None:
    values = token_values(middle, CTX)
    plan = Middle(middle, values)
    for budget in budgets:
        parts = plan.parts(budget)
        assert parts == _value_parts_reference(middle, budget, values)
        assert list(parts.tokens) == [frozenset(toks(u)) for u in parts.units]


def _value_reference(t: str, seen: tuple[int, int], size: int, ctx: ValueContext) -> float:
    """One token's value as the model defines it: the logistic of 13 standardised features."""
    digits = sum(c.isdigit() and c.isascii() for c in t)
    features = (
        1.0 if digits else 0.0,
        1.0 if ("/" in t or "\\" in t) else 0.0,
        1.0 if re.search(r"\.[A-Za-z]{1,5}\Z", t) else 0.0,
        1.0 if re.match(r"[0-9a-fA-F]{8,}\Z", t) else 0.0,
        math.log(len(t)),
        digits / len(t),
        math.log1p(seen[0]),
        1.0 if t in ctx.input else 0.0,
        1.0 if t in ctx.user else 0.0,
        math.log1p(ctx.dist),
        seen[1] / size,
        math.log(size),
        1.0 if t in ctx.reused else 0.0,
    )
    z = INTERCEPT - sum(b / s * m for b, s, m in zip(BETA, SD, MU, strict=True))
    z += sum((b / s * x for b, s, x in zip(BETA, SD, features, strict=True)), 0.0)
    return 1.0 / (1.0 + math.exp(-z))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(_LOG_LINES, max_size=30).map("\n".join), min_size=1, max_size=4))
def test_token_values_equal_the_model_with_a_shared_memo(texts: list[str]) -> None:
    # The token-only terms memoised across results give the very same floats.
    own: dict[str, float] = {}
    ctx = ValueContext(input="id-00042x", user="fix src/main.rs", dist=2, reused=frozenset())
    for text in texts:
        seen = token_occurrences(text)
        size = max(len(text), 1)
        want = {t: _value_reference(t, seen[t], size, ctx) for t in toks(text)}
        assert token_values(text, ctx) == want
        assert token_values(text, ctx, own=own) == want


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_LOG_LINES, max_size=40).map("\n".join), min_size=1, max_size=3))
def test_pool_with_planned_unit_tokens_equals_tokenising_the_units(middles: list[str]) -> None:
    parts = [value_parts(m, 300, token_values(m, CTX)) for m in middles]
    bare = [dataclasses.replace(p, tokens=()) for p in parts]
    side = ["saw build/app_v2.bin and id-00042x"]
    assert pool(parts, side) == pool(bare, side)
    assert pool(parts, side, contain=False) == pool(bare, side, contain=False)


@settings(max_examples=300, deadline=None)
@given(_TEXTS, st.integers(0, 60), st.integers(0, 60))
def test_middle_tokens_equal_tokenising_the_middle(text: str, a: int, b: int) -> None:
    start, end = sorted((a, b))
    assert middle_tokens(text, start, end) == toks(text[start:end])
    lines = "\n".join([text, "x id-00042x build/app_v2.bin", text, "req-0042af done", text])
    cut = lines.index("\n", len(text) + 1)
    tail = lines.rindex("\n") + 1
    assert middle_tokens(lines, cut, tail, token_scan(lines)) == toks(lines[cut:tail])


def _pool_reference(parts: list[ValueParts], side: list[str], contain: bool) -> list[list[int]]:
    """pool as first written: the side's keys, then each stub's own keys in its units."""
    covered: set[str] = set()
    for s in side:
        covered |= toks(s)
    if contain:
        keys = {k for p in parts for k in p.values} - covered
        covered |= KeyScanner(keys).found("\x00".join(side))
    cands: list[Candidate] = []
    owner: list[tuple[int, int]] = []
    for n, p in enumerate(parts):
        rest = [p.units[k] for k in p.rest]
        extra = KeyScanner(p.values).found_each(rest) if contain else [set[str]() for _ in rest]
        for j, k in enumerate(p.rest):
            cands.append(Candidate(frozenset(toks(rest[j])) | extra[j], len(rest[j]), p.values))
            owner.append((n, k))
    picks: list[list[int]] = [[] for _ in parts]
    for j in lazy_cover(cands, covered, sum(p.spend() for p in parts)):
        n, k = owner[j]
        picks[n].append(k)
    return picks


_POOL_LINES = st.sampled_from(
    ["GET /api/v1/items/123 200", "see /api/v1/items done", "id-00042x ok", "id-00042x-b7 ok",
     "src/main.rs:12 warn", "main.rs built", "build/app_v2.bin 4096", "x" * 40, "v1.2.3-rc1",
     "note 1.2.3 ok", "error: id-00042x failed", "éid-00042x", "see ________ and __init__.py",
     "________", "x__init__.py"]
)  # fmt: skip
"""Pool lines; `éid-00042x` holds a token that is not aligned, `________` a key with no
alphanumeric char (a token, never contained)."""


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.lists(_POOL_LINES, max_size=25).map("\n".join), min_size=1, max_size=3),
    st.lists(st.lists(_POOL_LINES, max_size=4).map(" ".join), max_size=3),
    st.integers(0, 3),
)
def test_pool_with_one_shared_index_equals_the_per_stub_definition(
    middles: list[str], side: list[str], dist: int
) -> None:
    ctxs = [ValueContext(input="", user="", dist=dist + i, reused=frozenset()) for i in range(3)]
    parts = [value_parts(m, 200, token_values(m, ctxs[i])) for i, m in enumerate(middles)]
    for contain in (True, False):
        assert pool(parts, side, contain=contain) == _pool_reference(parts, side, contain)


@given(st.lists(st.text(alphabet="ab\x00é", max_size=5), max_size=8))
def test_ends_are_where_each_text_ends_in_the_join(texts: list[str]) -> None:
    joined = "\x00".join(texts)
    got = ends(texts)
    starts = [0, *(e + 1 for e in got[:-1])][: len(texts)]
    assert [joined[a:b] for a, b in zip(starts, got, strict=True)] == texts
    assert not texts or got[-1] == len(joined)


_HELD_PIECES = st.sampled_from(
    ["src/app.py", "src/app.py:12", "req-0042af", "build/app_v2.bin", "v1.2.3", "x", " ", "\n",
     ":", "/", "é", "Ж", "0042af", "app_v2", "tests/test_a.py::case_1", "path/to/x_y"]
)  # fmt: skip


@given(
    st.lists(st.lists(_HELD_PIECES, max_size=12).map("".join), max_size=6),
    st.lists(_HELD_PIECES, max_size=8),
)
def test_first_holding_from_whole_texts_is_first_held(texts: list[str], wanted: list[str]) -> None:
    """A text holds a token as a token on some line exactly when the token is one of the
    whole text's (no token spans a newline)."""
    numbered = list(enumerate(texts))
    got = _first_holding(numbered, wanted, toks)
    assert got == _first_held(numbered, wanted, toks)


def test_token_values_are_the_same_when_looked_up_in_token_substrings() -> None:
    """What `apply` does for a long input or user text (`_Engine.searchable`)."""
    user = ("please look at req-0042af and src/app.py:12 again " * 30) + "build/app_v2.bin"
    inp = '{"cmd": "cat build/app_v2.bin | grep req-0042af"}' * 12
    ctx = ValueContext(input=inp, user=user, dist=4, reused=frozenset({"v1.2.3"}))
    text = TEXT + "\nsrc/app.py:12 src/app.py v1.2.3 path/to/x_y app_v2.bin 0042afxyz\n"

    def find(s: str) -> AbstractSet[str] | str:
        return token_substrings(s, cap=10**9) or s

    plain = token_values(text, ctx)
    assert plain == token_values(text, ctx, find=find)
    assert [v.hex() for v in plain.values()] == [
        v.hex() for v in token_values(text, ctx, find=find).values()
    ]


def test_a_key_holding_the_join_char_scans_each_text() -> None:
    units = ["x a\x00b ab", "ab/mod_a.py"]
    own = [frozenset(), frozenset({"ab"})]
    values = {"mod_a.py": 0.5, "ab": 0.25, "a\x00b": 0.75}
    scanner = KeyScanner(values)
    assert scanner.merged(units, own, values) == [{"a\x00b", "ab"}, {"ab", "mod_a.py"}]


_ERROR_BITS = ("error", "ERROR", "eRRor", "erro", "r", "failed", "FAILED", "fail", "ed",
               "exception", "EXCEPTION", "exceptio", "n", "traceback", "TraceBack", "tracebac",
               "k", "denied", "DENIED", "denie", "d", "not found", "NOT FOUND", "not  found",
               "notfound", "not ", "found", "timed out", "TIMED OUT", "timed  out", "timedout",
               "timed ", "out", "fatal", "FATAL", "fata", "l", "panic", "Panic", "pani", "c",
               "\u212a", "\u017f", "\u0130", "\u0131", "é", "e", "t", " ", "\t",
               "x", "_", "1", "\n")  # fmt: skip
"""Error pieces in any case, cut short or split, and non-ASCII case twins (the Kelvin sign)."""


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_ERROR_BITS), max_size=6).map("".join), max_size=10))
def test_error_units_are_the_units_the_error_regex_matches(units: list[str]) -> None:
    """The needle prefilter never hides a match of `_ERROR_PIECE` (the regex decides non-ASCII
    units)."""
    want = [k for k, u in enumerate(units) if cover_module._ERROR_PIECE.search(u)]
    assert cover_module._error_units(units) == want


def test_error_units_of_known_units() -> None:
    units = ["ok", "Permission DENIED", "tracebac\u212a", "é timed out", "TimedOut", "xErrorx",
             "fatal: not a git repository", "goroutine 1 [running]: PANIC", "fata l"]  # fmt: skip
    assert cover_module._error_units(units) == [1, 2, 3, 5, 6, 7]
