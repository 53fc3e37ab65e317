"""TextIndex: each held text's units, how often each occurs, and which held texts hold the first
words of which (both ways, whichever of the two was added first)."""

from __future__ import annotations

from stream_ctx.core.memo import Memos
from stream_ctx.core.text.textindex import TextIndex, lead_of


def test_a_lead_is_the_first_units_words_from_three_words_on() -> None:
    assert lead_of(["alpha beta gamma\n", "more"]) == "alpha beta gamma"
    assert lead_of(["alpha beta\n", "more words here"]) is None


def test_a_unit_repeated_within_a_text_is_counted_each_time() -> None:
    (held,) = TextIndex(Memos()).add(["Hello there friend.\nHello there friend.\nbye"])
    assert held.units == ["Hello there friend.\n", "Hello there friend.\n", "bye"]
    assert held.occurrences == {"Hello there friend.\n": 2}
    assert held.lead == "Hello there friend."


def test_every_held_text_that_holds_a_new_texts_first_words_is_linked_and_back() -> None:
    index = TextIndex(Memos())
    index.add(
        [
            "alpha beta gamma\nthe first text",  # its first words, found at the very start
            "ok\nthen alpha beta gamma again",  # too few first words to look for
            "delta epsilon zeta\nalpha beta gamma also here",
        ]
    )
    index.add(["alpha beta gamma\nand delta epsilon zeta"])  # holds the third text's first words
    links = {t.serial: (t.lead, t.continued_in, t.leads) for t in index.texts.values()}
    assert links == {
        0: ("alpha beta gamma", {1, 2, 3}, {3}),
        1: (None, set(), {0, 3}),
        2: ("delta epsilon zeta", {3}, {0, 3}),
        3: ("alpha beta gamma", {0, 1, 2}, {0, 2}),
    }


def test_first_words_that_end_a_held_text_link_to_that_text_however_many_come_before() -> None:
    index = TextIndex(Memos())
    index.add([*(f"filler text {n}" for n in range(5)), "ends with x y z"])
    (new,) = index.add(["x y z\nthe new text"])
    assert (new.serial, new.continued_in, index.texts[5].leads) == (6, {5}, {6})
