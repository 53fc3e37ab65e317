"""common_run: the length of the equal run from two positions, against a character-by-character
count, for text and token lists, runs shorter and longer than its first slice."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from stream_ctx.core.text.textmatch import common_run


def _brute(a: Sequence[object], a_pos: int, b: Sequence[object], b_pos: int) -> int:
    run = 0
    while a_pos + run < len(a) and b_pos + run < len(b) and a[a_pos + run] == b[b_pos + run]:
        run += 1
    return run


@settings(max_examples=300, deadline=None)
@given(
    shared=st.text("ab", max_size=200),
    a_tail=st.text("abc", max_size=5),
    b_tail=st.text("abc", max_size=5),
    a_lead=st.text("xy", max_size=3),
    b_lead=st.text("xy", max_size=3),
)
def test_common_run_equals_a_character_count(
    shared: str, a_tail: str, b_tail: str, a_lead: str, b_lead: str
) -> None:
    a, b = a_lead + shared + a_tail, b_lead + shared + b_tail
    got = common_run(a, len(a_lead), b, len(b_lead))
    assert got == _brute(a, len(a_lead), b, len(b_lead))
    assert got >= len(shared)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=150), st.data())
def test_common_run_of_token_lists_from_any_positions(
    tokens: list[int], data: st.DataObject
) -> None:
    other = tokens + data.draw(st.lists(st.integers(0, 3), max_size=3))
    a_pos = data.draw(st.integers(0, len(tokens)))
    b_pos = data.draw(st.integers(0, len(other)))
    assert common_run(tokens, a_pos, other, b_pos) == _brute(tokens, a_pos, other, b_pos)


def test_common_run_of_identical_texts_is_their_length_at_every_size() -> None:
    for size in [0, 1, 63, 64, 65, 127, 128, 129, 200]:
        text = "ab" * size
        assert common_run(text, 0, text, 0) == 2 * size
        assert common_run(text, 1, text + "!", 1) == max(2 * size - 1, 0)
