"""What the planner reckons a reference, a diff and written pieces cost: the digits of an entry's
number count, and a passage long enough beside its reference is taken without counting tokens."""

from __future__ import annotations

from stream_ctx.core.text.plan import Ref, TextPlan
from stream_ctx.core.text.repeats import SURELY_WORTH, diff_cost, is_worth, pieces_cost


def test_a_passage_of_few_tokens_is_worth_naming_from_eight_times_its_reference_long() -> None:
    # One token however long: only the length rule can make it worth naming.
    assert SURELY_WORTH == 8
    assert is_worth(8, "x" * 32, "", "")  # `[§9]`: 4 characters
    assert not is_worth(8, "x" * 31, "", "")
    assert not is_worth(9, "x" * 39, "", "")  # `[§10]`: 5 characters
    assert is_worth(9, "x" * 40, "", "")
    quoted = len('[§9 "head"…"tail"]')
    assert quoted == 18
    assert is_worth(8, "x" * 8 * quoted, "head", "tail")
    assert not is_worth(8, "x" * (8 * quoted - 1), "head", "tail")
    assert not is_worth(9, "x" * (8 * (quoted + 1) - 1), "head", "tail")  # `[§10 "head"…"tail"]`
    assert is_worth(9, "x" * 8 * (quoted + 1), "head", "tail")


def test_a_reference_and_a_diff_cost_one_token_more_from_entry_1000() -> None:
    # Entry numbers are written from 1: Ref source 998 is `§999`, a diff's base is counted as is.
    assert pieces_cost([Ref(998, 0, 1, "ab", "cd")]) == 7
    assert pieces_cost([Ref(999, 0, 1, "ab", "cd")]) == 8
    assert pieces_cost(["ab cd", Ref(0, 0, 1, "ab", "cd")]) == 9
    assert diff_cost(TextPlan([], 999, "")) == 6
    assert diff_cost(TextPlan([], 1000, "")) == 7
