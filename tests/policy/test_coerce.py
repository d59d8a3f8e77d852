"""Lenient coercion of configuration values (spec §7.1; criteria 12 and 51)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from factrail.policy.coerce import (
    count,
    finite_number,
    flag,
    js_string,
    keyword,
    list_option,
    non_empty_string,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3.0),
        (2.5, 2.5),
        (" 120000 ", 120000.0),
        ("0.2", 0.2),
        ("1e3", 1000.0),
        ("-4", -4.0),
        ("1_000", None),
        ("inf", None),
        ("NaN", None),
        (math.inf, None),
        ("lots", None),
        ("", None),
        ("١٢", None),
        (True, None),
        (None, None),
        ([1], None),
        ({}, None),
    ],
)
def test_finite_number(value: Any, expected: float | None) -> None:
    assert finite_number(value) == expected


def test_count_floors_and_falls_back() -> None:
    assert count("4", 9) == 4
    assert count(4.9, 9) == 4
    assert count(0, 9) == 0
    assert count(-1, 9) == 9
    assert count("NaN", 9) == 9
    assert count({}, 9) == 9


def test_keyword_and_non_empty_string() -> None:
    assert keyword(" TEV ") == "tev"
    assert keyword("   ") is None
    assert keyword(7) is None
    assert non_empty_string(" x ") == " x "
    assert non_empty_string("") is None
    assert non_empty_string(5) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (0.0, "0"),
        (7, "7"),
        (2.5, "2.5"),
        (-3.0, "-3"),
        ("as is ", "as is "),
        ([1, None, "b", [2, 3]], "1,,b,2,3"),
        ({"a": 1}, "[object Object]"),
    ],
)
def test_js_string(value: Any, expected: str) -> None:
    assert js_string(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        ("yes", True),
        (" ON ", True),
        ("1", True),
        ("OFF", False),
        ("no", False),
        ("0", False),
        ("perhaps", None),
        (1, None),
        (0, None),
        (None, None),
    ],
)
def test_flag_falls_back_to_the_default(value: Any, expected: bool | None) -> None:
    for default in (True, False):
        assert flag(value, default) == (default if expected is None else expected)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["a", " b "], ("a", "b")),
        ("a, b,,", ("a", "b")),
        ([7, None, " ", True], ("7", "true")),
        ([], ()),
        ("", None),
        ("  ", None),
        (None, None),
        (42, None),
        ({}, None),
    ],
)
def test_list_option(value: Any, expected: tuple[str, ...] | None) -> None:
    """Criterion 12: None means "use the fallback"; an explicit [] is an empty list."""
    assert list_option(value) == expected
