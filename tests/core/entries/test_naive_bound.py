"""Never a token over naive: a context costs at most its baseline, whatever metadata the baseline
itself writes readably, and a plain rendering stands in when sharing would cost more."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_ctx.core.assembly.assembler import Assembly, DagContextAssembler
from stream_ctx.core.counting.tokenizer import get_tokenizer
from stream_ctx.core.entries.reader import read_context
from stream_ctx.core.window.accumulator import ContextItem, RankedItem
from tests.factories import make_context_item, plain_pair

# Words of letters, unicode, digits and the punctuation headers use, never a blank.
_WORD = st.text(st.sampled_from(list('abXé中ß7-=.:/_#()"~^,@')), min_size=1, max_size=6)


def _words(is_later_word_readable: Callable[[str], bool]) -> st.SearchStrategy[str]:
    """Words with single spaces between, keeping only the later words the baseline reads back
    as part of the same id, value or tag (its `[n] id (kind) name=value #tag` would otherwise
    read more terms); none starts with a quote or a lone `~`, which mean a JSON string or the
    id's stem (an id starting with `~` is excluded below: `~rest` is the stem and `rest`)."""
    return (
        st.lists(_WORD, max_size=3)
        .map(lambda ws: [w for i, w in enumerate(ws) if i == 0 or is_later_word_readable(w)])
        .map(" ".join)
        .filter(lambda text: not text.startswith(('"', "~ ")) and text != "~")
    )


_IDS = _words(lambda w: w[0] not in "(^").filter(lambda text: not text.startswith("~"))
_KINDS = _words(lambda w: True).filter(lambda kind: ")" not in kind)
_NAMES = _WORD.filter(lambda w: "=" not in w and w[0] not in '#"') | st.just("")
_VALUES = _words(lambda w: "=" not in w and w[0] not in '#"')
_TAGS = _words(lambda w: w[0] != "#")
_METADATA = st.tuples(
    _IDS, _KINDS, st.dictionaries(_NAMES, _VALUES, max_size=3), st.lists(_TAGS, max_size=4)
)


def _assembled(items: list[ContextItem]) -> Assembly:
    ranked = [RankedItem(item, 0.5) for item in items]
    return DagContextAssembler(get_tokenizer()).assemble(ranked, max_tokens=None, order="stable")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    metadata=st.lists(_METADATA, min_size=1, max_size=4, unique_by=lambda meta: meta[0]),
    content=st.text(max_size=40),
)
def test_a_context_never_costs_more_than_the_baseline_whatever_its_metadata(
    metadata: list[tuple[str, str, dict[str, str], list[str]]], content: str
) -> None:
    items = [
        make_context_item(id=i, kind=k, attributes=a, tags=t, content=content, entered=n)
        for n, (i, k, a, t) in enumerate(metadata)
    ]
    assembly = _assembled(items)
    assert assembly.tokens_bundle <= assembly.tokens_naive
    read = [
        (it.id, it.kind, it.attributes, it.tags, it.content)
        for it in read_context(assembly.context)
    ]
    assert read == [(i, k, a, t, content) for i, k, a, t in metadata]


def test_a_header_whose_dropped_tags_cost_more_than_it_saves_is_written_plain() -> None:
    items = plain_pair()
    assembly = _assembled(items)
    assert "^1" not in assembly.context  # naming item 1 and dropping its tags cost a token more
    assert assembly.tokens_bundle <= assembly.tokens_naive
    assert not assembly.is_deduplicated
    assert [it.tags for it in read_context(assembly.context)] == [list(items[0].tags), []]


def test_an_empty_text_written_plain_is_no_block() -> None:
    items = plain_pair("")
    assembly = _assembled(items)
    assert assembly.context.endswith("§2 doc-1 (chunk) source=en-US lang=numpy section=en-US\n\n")
    assert assembly.blocks_by_id()["doc-1"] == []
    assert assembly.dag.blocks == {assembly.blocks_by_id()["doc-0"][0]: "Short text.0"}
