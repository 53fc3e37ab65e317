"""Which reference the planner picks when several would read back alike: the text it names, where
the passage starts and ends, and which chunk a text continues. Each test pins the plan of a small
crafted context."""

from __future__ import annotations

from stream_ctx.core.memo import Memos
from stream_ctx.core.text.plan import Ref, TextPlan, resolve
from stream_ctx.core.text.repeats import MAX_CANDIDATES, MIN_PASSAGE_CHARS, Planner, plan_texts
from stream_ctx.core.text.textindex import TextIndex

# Three lines long enough to be referenced together, each a unit that may start a run.
_BLOCK = "".join(
    f"clients must refresh {word} before the grace hour ends\n"
    for word in ("tokens", "keys", "certs")
)
_BLOCK_TAIL = "certs before the grace hour ends"
# One-word lines: no unit of them may start a run, so only a chunk's continuation refers to them.
_WORDS = "alphabet\nbetamax\ngammaray\ndeltawing\nepsilons\nzetaline\netaquark\nthetarho\n"


def _block_ref(source: int, start: int) -> Ref:
    return Ref(source, start, len(_BLOCK) - 1, "clients", _BLOCK_TAIL)


def _words_ref(source: int, start: int) -> Ref:
    return Ref(source, start, len(_WORDS) - 1, "alphabet", "thetarho")


def _planned(texts: list[str]) -> list[tuple[TextPlan, set[int]]]:
    memos = Memos()
    index = TextIndex(memos)
    planner = Planner(index, [indexed.serial for indexed in index.add(texts)], memos)
    return [planner.plan(n) for n in range(len(texts))]


def test_a_passage_is_named_in_an_earlier_text_that_holds_it_whole() -> None:
    # Text 1 holds the longer run, but its last line cannot be quoted: the passage left is
    # text 0's block, and text 0 is named.
    contents = [
        "head zero line\n" + _BLOCK + "tail0",
        "head one line\n" + _BLOCK + "== ==\ntail1",
        "head two line\n" + _BLOCK + "== ==\ntail2",
    ]
    plan = plan_texts(contents)[2]
    assert plan.pieces == ["head two line\n", _block_ref(0, 15), "\n== ==\ntail2"]


def test_a_block_repeated_back_to_back_refers_to_its_first_copy_each_time() -> None:
    text = "start of the text\n" + _BLOCK + _BLOCK + _BLOCK + "end"
    (plan,) = plan_texts([text])
    ref = _block_ref(0, 18)
    assert plan.pieces == [text[: 18 + len(_BLOCK)], ref, "\n", ref, "\nend"]
    assert resolve(plan.pieces, []) == text


def test_of_equally_long_runs_the_earliest_is_named_with_the_line_it_shares_before_them() -> None:
    contents = [
        "Introduction\n" + _BLOCK + "tail0",
        "Other intro\n" + _BLOCK + "tail1",
        "zzz\nIntroduction\n" + _BLOCK + "tail2",
    ]
    plan = plan_texts(contents)[2]
    assert plan.pieces == [
        "zzz\n",
        Ref(0, 0, len("Introduction\n" + _BLOCK) - 1, "Introduction", _BLOCK_TAIL),
        "\ntail2",
    ]


def test_a_second_reference_takes_in_the_line_before_its_run_in_its_source() -> None:
    servers = _BLOCK.replace("clients", "servers")
    contents = [
        "zero head line\n" + _BLOCK + "end0",
        "one head line\nIntroduction\n" + servers + "end1",
        _BLOCK + "Introduction\n" + servers,
    ]
    plan = plan_texts(contents)[2]
    assert plan.pieces == [
        _block_ref(0, 15),
        "\n",
        Ref(1, 14, len("Introduction\n" + servers) - 1, "Introduction", _BLOCK_TAIL),
        "\n",
    ]


