"""The C kernels of the fact patterns (`fact_scores`, `fact_tokens`, `unit_spans`) and of
`estimate_tokens` equal their Python definitions; the pattern kernels refuse non-ASCII units, which
the Python then scores, and `fact_tokens` hands non-ASCII lines to `findall`."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factrail.core import facts, tokens, units
from factrail.core.facts import FACT_TOKEN, PATTERNS, FactScores
from factrail.core.kernels import Kernels, use
from factrail.core.marks import (
    RERUN_DETAIL,
    note,
    saved_output_phrase,
    stub_detail,
    swap_full_output_note,
)

MARKS = [
    swap_full_output_note(
        note(812, stub_detail(False, 3), "toolu_1"),
        "toolu_1",
        saved_output_phrase("0123456789abcdef0123456789abcdef/toolu_1", "/v1/factrail/outputs/"),
    ),
    note(40, RERUN_DETAIL, "call_0042af99"),
    "[jev-compaction truncated 5120 chars of build/app_v2.bin 0xdeadbeef12]",
]
"""Mark lines (ours, saved and unsaved, and a legacy one) holding fact-token-like text."""

FEW = settings(max_examples=400, deadline=None)
LISTS = settings(max_examples=100, deadline=None)

_WORDS = (
    "error", "errors", "failed", "failure", "fail", "exception", "traceback", "denied", "refused",
    "invalid", "invalid_", "invalid_x", "not found", "not", "found", "timeout", "timedout",
    "timed out", "time out", "time", "timed", "out", "fatal", "panic", "warning", "FAIL", "ERR",
    "HTTP", "HTTP/1.1 ", "http/2 ", "status", "status: ", "status=", "localhost:", "localhost",
    "pid", "port", "exit", "rc", "code", "size", "bytes", "pass", "passed", "test", "tests",
    "total", "count", "message_id", "ticket", "confirm", "confirmed", "sent", "delivered",
    "created", "updated", "deleted", "order", "transaction", "commit", "ms", "kb", "mb", "gb",
    "tokens", "line", "lines", "file", "files", ".js", ".jsx", ".cjs", ".mts", ".tsx", ".py",
    ".json", ".yml", ".yaml", ".md", ".toml", ".txt", ".log", ".rs", ".go", ".sh", ".ps1",
    ".ps2", ".cmd", ".lock", ".sql", ".pyc", "C:\\", "c:/", "src/", "/usr/lib/", "a.b-c@d",
    "deadbeef", "0a1b2c3", "abc1234def", "f" * 38, "1.2.3", "10.0.0.1", "127.0.0.1:8080",
    "404", "200", "12345", "1,024", "3.5", "99%", "x" * 90, "\\n", "/tmp/", "/a/", "/", "5",
)  # fmt: skip
"""Pieces of the fact patterns (keywords, extensions, paths, hex ids, addresses, numbers)."""
_CHARS = "0123456789.,:=#%_-@/\\ \t\x0b\x1c\"'()<>abcdefABCDEFgxzZ\n"
"""Single chars the patterns turn on: digits, separators, spaces, quotes, hex and other letters."""

_SEPS = ("", " ", "  ", ":", "=", "#", ": ", " = ", "\t", "\x1c", "\x1f", "\x0c", "/", ".",
         "\\", "'", "(")  # fmt: skip
"""What may stand between a keyword, a number or a path piece and what follows it."""

_FRAGMENTS = (
    (("error", "not", "time", "timed", "invalid", "invalid_", "xfail"), (" ", "", "  ", "\t", "_"),
     ("found", "out", "x", "")),
    (("HTTP", "http/1.1", "status", "Status", "xhttp"), (" ", "", "/", ": ", "=", "\x1c", ":="),
     ("404", "4040", "40", "1.1 200", "200x")),
    (("C:", "z:", "1:", "", "(", "'", "=", "x"), ("", " "),
     ("\\x", "/a/b", "/a/", "/tmp/x y", "/a", "/>")),
    (("1.2", "10.0.0", "127.0.0.1", "1234.5", "v1"), ("", "."),
     (".3", ".4:80", ".1x", "", "2.3.4")),
    (("localhost", "xlocalhost", "LOCALHOST"), ("", ":"), (":80", ":", ":8x", "80")),
    (("pid", "exit", "Tests", "passed", "xcode", "rc"), ("", " ", "=", ": ", "\x1c", "#"),
     ("3", "x", "=5", ":")),
    (("5", "1,024", "3.5", "x5", "_5", "42."), ("", " ", "\x1c", "  ", "."),
     ("ms", "MB", "%", "%x", "lines", "line5", "file")),
    (("a", "x-", ".", "-", "_", "a.b", "--"), ("", ".", "-", " "),
     (".py", ".ps1", ".jsx", ".pyc", "..md", "py", ".Yaml")),
    (("order", "commit", "message_id", "Confirmed", "sent"), (" ", "#", ": ", "", "=#", "\x1f"),
     ("x", "-y", "#1", "", "=")),
)  # fmt: skip
"""Per fact pattern: heads, separators and tails that, joined, match it or nearly do."""
_fragment = st.sampled_from(_FRAGMENTS).flatmap(
    lambda f: st.tuples(*(st.sampled_from(part) for part in f)).map("".join)
)
_HEX_RUN = "a1b2c3d4e5f6" * 4
_token = st.one_of(
    _fragment,
    _fragment,
    st.sampled_from(_WORDS).flatmap(
        lambda w: st.sampled_from([w, w.upper(), w.title(), w.swapcase()])
    ),
    st.sampled_from(_CHARS),
    st.integers(5, 42).map(lambda k: _HEX_RUN[:k]),
    st.integers(1, 6).map("9".__mul__),
)
_built = st.lists(st.tuples(_token, st.sampled_from(_SEPS)).map("".join), min_size=1, max_size=10)
_printable = st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=60)
ascii_texts = st.one_of(_built.map("".join), _built.map("".join), _printable)
"""ASCII texts that hit every pattern often, and random ASCII."""
_NON_ASCII = ("é", "\u0130", "\u0131", "\u017f", "\u212a", "\u0663", "\xa0", "\x85", "\u2028",
              "\u3000", "✖", "✗", "\U0001f600")  # fmt: skip
"""Case twins, a non-ASCII digit and spaces, the FAIL marks, and chars of every kind."""
texts = st.one_of(
    ascii_texts,
    st.tuples(ascii_texts, st.sampled_from(_NON_ASCII), ascii_texts).map("".join),
)


def _same(native: ModuleType, call: Callable[[], Any]) -> Any:
    """`call()` under the Python definitions equals `call()` under the C kernels (sets in the same
    iteration order)."""
    with use(Kernels()):
        py = call()
    with use(Kernels(native)):
        c = call()
    assert type(c) is type(py)
    if isinstance(py, set):
        assert list(c) == list(py)
    else:
        assert c == py
    return c


def _matched(unit: str) -> int:
    return sum(1 for p in PATTERNS if p.search(unit) is not None)


def _score(native: ModuleType, unit: str) -> int:
    """The kernel's score of one unit (-1: not ASCII, left to the Python)."""
    got: int = native.fact_scores([unit])[0]
    return got


