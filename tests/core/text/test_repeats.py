"""plan_texts and its quotes: which repeats become references (whole lines and sentences, long
enough, found by spottable words of their first and last line) and which texts become diffs.

That every planned context reads back is test_render.py's and test_readable.py's."""

from __future__ import annotations

from stream_ctx.core.entries.entry import render_lean
from stream_ctx.core.entries.reader import read_context
from stream_ctx.core.text.plan import Ref, TextPlan, resolve
from stream_ctx.core.text.quotes import choose_quotes, find_passage
from stream_ctx.core.text.repeats import MIN_PASSAGE_CHARS, diff_cost, pieces_cost, plan_texts
from tests.factories import make_context_item


def _context(contents: list[str]) -> str:
    items = [make_context_item(id=f"i{n}", content=text) for n, text in enumerate(contents)]
    return "".join(text for _, text in render_lean(items, plan_texts(contents)))


def _block(words: tuple[str, ...]) -> str:
    return "".join(f"clients must refresh {word} before the grace hour ends\n" for word in words)


def test_a_passage_shorter_than_the_minimum_is_written_out_though_naming_it_costs_less() -> None:
    # Token-dense lines, so that `[§1]` costs far less than either; the line before the repeat
    # is long enough that a diff is not tried.
    before = "another line, longer than the passage it comes before\n"
    short = "a1 b2 c3 d4 e5 f6 g7 h8"
    assert len(short) == MIN_PASSAGE_CHARS - 1
    assert plan_texts([short, before + short])[1] == TextPlan([before + short])
    long = short + "9"
    assert plan_texts([long, before + long])[1] == TextPlan([before, Ref(0, 0, len(long))])


def test_quotes_are_the_fewest_spottable_words_of_the_first_and_last_line() -> None:
    # Spottable: six characters at the least, with a run of three letters or digits.
    source = "intro\nto be or not to be, that is\nthe question we ask of it\nend\n"
    passage = "to be or not to be, that is\nthe question we ask of it"
    assert choose_quotes(source, passage) == ("to be or not", "ask of it", 6)
    assert find_passage(source, "to be or not", "ask of it") == passage


def test_quotes_grow_until_a_plain_search_lands_on_the_passage() -> None:
    # Every head up to `tokens` first finds the line before the passage.
    source = "the cache rejects expired tokens under load\n"
    passage = "the cache rejects expired tokens when a key rotates"
    source += passage
    head, tail, start = choose_quotes(source, passage) or ("", "", -1)
    assert (head, tail, start) == ("the cache rejects expired tokens when", "rotates", 44)
    assert find_passage(source, head, tail) == passage


def test_quotes_come_only_from_the_first_and_last_line() -> None:
    # The first line stands earlier in the source too: no words of it find the passage, and a
    # quote running into the second line is not tried.
    source = "to be or not to be\nsomething else\nto be or not to be\nthe question asked\n"
    assert choose_quotes(source, "to be or not to be\nthe question asked") is None
    # A first line with nothing spottable in it.
    assert choose_quotes("x\n== == ==\nalpha beta gamma\n", "== == ==\nalpha beta gamma") is None


def test_a_passage_whose_first_line_cannot_be_quoted_is_referenced_from_its_second() -> None:
    block = "----------\n" + _block(("tokens", "keys", "certs", "sessions"))
    contents = ["head text alpha\n" + block + "tail", "other head beta\n" + block + "end"]
    literal, ref, rest = plan_texts(contents)[1].pieces
    assert literal == "other head beta\n----------\n"
    assert isinstance(ref, Ref) and ref.head == "clients"
    assert rest == "\nend"


def test_a_head_that_its_closing_quote_would_cut_short_is_not_used() -> None:
    # Written `"Type "…"…"`, the head `Type "…` would read back as `Type `: a longer one is used.
    line = 'Type "… to continue with the installer and then wait for it\n'
    steps = "".join(f"step {n} of the long installation guide is written here\n" for n in range(6))
    contents = ["an unrelated first line\n" + line + steps + "end", "a start\n" + line + steps]
    (ref,) = [p for p in plan_texts(contents)[1].pieces if isinstance(p, Ref)]
    assert ref.head == 'Type "… to'
    assert [item.content for item in read_context(_context(contents))] == contents


