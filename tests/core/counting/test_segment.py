"""Entry cuts: after the header line and after the last letter or digit, never at either end."""

from __future__ import annotations

import pytest

from stream_ctx.core.counting.segment import entry_cuts


@pytest.mark.parametrize(
    ("rest", "cuts"),
    [
        (" a (chunk)\nFirst text.\n\n", [11, 21]),
        ("", []),
        ("ab", []),  # the last word ends the text
        (" ab", []),
        ("a.", [1]),
        ("..", []),  # no word at all
        ("abc.", [3]),  # no line break: no header cut at the start
        ("\nabc", [1]),  # an empty header line still ends at its line break
        (" a\n", [2]),  # a header line that ends the text is not cut after
    ],
)
def test_an_entry_is_cut_after_its_header_line_and_after_its_last_word(
    rest: str, cuts: list[int]
) -> None:
    assert entry_cuts(rest) == cuts