@FEW
@given(texts)
def test_fact_score_counts_the_patterns_that_search_finds(native: ModuleType, unit: str) -> None:
    assert _score(native, unit) == (_matched(unit) if unit.isascii() else -1)
    assert _same(native, lambda: facts.unit_scores([unit])) == [_matched(unit)]


@LISTS
@given(st.lists(texts, max_size=10))
def test_unit_scores_and_the_memo(native: ModuleType, units: list[str]) -> None:
    assert native.fact_scores(units) == [_matched(u) if u.isascii() else -1 for u in units]
    assert _same(native, lambda: facts.unit_scores(units)) == [_matched(u) for u in units]
    _same(native, lambda: FactScores().many(units))


@LISTS
@given(st.lists(texts, max_size=10), st.floats(-5, 800))
def test_reach(native: ModuleType, units: list[str], need: float) -> None:
    distinct = list(dict.fromkeys(units))
    _same(native, lambda: facts._reach(distinct, need))
    text = "\n".join(units)

    def reach_shares() -> list[bool]:
        shares = (0.0, 0.2, 0.5, 0.9)
        return [facts.facts_reach(text, share, FactScores()) for share in shares]

    _same(native, reach_shares)


@FEW
@given(texts)
def test_fact_tokens_are_the_findall_matches(native: ModuleType, text: str) -> None:
    """In findall's order, whatever the text: ASCII lines by the C, the others by findall."""
    got = native.fact_tokens(text, FACT_TOKEN.findall)
    assert list(got) == list(set(FACT_TOKEN.findall(text)))
    mixed = f"{text}\n… é {text}\n{text}"
    got = native.fact_tokens(mixed, FACT_TOKEN.findall)
    assert list(got) == list(set(FACT_TOKEN.findall(mixed)))
    marked = f"{text}\n{MARKS[0]}\n{text}"
    _same(native, lambda: facts.fact_tokens(text))
    got = _same(native, lambda: facts.fact_tokens(marked))
    assert "/srv/out/s1/toolu_1.txt" not in got  # the mark line's path is no fact
    # Lines holding a mark phrase without being mark lines stay; mark lines go, in a 2-byte
    # text too, and at the text's very end.
    near = "\n".join(
        [f"see [factrail omitted 3 lines] of {text}", "compaction truncated log_2.txt 1234567",
         f"Ж {text}", *MARKS, text, f"{MARKS[1]} trailing", MARKS[2]]
    )  # fmt: skip
    got = _same(native, lambda: facts.fact_tokens(near))
    assert {"1234567", "40"} <= got  # from the near misses
    assert not {"812", "/srv/out/s1/toolu_1.txt", "5120"} & got  # only ever in mark lines


