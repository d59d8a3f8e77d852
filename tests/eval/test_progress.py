"""The progress bar draws on a terminal and stays silent elsewhere."""

from __future__ import annotations

import io

import pytest

from factrail.eval.progress import BAR_WIDTH, progress, render


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_on_a_non_tty_stream() -> None:
    stream = io.StringIO()
    assert list(progress(range(5), 5, "eval", stream=stream)) == [0, 1, 2, 3, 4]
    assert stream.getvalue() == ""


def test_draws_in_place_on_a_tty_and_ends_with_a_newline() -> None:
    stream = FakeTTY()
    items = list(progress(["a", "b", "c", "d"], 4, "eval", stream=stream))
    assert items == ["a", "b", "c", "d"]
    out = stream.getvalue()
    assert out.endswith("\n")
    frames = out.rstrip("\n").split("\r")[1:]
    assert [f.rstrip().rsplit(" ", 1)[-1] for f in frames] == ["0/4", "1/4", "2/4", "3/4", "4/4"]
    assert frames[-1].startswith("eval [" + "#" * BAR_WIDTH + "]")


def test_total_defaults_to_the_length_of_a_sized_iterable() -> None:
    stream = FakeTTY()
    list(progress([1, 2], label="x", stream=stream))
    assert stream.getvalue().rstrip().endswith("2/2")


def test_unsized_iterable_without_total_shows_a_count() -> None:
    stream = FakeTTY()
    list(progress(iter([1, 2, 3]), label="x", stream=stream))
    assert stream.getvalue().rstrip().endswith("x 3")


def test_bar_is_closed_with_a_newline_when_the_loop_breaks() -> None:
    stream = FakeTTY()
    for item in progress(range(10), 10, "x", stream=stream):
        if item == 2:
            break
    assert stream.getvalue().endswith("2/10\n")


def test_exception_inside_the_loop_propagates() -> None:
    stream = FakeTTY()
    with pytest.raises(RuntimeError):
        for _ in progress(range(3), 3, "x", stream=stream):
            raise RuntimeError("boom")
    assert stream.getvalue().endswith("\n")


def test_render_fills_proportionally_and_clamps() -> None:
    assert render(5, 10, "r") == "r [" + "#" * (BAR_WIDTH // 2) + "." * (BAR_WIDTH // 2) + "] 5/10"
    assert render(12, 10, "r").count("#") == BAR_WIDTH
