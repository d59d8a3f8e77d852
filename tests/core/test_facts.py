"""Units, fact scores, fact lines and candidate tokens (engine spec §2.5, §2.7, §9)."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from factrail.core.candidate_tokens import (
    TokenSets,
    token_occurrences,
    token_sets,
    token_substrings,
    toks,
    toks_each,
)
from factrail.core.facts import (
    FACT_TOKEN,
    FACT_TOKEN_DEFINITION,
    FactScores,
    fact_lines,
    fact_score,
    fact_tokens,
    facts_reach,
    score_key,
    score_keys,
    scored_units,
    unit_scores,
    units_holding,
)
from factrail.core.marks import RERUN_DETAIL, full_output_phrase, is_mark_line, note
from factrail.core.units import units


def test_units_split_lines_escaped_newlines_and_long_lines() -> None:
    text = "  first  \n\nsecond\\nthird\n" + "word " * 60
    got = units(text)
    assert got[:3] == ["first", "second", "third"]
    assert all(len(u) <= 200 for u in got)
    assert " ".join(got[3:]) == ("word " * 60).strip()


def test_fact_score_examples() -> None:
    assert fact_score("pid 4242") == 2
    assert fact_score("error: x failed") == 1
    assert fact_score("GET /api 200 HTTP/1.1 200") == 1
    assert fact_score("") == 0
    assert fact_score("nothing to see here") == 0


def test_percent_quantity_matches_before_space_or_end() -> None:
    # §9.7: `50%` followed by a space or the end of the line is a quantity.
    assert fact_score("coverage 50%") == 1
    assert fact_score("50% done") == 1


def test_hex_rule_needs_a_digit_and_a_letter() -> None:
    # §9.8: one hex rule everywhere; neither `defaced` nor a bare number is a hex id.
    assert fact_score("head is 9f3c2ab") == 1
    assert fact_score("the wall was defaced") == 0
    assert fact_score("AB12CD34EF") == 1
    assert FACT_TOKEN.findall("defaced 9F3C2AB") == ["9F3C2AB"]


def test_fact_lines_golden() -> None:
    text = "\n".join(
        [
            "compiling",
            "error: x failed",
            "pid 4242",
            "fine",
            "pid 4242",
            "wrote /srv/app/out.json",
        ]
    )
    assert fact_lines(text, 1000) == ["error: x failed", "pid 4242", "wrote /srv/app/out.json"]
    # Highest score first under a tight budget; a skipped line does not stop the walk.
    assert fact_lines(text, 24) == ["pid 4242"]
    assert fact_lines(text, 26) == ["error: x failed", "pid 4242"]


def test_mark_lines_are_never_fact_lines() -> None:
    # §9.12: our note's 4-digit count would score; it must not be picked.
    mark = f"[factrail omitted 12345 chars of this output; {full_output_phrase('u1')}]"
    text = f"head\n{mark}\nexit code 1"
    assert fact_lines(text, 1000) == ["exit code 1"]
    assert "12345" not in fact_tokens(text)
    # A line that merely quotes the prefix is ordinary text.
    assert fact_lines("see [factrail omitted 1234 chars] here", 1000) != []


def test_toks_example_and_sentence_final_words() -> None:
    got = toks("wrote src/main_loop.rs at pid 48211, commit 9f3c2ab1.")
    assert got == {"9f3c2ab1", "src/main_loop.rs"}
    # §9.9: a long word that only ends a sentence is not a token.
    assert toks("this is something. Another sentence.") == set()
    assert toks("see config.yaml") == {"config.yaml"}


def test_facts_reach_matches_the_full_count() -> None:
    text = "\n".join(["pid 4242", "plain words", "pid 4242", "exit code 3", "nothing"] * 7)
    full = sum(len(u) + 1 for u in set(fact_lines(text, 10**9)))
    for share in (0.05, 0.2, 0.3, 0.5, 0.9):
        assert facts_reach(text, share) == (full >= len(text) * share)


_UNIT_CHARS = st.sampled_from(
    [
        *"abcdefxyzAFT0123456789 /\\:.=_-%#\"'(\t\r\x1c",
        *("/srv/a/b", "C:\\x", "error", "FAIL", "ERR", "HTTP", "status ", "pid ", "rc", "ms"),
        *(".py", "order #", "\u212a", "localhost:", "1.2.3", "10.0.0.1", "9f3c2ab1", "not found"),
        *("timed out", "✗", "İ", "٣", "\u00a0", "\n", "\\n", "test", "line"),
    ]
)
_UNITS = st.lists(st.lists(_UNIT_CHARS, max_size=12).map("".join), max_size=8)


@settings(max_examples=300, deadline=None)
@given(_UNITS)
def test_unit_scores_equal_scoring_each_unit(us: list[str]) -> None:
    # The needle prefilter only skips units a pattern cannot match: same scores as the definition.
    assert unit_scores(us) == [fact_score(u) for u in us]
    ascii_only = [u.encode("ascii", "ignore").decode() for u in us]
    assert unit_scores(ascii_only) == [fact_score(u) for u in ascii_only]


@settings(max_examples=100, deadline=None)
@given(_UNITS)
def test_batched_selection_equals_the_per_unit_definition(us: list[str]) -> None:
    text = "\n".join(us)
    memo = FactScores()
    direct = [(s, i, u) for i, u in enumerate(units(text)) if (s := fact_score(u)) > 0]
    assert scored_units(text) == direct
    assert scored_units(text, memo) == direct
    assert scored_units(text, lambda u: fact_score(u)) == direct
    facts = {u for _, _, u in direct}
    for share in (0.1, 0.5, 0.9):
        want = sum(len(u) + 1 for u in facts) >= len(text) * share
        assert facts_reach(text, share) is want
        assert facts_reach(text, share, memo) is want
        partial = FactScores()  # half the units scored already, the rest matched on demand
        partial.many(units(text)[::2])
        assert facts_reach(text, share, partial) is want
        assert facts_reach(text, share, FactScores()) is want


def test_unit_scores_on_real_transcripts() -> None:
    from pathlib import Path

    from factrail.core.formats.detect import parse_any

    folder = Path("/work/shared/corpus/dev")
    if not folder.is_dir():
        pytest.skip("no dev corpus")
    for path in sorted(folder.glob("*.json"))[:12]:
        doc = parse_any(path.read_text(encoding="utf-8"), filename=path.name)
        for m in doc.messages:
            for r in m.tool_results:
                us = units(r.text)
                assert unit_scores(us) == [fact_score(u) for u in us], path.name


_TOKEN_CHARS = st.sampled_from(
    [*"ab1_.:/-@#, \\nxZ9\t", "src/a_b.py", "9f3c2ab1", "v1.2.3", "\n", "é", "٣", "config.yaml"]
)
_TEXTS = st.lists(_TOKEN_CHARS, max_size=40).map("".join)
_DIG_RUN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@#-]{5,}")
_WORD_RUN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{7,}")


def _toks_reference(s: str) -> dict[str, tuple[int, int]]:
    """Candidate tokens as first written: every match, trimmed, then filtered."""
    out: dict[str, tuple[int, int]] = {}
    for regex, least in ((_DIG_RUN, 6), (_WORD_RUN, 8)):
        for m in regex.finditer(s):
            t = m.group().rstrip(".:,")
            digit = re.search("[0-9]", t) is not None
            keep = digit if regex is _DIG_RUN else any(c in t for c in "/_.") and not digit
            if len(t) >= least and keep:
                count, first = out.get(t, (0, m.start()))
                out[t] = (count + 1, first)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXTS, max_size=8))
def test_token_scans_equal_the_per_text_definition(texts: list[str]) -> None:
    # toks, token_occurrences and the batched toks_each / TokenSets / token_sets agree with
    # scanning each text on its own (units holding a newline take the per-unit path).
    for s in texts:
        assert toks(s) == set(_toks_reference(s))
        assert token_occurrences(s) == _toks_reference(s)
    want = [frozenset(_toks_reference(s)) for s in texts]
    assert toks_each(texts) == want
    memo = TokenSets()
    assert memo.many(texts) == want
    assert [memo(s) for s in texts] == want
    assert token_sets(texts) == want
    assert token_sets(texts, memo) == want
    assert token_sets(texts, lambda s: toks(s)) == want
    lines = [s.replace("\n", " ") for s in texts]
    assert toks_each(lines) == [frozenset(_toks_reference(s)) for s in lines]


_ERRORISH = re.compile(r"error|failed|not found|timed out", re.I)


@settings(max_examples=200, deadline=None)
@given(_UNITS)
def test_units_holding_finds_every_unit_a_case_blind_search_matches(us: list[str]) -> None:
    held = units_holding(us, (b"error", b"failed", b"not found", b"timed out"))
    want = {i for i, u in enumerate(us) if _ERRORISH.search(u)}
    if held is not None:
        assert want <= held


_FINDER_CHARS = st.sampled_from(
    [
        *("passed", "PASS", "failed ", "tests", "count=", "Exit:", "rc", "src", "size\x1c", "9"),
        *(".ps1", ".PS1", ".tsx", ".LOCK", "a.mjs", ".yml", ".ya", "\u017f", " ", "=", ":", "\n"),
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_FINDER_CHARS, max_size=10).map("".join), max_size=8))
@example(["passed 9", "Failed: 3", "tests=4", "size\x1c9", "run.ps1", "a.LOCK", "x.mjs"])
def test_unit_scores_looser_patterns_miss_no_match(us: list[str]) -> None:
    # Counters (`pid 4`, `passed: 3`) and file names are found by looser byte patterns.
    assert unit_scores(us) == [fact_score(u) for u in us]


_FACT_TOKEN_CHARS = st.sampled_from(
    [
        *"aFz09x:/\\.,@-_ \n\"'<>",
        *("C:", "c:\\", "/srv/", "9f3c2ab", "DEADBEEF1", "1.2.3", "٣", "é", "Ä"),
        *("\u0130", "\u0131", "\u017f", "\u212a"),
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_FACT_TOKEN_CHARS, max_size=30).map("".join))
@example("\u212a:/x \u017f:\\y \u0130:/z \u0131:\\w")
def test_fact_token_is_its_case_insensitive_definition(text: str) -> None:
    # FACT_TOKEN spells the IGNORECASE definition case-sensitively (the four non-ASCII chars
    # that fold to an ASCII letter included): the same matches, in the same places.
    definition = re.compile(FACT_TOKEN_DEFINITION, re.IGNORECASE)
    assert FACT_TOKEN.findall(text) == definition.findall(text)


_FOLD_CHARS = st.sampled_from(
    [
        *"0123456789 .:/-_%abfxs",
        *("run.ps1", ".ps2", "ps1", "v1.2.3", "10.0.0.1:8080", "pid ", "ms", "HTTP/1.1 "),
        *("status=", "9f3c2ab", "٣", "error ", "tests=", "1234", "C:\\", "\n"),
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.lists(_FOLD_CHARS, max_size=10).map("".join), max_size=6))
@example(["run.ps1", "run.ps2", "x 1234", "1.2.3.4"])
def test_digit_folded_units_score_alike(us: list[str]) -> None:
    # Scores are memoised by `score_key` (digits 2–9 as 0): each fold scores as its unit does.
    assert [fact_score(score_key(u)) for u in us] == [fact_score(u) for u in us]
    assert score_keys(us) == [score_key(u) for u in us]
    memo = FactScores()
    assert memo.many(us) == [fact_score(u) for u in us]
    assert [memo(u) for u in reversed(us)] == [fact_score(u) for u in reversed(us)]


_MARK_PIECES = st.sampled_from(
    [note(12, "", "toolu_1"), note(3, RERUN_DETAIL, "x"), "[factrail omitted ",
     "[factrail omitted 5 chars", "[jev-compaction truncated ", "compaction truncated ", "]", " ",
     "x", "\r"]
)  # fmt: skip


@given(st.lists(_MARK_PIECES, max_size=5).map("".join))
def test_the_mark_prefilter_agrees_with_is_mark_line(line: str) -> None:
    assert is_mark_line(line) == is_mark_line(line)


_RUN_PIECES = st.sampled_from(
    ["src/app.py:12", "req-0042af", "build/app_v2.bin", "v1.2.3", "x", " ", "\n", ":", "/",
     "é", "Ж", "0042af", "app_v2", "a_b.c", "#@-", "\t", ",", "path/to/x_y", "1234567"]
)  # fmt: skip


@given(st.lists(_RUN_PIECES, max_size=14).map("".join), st.lists(_RUN_PIECES, max_size=14))
def test_a_candidate_token_is_in_a_text_exactly_when_in_its_token_substrings(
    text: str, pieces: list[str]
) -> None:
    subs = token_substrings(text, cap=10**9)
    assert subs is not None
    for t in toks("".join(pieces)) | toks(text):
        assert (t in subs) == (t in text), t


def test_token_substrings_give_up_past_their_cap() -> None:
    assert token_substrings("x" * 40 + " " + "y" * 8, cap=10) is None
    assert token_substrings("ab cd", cap=0) == frozenset()