def test_a_run_from_a_texts_first_unit_takes_in_nothing_before_it() -> None:
    # The text's last line stands just before the run in the source: it is not taken in.
    contents = [
        "Zed line last\nalpha beta\n" + _BLOCK + "tail",
        "alpha beta\n" + _BLOCK + "Zed line last\n",
    ]
    (first, first_read), (second, second_read) = _planned(contents)
    assert (first, first_read) == (TextPlan([contents[0]]), set())
    whole = len("alpha beta\n" + _BLOCK) - 1
    assert second.pieces == [
        Ref(0, 14, whole, "alpha beta", _BLOCK_TAIL),
        "\nZed line last\n",
    ]
    assert second_read == {0}


def test_an_earlier_text_standing_whole_in_a_later_one_is_named_only_when_that_saves_tokens() -> (
    None
):
    # 29 characters in two tokens: `[§1]` saves nothing. 28 characters in eight tokens: it does.
    few = "abcdefghijklmnopqrstuvwxyz ab"
    assert plan_texts([few, "other line here\n" + few])[1] == TextPlan(["other line here\n" + few])
    many = "the cat sat on a red mat, ok"
    assert plan_texts([many, "other line here\n" + many])[1] == TextPlan(
        ["other line here\n", Ref(0, 0, len(many))]
    )


def test_a_chunk_continuing_two_earlier_texts_refers_to_the_nearest() -> None:
    lead = "how the cache rejects expired tokens\n"
    contents = ["zero\n" + lead + _WORDS + "end0", "one\n" + lead + _WORDS + "end1", lead + _WORDS]
    plans = plan_texts(contents)
    length = len(lead + _WORDS) - 1
    assert plans[1].pieces == ["one\n", Ref(0, 5, length, "how the", "thetarho"), "\nend1"]
    assert plans[2].pieces == [Ref(1, 4, length, "how the", "thetarho"), "\n"]


def test_a_chunk_whose_first_line_cannot_be_quoted_refers_to_the_lines_it_continues_with() -> None:
    # `x y zz` holds no spottable word; the chunk then goes its own way.
    new = "completely new line here\nand another one\n"
    contents = ["x y zz\n" + _WORDS + "end0", "x y zz\n" + _WORDS + new]
    assert plan_texts(contents)[1].pieces == ["x y zz\n", _words_ref(0, 7), "\n" + new]


def test_a_chunk_passes_over_an_earlier_text_holding_its_first_words_inside_a_word() -> None:
    contents = [
        "zero\nx y zz\n" + _WORDS + "end0",
        "onewx y zz\n" + _WORDS + "end1",
        "x y zz\n" + _WORDS,
    ]
    plans = plan_texts(contents)
    assert plans[1] == TextPlan([contents[1]])
    assert plans[2].pieces == ["x y zz\n", _words_ref(0, 12), "\n"]


def test_a_chunk_continues_only_the_first_place_of_its_first_words() -> None:
    # There it stands inside a word, so the chunk continues nothing, though it stands whole later.
    chunk = "x y zz\n" + _WORDS
    assert plan_texts(["wx y zz\nfoo\n" + chunk + "end0", chunk])[1] == TextPlan([chunk])


def test_a_chunk_as_long_as_the_shortest_passage_that_may_be_named_is_named_whole() -> None:
    # Its first line, too short to start a run, stands inside a longer line of text 0.
    chunk = "abc d e\na.b.c.d.e\nbetama"
    assert len(chunk) == MIN_PASSAGE_CHARS
    plan = plan_texts(["zero abc d e\na.b.c.d.e\nbetama\nmore", chunk])[1]
    assert plan == TextPlan([Ref(0, 5, len(chunk), "abc d e", "betama")])


def test_a_chunk_continues_only_texts_of_the_context_being_planned() -> None:
    # The index also holds a text with the chunk's first words that this context leaves out.
    memos = Memos()
    index = TextIndex(memos)
    chunk = "x y zz\n" + _WORDS
    serials = [held.serial for held in index.add(["zero\n" + chunk + "end0", chunk, "y x y zz\n"])]
    planner = Planner(index, serials[:2], memos)
    assert planner.plan(1) == (TextPlan(["x y zz\n", _words_ref(0, 12), "\n"]), {0})


