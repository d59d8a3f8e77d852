"""The tokenizer-free estimate: the spec's examples and equality with the regex definition."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from factrail.core.kernels import Kernels, use
from factrail.core.tokens import TokenCache, estimate_tokens, estimate_tokens_reference


def test_spec_examples() -> None:
    cases = {
        "": 0,
        "hello world": 2,
        "abcdef": 1,
        "abcdefg": 2,
        "1234": 2,
        "123": 2,
        "{}": 2,
        "a b": 2,
        "é": 1,
        "a" * 13: 3,
        "a" * 19: 4,
    }
    for text, expected in cases.items():
        assert estimate_tokens(text) == expected, text
        assert estimate_tokens_reference(text) == expected, text


ALPHABET = (
    string.ascii_letters + string.digits + string.punctuation + " \t\n" + "éü中"
    + "\xa0\u3000\x85\u2028\u200b\x1c\x0b²\U0001f600"
)  # fmt: skip
"""ASCII, non-ASCII letters, non-ASCII whitespace (and a zero-width space, which is none),
ASCII separators, a non-ASCII digit and a 4-byte char."""


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=400))
def test_byte_counting_equals_regex_definition(text: str) -> None:
    """On the C kernel's path and on the byte-level Python's."""
    want = estimate_tokens_reference(text)
    with use(Kernels()):
        assert estimate_tokens(text) == want
    assert estimate_tokens(text) == want


def test_non_ascii_whitespace_is_free() -> None:
    for text in ("a\xa0b", "a\u3000b", "a\u2028b"):
        assert estimate_tokens(text) == estimate_tokens("a b") == 2
        with use(Kernels()):
            assert estimate_tokens(text) == 2


def test_cache_returns_the_same_figure_and_stays_bounded() -> None:
    cache = TokenCache(max_chars=3000, min_len=10)
    texts = [f"{i} " + "word " * 200 for i in range(5)]
    for t in texts:
        assert cache(t) == estimate_tokens(t)
    assert cache(texts[-1]) == estimate_tokens(texts[-1])
    assert cache._chars <= 3000
