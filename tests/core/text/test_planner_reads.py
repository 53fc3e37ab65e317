"""What a plan read: the earlier texts the Planner names with each plan, and whether a text's plan
may read a text at given places (the cue to plan it again when texts move). A text sharing at
least half of a text's characters is read however many later places of their lines stand between."""

from __future__ import annotations

from stream_ctx.core.memo import Memos
from stream_ctx.core.text.plan import TextPlan
from stream_ctx.core.text.repeats import MAX_CANDIDATES, Planner
from stream_ctx.core.text.textindex import TextIndex

# Sixteen characters, two words: a unit that may start a run, too few words to be looked for as
# a chunk's first words.
_LINE = "first-line here\n"
# Texts holding the line after text 0, as many as the latest places tried.
_FILLERS = [f"{_LINE}filler line number {k}\n" for k in range(MAX_CANDIDATES)]


def _planner(texts: list[str]) -> Planner:
    memos = Memos()
    index = TextIndex(memos)
    return Planner(index, [indexed.serial for indexed in index.add(texts)], memos)


def _read(texts: list[str]) -> set[int]:
    """What the last text's plan read."""
    return _planner(texts).plan(len(texts) - 1)[1]


def test_a_text_sharing_half_of_a_later_one_is_read_past_the_latest_places_of_their_lines() -> None:
    assert len(_LINE) == 16
    fillers = set(range(1, MAX_CANDIDATES + 1))
    zero = _LINE + "second line of zero\n"
    # 16 characters of 32 shared: half.
    assert _read([zero, *_FILLERS, _LINE + "zzzz yyyy xxxx w"]) == {0, *fillers}
    # 16 of 33: less than half.
    assert _read([zero, *_FILLERS, _LINE + "zzzz yyyy xxxx ww"]) == fillers
    # Text 0 holding the line twice shares its 16 characters once: less than half of 39.
    twice = zero + _LINE
    assert _read([twice, *_FILLERS, _LINE + "zzzz yyyy xxxx wwww vv\n"]) == fillers


def test_a_short_text_equal_to_earlier_ones_reads_them_and_the_latest_places_of_its_lines() -> None:
    # Too short to be named `[§2]`, so it is written out; text 0, sharing all of it, is not read.
    short = "hello there\nagain world"
    texts = [short + "\nextra bit", *[short] * 9, short]
    planner = _planner(texts)
    assert planner.plan(10) == (TextPlan([short]), set(range(1, 10)))


def test_a_plan_may_read_an_earlier_place_only_through_what_it_shares_with_the_text_there() -> None:
    unrelated = "unrelated words here\n"
    planner = _planner([unrelated, unrelated, "a text of its own\n"])
    assert not planner.may_read(1, set(), set())  # the equal text is not at those places
    assert planner.may_read(1, {0}, set())
    assert not planner.may_read(2, {2}, set())  # its own place is not an earlier one
    # Sharing more than half with text 0, whose place is not among those asked about.
    planner = _planner([_LINE + "second line of zero\n", unrelated, _LINE + "tail"])
    assert not planner.may_read(2, {1}, {_LINE})
    assert planner.may_read(2, {0}, {_LINE})


def test_a_plan_may_read_a_text_sharing_exactly_half_of_it_past_the_latest_places() -> None:
    texts = [_LINE + "second line of zero\n", *_FILLERS, _LINE + "zzzz yyyy xxxx w"]
    planner = _planner(texts)
    last = len(texts) - 1
    assert planner.may_read(last, {0}, {_LINE})
    assert not planner.may_read(last, {0}, set())
