"""Placements keep a header's template only while everything pricing it is the same."""

from __future__ import annotations

import pytest

from stream_ctx.core.assembly.assembler import DagContextAssembler
from stream_ctx.core.counting.tokenizer import get_tokenizer
from stream_ctx.core.entries.render import BASE_WINDOW
from stream_ctx.core.window.accumulator import ContextItem, RankedItem
from tests.factories import make_context_item


@pytest.mark.parametrize(("between", "inserted"), [(1, 5), (BASE_WINDOW - 1, 1)])
def test_a_kept_header_is_priced_again_when_a_power_of_ten_moves_among_its_bases(
    between: int, inserted: int
) -> None:
    """An entry past 1000 whose base moves from number 999 to 1000 or further, as items are
    inserted before them both: a reused assembler writes what a fresh one writes."""
    base = [_filler(n, entered=100 + n) for n in range(998)]
    one = make_context_item(
        id="one", content="first", attributes={"b": "x"}, tags=["t"], entered=2000
    )
    middle = [_filler(90_000 + n, entered=2001 + n) for n in range(between)]
    two = make_context_item(
        id="two", content="second", attributes={"a": "1"}, tags=["t"], entered=3000
    )
    before = [*base, one, *middle, two]
    after = [*(_filler(10_000 + n, entered=n) for n in range(inserted)), *before]
    reused = DagContextAssembler(get_tokenizer())
    _stable_context(reused, before)
    fresh = _stable_context(DagContextAssembler(get_tokenizer()), after)
    assert _stable_context(reused, after) == fresh


def _filler(n: int, *, entered: int) -> ContextItem:
    return make_context_item(
        id=f"f{n}", kind="filler", content=f"filler {n}", attributes={"f": str(n)}, entered=entered
    )


def _stable_context(assembler: DagContextAssembler, items: list[ContextItem]) -> str:
    ranked = [RankedItem(item, 0.5) for item in items]
    return assembler.assemble(ranked, max_tokens=None, order="stable").context
