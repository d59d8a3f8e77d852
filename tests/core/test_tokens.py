"""The tokenizer-free estimate: the spec's examples and equality with the regex definition."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

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


ALPHABET = string.ascii_letters + string.digits + string.punctuation + " \t\n" + "éü中"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=400))
def test_byte_counting_equals_regex_definition(text: str) -> None:
    assert estimate_tokens(text) == estimate_tokens_reference(text)


def test_cache_returns_the_same_figure_and_stays_bounded() -> None:
    cache = TokenCache(max_chars=3000, min_len=10)
    texts = [f"{i} " + "word " * 200 for i in range(5)]
    for t in texts:
        assert cache(t) == estimate_tokens(t)
    assert cache(texts[-1]) == estimate_tokens(texts[-1])
    assert cache._chars <= 3000