def test_a_passage_inside_one_text_refers_back_to_the_same_text() -> None:
    block = _block(("tokens", "keys", "certs"))
    text = "start of the text\n" + block + "middle of the text\n" + block + "end"
    (plan,) = plan_texts([text])
    assert plan.pieces[1:] == [
        Ref(0, 18, len(block) - 1, "clients", "certs before the grace hour ends"),
        "\nend",
    ]
    assert resolve(plan.pieces, []) == text


def test_a_rerun_with_a_few_changed_lines_becomes_a_diff() -> None:
    config = "".join(f"  replicas_{n}: {n * 3}\n" for n in range(40))
    rerun = config.replace("replicas_5: 15", "replicas_5: 16")
    rerun = rerun.replace("replicas_22: 66", "replicas_22: 67")
    plan = plan_texts([config, rerun])[1]
    assert (plan.diff_of, plan.hunks) == (
        0,
        "@@\n   replicas_4: 12\n-  replicas_5: 15\n+  replicas_5: 16\n   replicas_6: 18\n"
        "@@\n   replicas_21: 63\n-  replicas_22: 66\n+  replicas_22: 67\n   replicas_23: 69",
    )
    assert resolve(plan.pieces, [config]) == rerun  # the unchanged runs, for the dedup graph
    context = _context([config, rerun])
    assert context.endswith(f"§2 i1 ^1\n[§1 with changes:]\n{plan.hunks}\n")
    assert [item.content for item in read_context(context)] == [config, rerun]


def test_a_passage_found_first_inside_a_word_of_its_source_is_written_out() -> None:
    # Quotes find the first place: here the line's first words stand first in `xthe`.
    line = "the cache rejects expired tokens under load, by far the most often of all the errors\n"
    text = "intro line here\n" + line + "more words to end it\n"
    assert plan_texts(["x" + line + line, text])[1] == TextPlan([text])


def test_a_chunk_that_ends_inside_a_word_is_referenced_up_to_its_last_whole_line() -> None:
    # A chunk cut between words at its start and inside a word at its end.
    doc = "".join(f"Line {n} tells how the cache rejects expired tokens, {n}.\n" for n in range(12))
    start = doc.index("how", doc.index("Line 3"))
    end = doc.index("expired", doc.index("Line 8")) + 4
    chunk = doc[start:end]
    ref, rest = plan_texts([doc, chunk])[1].pieces
    assert isinstance(ref, Ref) and (ref.start, ref.tail) == (start, "tokens, 7.")
    assert rest == "\nLine 8 tells how the cache rejects expi"


def test_a_rerun_sharing_exactly_half_of_its_characters_is_tried_as_a_diff() -> None:
    old = "- item one\n- item two\n- item three\n"
    new = "- item one\n- item two\nq r s t u v w y z k l\n"
    assert len(new) == 2 * len("- item one\n- item two\n")
    assert plan_texts([old, new])[1] == TextPlan(
        [Ref(0, 0, 22), "q r s t u v w y z k l\n"],
        0,
        "@@\n - item two\n-- item three\n+q r s t u v w y z k l\n ",
    )


def test_a_diff_costing_exactly_one_and_a_half_times_the_pieces_is_written() -> None:
    old = "}\n== ==\nclients must refresh tokens before the grace hour ends\nhello there\nok\n"
    old += "alpha beta\nok\n== ==\n"
    new = "== ==\nclients must refresh tokens before the grace hour ends\nhello there\nok\n"
    # Written out (no line of it is worth a reference), the text costs 18 tokens.
    plan = plan_texts([old, new])[1]
    assert plan == TextPlan(
        [Ref(0, 2, len(new))], 0, "@@\n-}\n == ==\n@@\n ok\n-alpha beta\n-ok\n-== ==\n "
    )
    assert (diff_cost(plan), pieces_cost([new])) == (27, 18)
