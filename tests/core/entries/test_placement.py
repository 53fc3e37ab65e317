"""Placements keep a header's template only while everything pricing it is the same."""

from __future__ import annotations

from stream_ctx.core.assembly.assembler import DagContextAssembler
from stream_ctx.core.counting.tokenizer import get_tokenizer
from stream_ctx.core.window.accumulator import ContextItem, RankedItem
from tests.factories import make_context_item


def test_a_kept_header_is_priced_again_when_a_power_of_ten_moves_among_its_bases() -> None:
    """Entries 1001-1015 see the step to four-digit bases at a position that moves when items
    are inserted before them; a reused assembler writes what a fresh one writes."""
    base = [_filler(n, entered=100 + n) for n in range(998)]
    one = make_context_item(
        id="one", content="first", attributes={"b": "x"}, tags=["t"], entered=2000
    )
    mid = _filler(99999, entered=2001)
    two = make_context_item(
        id="two", content="second", attributes={"a": "1"}, tags=["t"], entered=2002
    )
    before = [*base, one, mid, two]
    after = [*(_filler(10000 + n, entered=n) for n in range(5)), *before]
    reused = DagContextAssembler(get_tokenizer())
    _stable_context(reused, before)
    assert _stable_context(reused, after) == _stable_context(
        DagContextAssembler(get_tokenizer()), after
    )


def _filler(n: int, *, entered: int) -> ContextItem:
    return make_context_item(
        id=f"f{n}", kind="filler", content=f"filler {n}", attributes={"f": str(n)}, entered=entered
    )


def _stable_context(assembler: DagContextAssembler, items: list[ContextItem]) -> str:
    ranked = [RankedItem(item, 0.5) for item in items]
    return assembler.assemble(ranked, max_tokens=None, order="stable").context
