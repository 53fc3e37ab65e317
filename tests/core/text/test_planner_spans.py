"""The planner's spans: the narrower passages tried when a whole one cannot be quoted, where a
unit may start or end a passage inside an earlier text, and literal runs joined."""

from __future__ import annotations

from stream_ctx.core.text.plan import Ref
from stream_ctx.core.text.repeats import is_word_end, is_word_start, joined_literals, narrowed


def test_a_span_is_narrowed_by_up_to_three_units_at_either_end_widest_first() -> None:
    starts = [0, 10, 20, 30, 40, 50, 60]
    assert narrowed(starts, 0, 60) == [
        (0, 60),
        (0, 50),
        (10, 60),
        (0, 40),
        (10, 50),
        (20, 60),
        (0, 30),
        (10, 40),
        (20, 50),
        (30, 60),
        (10, 30),
        (20, 40),
        (30, 50),
        (20, 30),
        (30, 40),
    ]
    assert narrowed([0, 10, 20], 0, 20) == [(0, 20), (0, 10), (10, 20)]


def test_a_unit_starts_a_word_at_the_text_start_after_a_blank_or_when_it_starts_blank() -> None:
    assert is_word_start("abc", 0, "abc")
    assert is_word_start("x abc", 2, "abc")
    assert is_word_start("xx\tab", 2, "\tab")
    assert not is_word_start("xabc", 1, "abc")
    assert not is_word_start("xyabc", 2, "abc")


def test_a_unit_ends_a_word_at_the_text_end_before_a_blank_or_when_it_ends_blank() -> None:
    assert is_word_end("abc", 3, "abc")
    assert is_word_end("abc d", 3, "abc")
    assert is_word_end("ab\ncd", 3, "ab\n")
    assert not is_word_end("abcd", 3, "abc")


def test_adjacent_literal_pieces_are_joined_and_references_kept_apart() -> None:
    ref = Ref(0, 0, 5)
    assert joined_literals(["a", "b", ref, "c", "d", "e", ref, ref, "f"]) == [
        "ab",
        ref,
        "cde",
        ref,
        ref,
        "f",
    ]