def test_a_block_recurring_with_the_lines_after_it_refers_back_to_its_first_copy() -> None:
    # The first copy of the block is text 0's; the block and the lines after it, the text's own.
    after = "zeta line one here\nzeta line two here\n"
    text = _BLOCK + after + _BLOCK + after + "end"
    plan = plan_texts(["head\n" + _BLOCK + "tail0", text])[1]
    assert plan.pieces == [
        _block_ref(0, 5),
        "\n" + after,
        Ref(1, 0, len(_BLOCK + after) - 1, "clients", "two here"),
        "\nend",
    ]


def test_a_line_recurring_after_many_references_still_finds_its_longest_earlier_run() -> None:
    # Each reference between the line's two places leaves the text's own first place of it as
    # a candidate once, never crowding out text 0's.
    line = "shared opening line\n"
    rows = [
        f"line {k} of the long list that keeps on going well past the sixty character mark\n"
        for k in range(MAX_CANDIDATES)
    ]
    text = (
        line + "".join(f"lit {k}\n{row}" for k, row in enumerate(rows)) + "lit 8\n" + line + _WORDS
    )
    plan = plan_texts(["head\n" + line + _WORDS + "tail", "".join(rows), text])[2]
    assert plan.pieces[-2:] == [Ref(0, 5, len(line + _WORDS) - 1, "shared", "thetarho"), "\n"]
    assert plan.pieces[1] == Ref(1, 0, len(rows[0]) - 1, "line 0", "character mark")


def test_a_partial_first_line_is_taken_in_only_where_the_source_has_it_before_the_run() -> None:
    # The longest run is text 0's second copy of the four lines, after `Other`: the text's first
    # line is not taken in, though text 0 starts with it and the run's first two lines.
    rows = [f"clients must refresh {w} before the grace hour ends\n" for w in ("tokens", "keys")]
    more = [f"clients must refresh {w} before the grace hour ends\n" for w in ("certs", "roles")]
    intro = "Introductionary\n"
    zero = intro + "".join(rows) + "zzz stop here\nOther\n" + "".join(rows + more) + "end"
    text = intro + "".join(rows + more) + "tail"
    assert plan_texts([zero, text])[1].pieces == [
        intro,
        Ref(0, len(intro), len("".join(rows)) - 1, "clients", "keys before the grace hour ends"),
        "\n" + "".join(more) + "tail",
    ]


def test_a_run_from_its_sources_first_line_takes_in_nothing_from_the_sources_end() -> None:
    # Text 0 ends with the line the text starts with, and holds it before the run's lines once.
    intro = "Introductionary_remarks_for_the_whole_document\n"
    rows = _BLOCK.splitlines(keepends=True)[:2]
    zero = "".join(rows) + "ok go\nfine\nX line\n" + intro + "".join(rows) + "Y line\n" + intro
    text = intro + "".join(rows) + "ok go\nfine\ntail"
    assert plan_texts([zero, text])[1].pieces == [
        intro,
        Ref(0, 0, len("".join(rows)) - 1, "clients", "keys before the grace hour ends"),
        "\nok go\nfine\ntail",
    ]


def test_a_run_right_after_a_reference_may_lose_three_unquotable_lines_at_its_start() -> None:
    # Text 1 has the first reference's last line before the unquotable lines: the run taking
    # them in does not take that line in as well.
    servers = [f"servers must rotate {w} after the grace hour ends\n" for w in ("tokens", "keys")]
    marks = "== ==\n-- --\n++ ++\n"
    block_last = _BLOCK.splitlines(keepends=True)[-1]
    contents = [
        "head\n" + _BLOCK + "tail0",
        block_last + marks + "".join(servers) + "end",
        "x\n" + _BLOCK + marks + "".join(servers) + "z",
    ]
    assert plan_texts(contents)[2].pieces == [
        "x\n",
        _block_ref(0, 5),
        "\n" + marks,
        Ref(1, 72, len("".join(servers)) - 1, "servers", "keys after the grace hour ends"),
        "\nz",
    ]
