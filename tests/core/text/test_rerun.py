"""Reruns: a text as hunks against an earlier one, the whole-line runs it keeps (in characters),
and hunks applied back by plain search, with errors that say which line was wrong."""

from __future__ import annotations

import pytest

from stream_ctx.core.text.plan import Ref, TextPlan, renamed
from stream_ctx.core.text.rerun import HunkError, Rerun, apply_hunks, line_matcher, rerun


def test_kept_runs_end_with_the_shorter_text_where_one_goes_on_past_the_other() -> None:
    # `keep` is the last line of one text and not of the other: its newline is not kept.
    assert rerun("x\nkeep", "y\nkeep\nz") == Rerun("@@\n-x\n+y\n keep\n+z", ((2, 2, 4),))
    assert rerun("x\nkeep\nz", "y\nkeep") == Rerun("@@\n-x\n+y\n keep\n-z", ((2, 2, 4),))


def test_a_kept_run_of_one_character_is_kept() -> None:
    assert rerun("a\nx", "b\nx") == Rerun("@@\n-a\n+b\n x", ((2, 2, 1),))
    old, new = "head\nkeep\n\nmid\nx", "top\nkeep\n\nnew\nx"
    hunks = "@@\n-head\n+top\n keep\n \n-mid\n+new\n x"
    assert rerun(old, new) == Rerun(hunks, ((5, 4, 6), (15, 14, 1)))


def test_the_line_matcher_takes_no_line_for_junk_however_often_it_occurs() -> None:
    # difflib's autojunk would drop `a` (over 1% of 200 lines or more) and match `x` instead.
    blocks = line_matcher(["x", *["a"] * 200], [*["a"] * 200, "x"]).get_matching_blocks()
    assert [tuple(block) for block in blocks] == [(1, 0, 200), (201, 201, 0)]


def test_a_hunk_is_applied_where_all_its_found_lines_stand_not_only_its_first() -> None:
    assert apply_hunks("a\nb\na\nc", "@@\n a\n-c\n+d") == "a\nb\na\nd"


def test_a_hunk_line_without_a_kept_removed_or_added_mark_is_refused() -> None:
    with pytest.raises(HunkError) as raised:
        apply_hunks("a", "@@\nXa")
    assert str(raised.value) == "a hunk line must start with ' ', '-' or '+': ['Xa']"


def test_a_hunk_not_found_names_its_first_two_lines_and_where_the_search_began() -> None:
    with pytest.raises(HunkError) as raised:
        apply_hunks("a", "@@\n-x\n-y\n-z")
    assert str(raised.value) == "hunk lines ['x', 'y']... not found after line 1"


def test_a_diff_plan_renamed_names_its_base_anew_though_it_has_no_references() -> None:
    plan = TextPlan(["new line\n"], diff_of=0, hunks="@@\n-old line\n+new line")
    assert renamed(plan, [7]) == TextPlan(["new line\n"], 7, "@@\n-old line\n+new line")
    literal = TextPlan(["just text"])
    assert renamed(literal, [7]) is literal
    with_ref = TextPlan(["a", Ref(0, 1, 2, "head", "tail")])
    assert renamed(with_ref, {0: 3}) == TextPlan(["a", Ref(3, 1, 2, "head", "tail")])