_LINE_SEPS = (", ", "; ", " | ", " ", "  ", "\t", "\\n", "\\", "\n", "\x1c", "\x0b", "\xa0",
              "\x85", "\u2028", "\u3000", ",", "|", "é")  # fmt: skip
"""Separators, escaped newlines, ASCII and other whitespace, and near misses of them."""
lines = st.lists(
    st.tuples(st.integers(0, 130).map("w".__mul__), st.sampled_from(_LINE_SEPS)).map("".join),
    max_size=12,
).map("".join)
"""Lines with words of every length, so that cuts fall on every side of the 100 and 200 marks."""


@FEW
@given(st.one_of(lines, texts))
def test_unit_spans(native: ModuleType, text: str) -> None:
    spans = _same(native, lambda: units.unit_spans(text))
    assert native.unit_spans(text) == spans
    marked = f"{text}\n{note(12, '', 'toolu_1')}"
    _same(native, lambda: units.unit_spans(marked))


@pytest.mark.parametrize("sep", [" ", ", ", "; ", " | ", "\\n", "\t"])
def test_unit_spans_at_the_cut_marks(native: ModuleType, sep: str) -> None:
    cuts = [f" {'a' * a}{sep}{'b' * b} " for a in range(96, 104) for b in range(95, 106)]
    ends = [f"x{'y' * size}{sep}z" for size in range(197, 203)]
    _same(native, lambda: [units.unit_spans(text) for text in cuts + ends])


_EDGES = (
    "a1b2c3", "a1b2c3d", "1234567", "abcdefa", "deadbeef1_", "-deadbeef1-", "not found",
    "not\tfound", "not  found", "notfound", "time out", "timeout", "timed  out", "timedout",
    "xtimeout", "invalid_", "invalid_x", "xinvalid_y", "INVALID_A", "FAIL", "fail", "FAILS",
    "xERR", "ERR:", "HTTP 404", "HTTP/1.1 404", "HTTP 4040", "HTTP 404x", "HTTPS 404", "HTTP:404",
    "HTTP\x1c404", "status 404", "status: 404", "status404", "status 4040", "status:= 404x",
    "xstatus 404", "statuses 404", "C:\\x", "C:/ ", "1:/a/b", ":/a/b", "x:/a/b", "(/a/b", "=/a/",
    "'/a/b", "x/a/b", "/a/b", "/a//b", " /a/b@c", "\x1c/a/b", "</a/b", "/a/ ", "/a/b/ ", "1.2.3",
    "1.2.3x", "a1.2.3", "1..2.3", "1.2.3.", "v1.2", "1.2.3_", "1.2.3.4", "1.2.3.4:80",
    "1234.1.2.3", "1.2.3.4444", "1.2.3.4x", "localhost:80", "localhost:", "xlocalhost:80",
    "localhost:80x", "LOCALHOST:80", "pid 3", "pid=3", "pid:\x1c3", "pidx 3", "exit code 3",
    "tests: 12", "passed= x", "5ms", "5 ms", "5  ms", "5\x1cms", "5%", "5%x", "5 %", "1,024 MB",
    "x5ms", "_5ms", "5.5.lines", "5 line5", "5 files", "5mss", "1234", "123", "12345x", "x12345",
    "_1234", "1234_", "1.2,3:4x", "1:2", "1:", "a.py", "x-.py", "-.py", "..py", "a..py", ".py",
    "a.ps1", "a.ps2", "a.pyc", "a.Yaml", "a.jsx", "a.cjsx", "a.b.md", "a-b.log.x", "order 5",
    "order: -y", "order #", "order#x", "ordered 5", "confirmed: x", "message_id=5", "commit=#-",
    _HEX_RUN[:40], _HEX_RUN[:41],
)  # fmt: skip
"""Units at the edge of each pattern: a hit and its near misses."""


