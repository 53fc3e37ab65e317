"""The core's cache figures: lookups split into hits and misses, entries, bounds."""

from __future__ import annotations

import uuid

from stream_ctx.core.caches import MEMOS, CacheFigures, cache_figures
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.counting.tokenizer import BpeTokenizer, get_tokenizer, shared_tokenizers
from stream_ctx.core.memo import Memo, Memos
from stream_ctx.core.window.config import BundleConfig
from tests.factories import make_finalize, make_item, make_retrieval


def _by_name(*processors: ContextProcessor) -> dict[str, CacheFigures]:
    found = cache_figures(processor.memos for processor in processors)
    return {figures.name: figures for figures in found}


def _bundle(
    processor: ContextProcessor, conversation: str, content: str, attributes: dict[str, str]
) -> None:
    # Two items, so the second's header is priced against the first's.
    items = [
        make_item(id="doc:1", content=content, attributes=attributes),
        make_item(id="doc:2", content=content[::-1], attributes=attributes),
    ]
    processor.apply(make_retrieval(conversation_id=conversation, items=items), position=1)
    processor.apply(make_finalize(conversation_id=conversation), position=2)


def test_figures_name_every_memo_and_the_tokenizers_in_use() -> None:
    get_tokenizer("cl100k_base")
    processors = [ContextProcessor(BundleConfig()) for _ in range(2)]
    figures = _by_name(*processors)
    # Every tokenizer this process made so far (other tests may have made o200k_base too).
    in_use = {f"token_counts_{name}" for name in shared_tokenizers()}
    assert "token_counts_cl100k_base" in in_use
    assert {memo.name for memo in MEMOS} | in_use == set(figures)
    tokenizer = get_tokenizer("cl100k_base")
    counts = figures["token_counts_cl100k_base"]
    assert counts.limit == tokenizer.cache_limit == 1 << 17
    assert counts.entries == tokenizer.cached
    assert figures["block_ids"].limit == 2 << 16  # each processor's table, summed
    assert (figures["block_ids"].hits, figures["block_ids"].entries) == (0, 0)


def test_two_processors_never_share_a_memo_table() -> None:
    content, attributes = f"A passage of its own: {uuid.uuid4().hex}.", {"origin": "x"}
    first, second = (ContextProcessor(BundleConfig(min_salience_threshold=0.0)) for _ in "ab")
    _bundle(first, "c-one", content, attributes)
    before = _by_name(second)
    _bundle(second, "c-one", content, attributes)
    after = _by_name(second)
    assert after["block_ids"].misses > before["block_ids"].misses == 0
    assert after["block_ids"].entries == _by_name(first)["block_ids"].entries


def test_a_second_bundle_of_the_same_text_hits_where_the_first_missed() -> None:
    # Fresh in every run, also in a process forked from one that ran this test (mutmut's).
    fresh = uuid.uuid4().hex
    content, attributes = f"A passage no other test writes: {fresh}.", {"origin": fresh}
    processor = ContextProcessor(BundleConfig(min_salience_threshold=0.0))
    before = _by_name(processor)
    _bundle(processor, "c-one", content, attributes)
    first = _by_name(processor)
    _bundle(processor, "c-two", content, attributes)
    second = _by_name(processor)
    name = "token_counts_cl100k_base"
    assert first[name].misses > before[name].misses
    assert second[name].misses == first[name].misses
    assert second[name].hits - first[name].hits == (first[name].hits - before[name].hits) + (
        first[name].misses - before[name].misses
    )
    assert second[name].entries == first[name].entries > before[name].entries
    # The parts of a difference are looked up only when the whole difference is not memoized;
    # these texts share nothing, so no passage is quoted and no rerun written.
    unused = {"header_attribute_differences", "header_tag_differences", "passage_quotes", "reruns"}
    for memo in {memo.name for memo in MEMOS} - unused:
        assert first[memo].misses > before[memo].misses, memo
        assert 0 < first[memo].entries == second[memo].entries <= first[memo].limit, memo
        assert second[memo].hits > first[memo].hits, memo
        assert second[memo].misses == first[memo].misses, memo


def test_a_new_counter_has_looked_nothing_up_and_counts_a_repeat_as_a_hit() -> None:
    counter = BpeTokenizer()
    assert (counter.lookups, counter.misses, counter.cached) == (0, 0, 0)
    counter.count_segment("k", "some text")
    counter.count_segment("k", "some text")
    assert (counter.lookups, counter.misses, counter.cached) == (2, 1, 1)


