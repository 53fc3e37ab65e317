"""The assembler's choices: what a budget keeps, and the baseline a context is priced against."""

from __future__ import annotations

from stream_ctx.core.assembly.assembler import DagContextAssembler
from stream_ctx.core.counting.tokenizer import get_tokenizer
from stream_ctx.core.entries.render import render_naive
from stream_ctx.core.window.accumulator import ContextItem, RankedItem
from tests.factories import make_context_item, plain_pair


def _ranked(items: list[ContextItem]) -> list[RankedItem]:
    return [RankedItem(item, 1.0 - n / 100) for n, item in enumerate(items)]


def test_a_budget_the_plain_rendering_meets_exactly_keeps_every_item() -> None:
    # Sharing would cost a token more here, so the context is written plain; a budget of the
    # plain context's count keeps it whole, though the shared rendering would not fit.
    items = plain_pair()
    everything = DagContextAssembler(get_tokenizer()).assemble(
        _ranked(items), max_tokens=None, order="stable"
    )
    assert not everything.is_deduplicated
    budgeted = DagContextAssembler(get_tokenizer()).assemble(
        _ranked(items), max_tokens=everything.tokens_bundle, order="stable"
    )
    assert budgeted == everything
    assert budgeted.skipped_for_budget == 0


def test_the_naive_count_is_the_baseline_s_count_past_a_thousand_entries() -> None:
    # `[1000]` is a token longer than `[999]`: every number is counted as itself.
    items = [make_context_item(id=f"i{n}", content=f"w{n}", entered=n) for n in range(1001)]
    assembly = DagContextAssembler(get_tokenizer()).assemble(
        _ranked(items), max_tokens=None, order="stable"
    )
    baseline = "".join(text for _, text in render_naive(items))
    assert assembly.tokens_naive == get_tokenizer().count(baseline)


def test_a_budget_prices_each_trial_in_the_order_the_context_is_written() -> None:
    # Written first, `b`'s bare header lets `a` name it as its base: in arrival order the two
    # cost 23 tokens, in priority order 24. The long third item fits in neither.
    items = [
        make_context_item(
            id="a", content="one two", attributes={"lang": "en", "src": "wiki"}, entered=1
        ),
        make_context_item(id="b", content="three four", entered=0),
        make_context_item(id="c", content=" ".join(["five six"] * 20), entered=2),
    ]
    assembly = DagContextAssembler(get_tokenizer()).assemble(
        _ranked(items), max_tokens=23, order="stable"
    )
    assert assembly.context == "§1 b (chunk)\nthree four\n§2 a ^1 lang=en src=wiki\none two\n"
    assert (assembly.tokens_bundle, assembly.skipped_for_budget) == (23, 1)


def test_a_shared_context_costing_what_the_plain_one_costs_stays_shared() -> None:
    # Kinds and a name the baseline writes bare must be quoted here, so both renderings cost a
    # token over the baseline; the plain one stands in only when it costs fewer tokens.
    items = [
        make_context_item(id="(p0)", kind="p)q", content="", tags=["#x"], entered=0),
        make_context_item(id="doc-1", kind="p)q", content="", attributes={"a b": "en"}, entered=1),
    ]
    assembly = DagContextAssembler(get_tokenizer()).assemble(
        _ranked(items), max_tokens=None, order="priority"
    )
    assert assembly.context == '§1 (p0) ("p)q") ##x\n\n§2 doc-1 ^1 "a b"=en -##x\n\n'
    assert (assembly.tokens_bundle, assembly.tokens_naive) == (31, 30)
    assert assembly.is_deduplicated


def test_a_shared_context_costing_exactly_the_baseline_is_not_priced_against_plain() -> None:
    # Plain would cost 119 tokens here; only sharing that costs more than the baseline's 125
    # is priced against it.
    lines = [
        "alpha gamma alpha zeta delta theta delta delta\n",
        "mu theta mu alpha alpha\n",
        "zeta iota lambda eta alpha zeta epsilon gamma beta\n",
    ]
    attributes = {"src": "de", "lang": "numpy"}
    items = [
        make_context_item(id="doc-0", content=lines[0] * 2 + lines[1] + lines[2], entered=6),
        make_context_item(
            id="doc-1",
            kind="page",
            content="",
            attributes=attributes,
            tags=["needs-review"],
            entered=1,
        ),
        make_context_item(id="doc-2", kind="page", content=lines[0] + lines[1], entered=4),
        make_context_item(
            id="doc-3",
            kind="page",
            content="",
            attributes=dict(reversed(attributes.items())),
            entered=3,
        ),
        make_context_item(id="doc-4", content="", entered=2),
        make_context_item(id="doc-5", kind="page", content="", entered=1),
    ]
    assembly = DagContextAssembler(get_tokenizer()).assemble(
        _ranked(items), max_tokens=None, order="stable"
    )
    assert (assembly.tokens_bundle, assembly.tokens_naive) == (125, 125)
    assert assembly.is_deduplicated
    assert "§6 doc-0 ^3\n[§5 with changes:]\n" in assembly.context


def test_an_assembler_holds_exactly_the_items_of_its_last_window() -> None:
    assembler = DagContextAssembler(get_tokenizer())
    a, b, c, d = (
        make_context_item(id=i, content=f"Text of {i}.", entered=n) for n, i in enumerate("abcd")
    )
    for window in ([a, b], [a, c], [b, c, d], [a]):
        assembler.assemble(_ranked(window), max_tokens=None, order="stable")
        assert assembler.held == len(window)