@pytest.mark.parametrize("edge", _EDGES)
def test_the_edges_of_each_pattern(native: ModuleType, edge: str) -> None:
    for unit in (edge, f" {edge} ", f"{edge}\n{edge}", f"a{edge}b", f"({edge}."):
        assert _score(native, unit) == _matched(unit), unit
        found = native.fact_tokens(unit, FACT_TOKEN.findall)
        assert list(found) == list(set(FACT_TOKEN.findall(unit))), unit


def test_known_scores_and_tokens(native: ModuleType) -> None:
    unit = "HTTP/1.1 404 not found at /a/b/c.py 1.2.3 deadbeef1 10.0.0.1 pid=3 5ms 12345 order #x"
    assert _score(native, unit) == _matched(unit) == 11
    text = "a C:/x y /a/b/ deadbeef1 1.2,3:4x"
    assert native.fact_tokens(text, FACT_TOKEN.findall) == {"C:/x", "/a/b", "deadbeef1", "1.2,3"}
    assert native.fact_tokens("é 12\nx 1.2", FACT_TOKEN.findall) == {"12", "1.2"}
    assert native.fact_tokens("é 12\nx 1.2", lambda line: ["seen"]) == {"seen", "1.2"}
    assert _score(native, "✖ failed") == -1
    with use(Kernels(native)):
        assert facts.unit_scores(["✖ failed"]) == [2]


def test_bad_types_raise_type_error(native: ModuleType) -> None:
    calls: list[Callable[[], object]] = [
        lambda: native.fact_scores([1]),
        lambda: native.fact_scores(["ok", b"bytes"]),
        lambda: native.fact_tokens(None, FACT_TOKEN.findall),
        lambda: native.fact_tokens("x", None),
        lambda: native.estimate_tokens(b"x"),
        lambda: native.unit_spans(b"x"),
    ]
    for call in calls:
        with pytest.raises(TypeError):
            call()


_ESTIMATE_PIECES = st.sampled_from(
    ["a", "Ab", "abcdef", "abcdefg", "x" * 13, "y" * 40, "1", "12", "12345", " ", "\t", "\n",
     "\x1c", "\x85", "\xa0", "é", "日本", "🙂", "\ud800", "_", "-", ".", "{}", "ſ", "K"]
)  # fmt: skip


@FEW
@given(st.one_of(st.lists(_ESTIMATE_PIECES, max_size=40).map("".join), st.text(max_size=80)))
def test_estimate_tokens(native: ModuleType, text: str) -> None:
    """Every count and every float addition of the byte-level Python, code point by code point."""
    _same(native, lambda: tokens.estimate_tokens(text))


_FOLD_ALPHABET = "0123456789abcXYZ .:/\n_-é٣\u0416\U0001f600"
"""ASCII digits and others, a non-ASCII digit (never folded), 1-, 2- and 4-byte kinds."""


@FEW
@given(st.lists(st.text(_FOLD_ALPHABET, max_size=30), max_size=12))
def test_digit_folding_is_translate(native: ModuleType, units: list[str]) -> None:
    """`score_key(s)` is `s.translate(_DIGIT_FOLD)` on both paths, and the C result is a
    canonical str (equal and hashing alike)."""
    for unit in units:
        want = unit.translate(facts._DIGIT_FOLD)
        got = native.fold_digits(unit)
        assert got == want and hash(got) == hash(want) and type(got) is str
    _same(native, lambda: facts.score_keys(units))
    _same(native, lambda: [facts.score_key(u) for u in units])