def test_items_of_other_id_stems_with_the_same_metadata_share_header_parts() -> None:
    fresh = uuid.uuid4().hex
    attributes = {"origin": fresh}
    processor = ContextProcessor(BundleConfig(min_salience_threshold=0.0))
    figures = []
    for position, stem in enumerate(("first-conversation/doc:", "second-conversation/doc:")):
        items = [
            make_item(id=f"{stem}{n}", content=f"{stem} {fresh} part {n}.", attributes=attributes)
            for n in (1, 2)
        ]
        processor.apply(make_retrieval(conversation_id=stem, items=items), position=2 * position)
        processor.apply(make_finalize(conversation_id=stem), position=2 * position + 1)
        figures.append(_by_name(processor))
    first, second = figures
    for memo in ("header_parts", "header_attribute_differences", "header_tag_differences"):
        assert second[memo].misses == first[memo].misses, memo
        assert second[memo].hits > first[memo].hits, memo


def test_a_difference_of_new_metadata_reuses_the_attribute_difference_it_shares() -> None:
    fresh = uuid.uuid4().hex
    first_attributes, second_attributes = {"origin": fresh}, {"origin": fresh, "lang": "en"}
    processor = ContextProcessor(BundleConfig(min_salience_threshold=0.0))
    figures = [_by_name(processor)]
    # Tags as fresh as the attributes, so no difference is cached before (mutmut forks a mutant
    # from a process that has run this test).
    pairs = (([f"a-{fresh}"], [f"b-{fresh}"]), ([f"c-{fresh}"], [f"d-{fresh}"]))
    for position, tags in enumerate(pairs):
        items = [
            make_item(id=f"x{n}", content=f"{fresh} {tags} {n}.", attributes=attrs, tags=tag)
            for n, (attrs, tag) in enumerate(
                zip((first_attributes, second_attributes), tags, strict=True)
            )
        ]
        cid = f"c-{position}"
        processor.apply(make_retrieval(conversation_id=cid, items=items), position=2 * position)
        processor.apply(make_finalize(conversation_id=cid), position=2 * position + 1)
        figures.append(_by_name(processor))
    before, first, second = figures
    tag_cache = "header_tag_differences"
    assert first[tag_cache].misses > before[tag_cache].misses
    assert second[tag_cache].misses > first[tag_cache].misses
    attributes = "header_attribute_differences"
    assert first[attributes].misses > before[attributes].misses
    assert second[attributes].misses == first[attributes].misses
    assert second[attributes].hits > first[attributes].hits


def test_a_full_count_cache_drops_its_oldest_entry_for_a_new_one() -> None:
    counter = BpeTokenizer()
    limit = counter.cache_limit
    for n in range(limit + 1):
        counter.count_segment(n, "x")
    assert (counter.cached, counter.misses) == (limit, limit + 1)
    counter.count_segment(limit, "x")  # the newest is still there
    counter.count_segment(1, "x")  # the second oldest too
    assert counter.misses == limit + 1
    counter.count_segment(0, "x")  # the oldest went first
    assert (counter.cached, counter.misses) == (limit, limit + 2)


def test_a_literal_reference_and_a_reference_written_alike_are_counted_apart() -> None:
    # One counter of its own: the second bundle's last entry differs from the first's only in
    # the escape of its `[§` (a literal `[\§1]` where the first has the reference `[§1]`), so
    # a count cached under a key that lost the escape would price it wrongly.
    tokenizer = BpeTokenizer()
    passage = " ".join(f"passage{n}" for n in range(40))
    cases = [
        ("refers", f"see\n{passage}", "see\n[§1]\n"),
        ("writes", "see\n[§1]", "see\n[\\§1]\n"),
    ]
    for conversation, content, written in cases:
        processor = ContextProcessor(BundleConfig(), tokenizer=tokenizer)
        items = [
            make_item(id="x", content=passage, salience=0.9),
            make_item(id="y", content=content),
        ]
        processor.apply(make_retrieval(conversation_id=conversation, items=items), position=1)
        bundle = processor.apply(make_finalize(conversation_id=conversation), position=2)
        assert bundle is not None and bundle.context.endswith(written)
        assert bundle.stats.tokens_bundle == tokenizer.count(bundle.context)


def test_a_full_memo_table_drops_its_least_recently_used_entry_for_a_new_one() -> None:
    def squared(n: int) -> int:
        return n * n

    memos, memo = Memos(), Memo("squares", squared, 2)
    square = memos[memo]
    assert [square(n) for n in (1, 2, 1, 3)] == [1, 4, 1, 9]  # 3 pushes out 2, not 1
    assert memos.lookups(memo) == (1, 3, 2)
    assert (square(1), square(2)) == (1, 4)
    assert memos.lookups(memo) == (2, 4, 2)
