"""find_passage and choose_quotes at their edges: a head that is empty, a passage with a blank at
either end, and a passage found where it would start inside a word."""

from __future__ import annotations

from stream_ctx.core.text.quotes import choose_quotes, find_passage


def test_an_empty_head_finds_a_passage_that_starts_the_source() -> None:
    assert find_passage("tail end, then more", "", "tail end") == "tail end"


def test_a_passage_with_a_blank_at_either_end_gets_no_quotes() -> None:
    source = "x: abcdef ghijkl mnop"
    assert choose_quotes(source, "abcdef ghijkl") == ("abcdef", "ghijkl", 3)
    assert choose_quotes(source, " abcdef ghijkl") is None
    assert choose_quotes(source, "abcdef ghijkl ") is None


def test_a_passage_found_just_after_an_underscore_gets_no_quotes() -> None:
    # `_` is a word character: a reader's search would land inside `_abcdef`.
    assert choose_quotes("_abcdef ghijkl mnopqr", "abcdef ghijkl mnopqr") is None
    assert choose_quotes("-abcdef ghijkl mnopqr", "abcdef ghijkl mnopqr") == (
        "abcdef",
        "mnopqr",
        1,
    )
