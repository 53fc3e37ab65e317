"""Incremental finalize: a processor that keeps what each finalize learned makes the same bundles,
byte for byte, as one that assembles every finalize from nothing."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_ctx.core.assembly.learning import Learning
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.counting.tokenizer import get_tokenizer
from stream_ctx.core.memo import Memos
from stream_ctx.core.text.engine import Core
from stream_ctx.core.text.repeats import Planner
from stream_ctx.core.text.textindex import TextIndex
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.codec import encode_bundle
from stream_ctx.core.wire.events import Event, Retrieval
from stream_ctx.shell.state.changelog import ChangelogWrites, RestoredPartition
from tests.factories import T0, make_finalize, make_item, make_retrieval, written
from tests.streams import CORES, DOCUMENTS, RESTORE, WORDS, applied, streams


@pytest.mark.parametrize("core", CORES)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stream=streams(),
    max_items=st.sampled_from((3, 6, 12)),
    order=st.sampled_from(("priority", "stable", "edges")),
    mode=st.sampled_from(("full", "delta")),
)
def test_kept_learning_gives_the_bundles_of_finalizes_from_nothing(
    core: Core, stream: list[Event | str], max_items: int, order: Any, mode: Any
) -> None:
    config = BundleConfig(max_items=max_items, order=order, mode=mode, conversation_ttl_hours=None)
    afresh = ContextProcessor(config, learning=Learning(0), core=core)
    learning = Learning()
    kept = ContextProcessor(config, is_tracking_changes=True, learning=learning, core=core)
    changelog = RestoredPartition()
    tokenizer = get_tokenizer()
    position = 0
    for step in stream:
        if step == RESTORE:  # the state dropped, rebuilt from the changelog by a new processor
            kept.drop_learning()  # sharing the member's tables, as a partition that came back
            kept = ContextProcessor(
                config, is_tracking_changes=True, memos=kept.memos, learning=learning, core=core
            )
            for cid, state, items, context in changelog.conversations():
                kept.restore(cid, state, items, context)
            continue
        assert not isinstance(step, str)
        position += 1
        expected, got = applied(afresh, step, position), applied(kept, step, position)
        changelog.fold(written(ChangelogWrites.of(kept.take_changes())))
        if not isinstance(expected, Bundle) or not isinstance(got, Bundle):
            assert expected == got
            continue
        assert encode_bundle(got) == encode_bundle(expected)
        _assert_counted_exactly(got, tokenizer.count)


def _assert_counted_exactly(bundle: Bundle, count: Any) -> None:
    """Counts add up over entries renumbered in place: the context's count is exact."""
    assert bundle.stats.tokens_bundle == count(bundle.context)


def _twins(config: BundleConfig) -> tuple[ContextProcessor, ContextProcessor]:
    """A processor that keeps its learning, and one that starts every finalize afresh."""
    return ContextProcessor(config), ContextProcessor(config, learning=Learning(0))


def _same_bundles(processors: tuple[ContextProcessor, ...], event: Event, position: int) -> str:
    """Apply `event` to both; their bundles must be byte-identical. Returns the context."""
    got, expected = (processor.apply(event, position=position) for processor in processors)
    assert got is not None and expected is not None
    assert encode_bundle(got) == encode_bundle(expected)
    _assert_counted_exactly(got, get_tokenizer().count)
    return got.context


def test_a_text_whose_source_moves_to_a_two_digit_number_is_planned_again() -> None:
    # `[§9]` is short enough next to its 35 characters to be taken unpriced, `[§10]` is not and
    # saves too few tokens: the same texts plan differently once a newcomer renumbers them.
    source = "alpha beta gamma delta epsilon zeta"
    fillers = [make_item(id=f"f{n}", content=f"filler {n} text", salience=0.9) for n in range(8)]
    items = [
        *fillers,
        make_item(id="source", content=source, salience=0.6),
        make_item(id="reader", content=f"a line before it\n{source}", salience=0.5),
    ]
    processors = _twins(BundleConfig(max_items=12))
    for processor in processors:
        processor.apply(make_retrieval(items=items), position=1)
    assert "\n[§9]\n" in _same_bundles(processors, make_finalize(), 2)
    newcomer = make_retrieval(items=[make_item(id="new", content="first now", salience=1.0)])
    for processor in processors:
        processor.apply(newcomer, position=3)
    assert "[§10]" not in _same_bundles(processors, make_finalize(), 4)


def test_a_newcomer_that_a_held_text_continues_is_read_by_its_next_plan() -> None:
    # The held text starts with the end of the newcomer's first sentence (an overlapping chunk);
    # they share no whole line, so only the index's record of who holds its first words tells.
    sentence = " ".join(WORDS * 3) + "."
    held = make_item(id="later", content=f"{sentence}\nits own line here\n", salience=0.5)
    newcomer = make_item(id="earlier", content=f"So {sentence}\nanother line\n", salience=0.9)
    processors = _twins(BundleConfig())
    for processor in processors:
        processor.apply(make_retrieval(items=[held]), position=1)
    assert "[§" not in _same_bundles(processors, make_finalize(), 2)
    for processor in processors:
        processor.apply(make_retrieval(items=[newcomer]), position=3)
    assert "\n[§1 " in _same_bundles(processors, make_finalize(), 4)


def test_a_newcomer_a_few_places_of_a_line_before_a_text_is_read_by_its_next_plan() -> None:
    # Three lines the reader holds, first held by `middle` alone, then also by a newcomer placed
    # before it: the reader's run of them now starts at the newcomer (the first of equal runs).
    lines = "".join(f"{word} is a line that the reader repeats whole\n" for word in WORDS[:3])
    own = "".join(f"{word} stands on its own line here\n" for word in WORDS[3:])
    held = [
        make_item(id="middle", content=f"{lines}the middle item ends here\n", salience=0.7),
        make_item(id="reader", content=f"the reader opens this way\n{lines}{own}", salience=0.5),
    ]
    newcomer = make_item(id="new", content=f"the newcomer opens so\n{lines}", salience=0.9)
    processors = _twins(BundleConfig())
    for processor in processors:
        processor.apply(make_retrieval(items=held), position=1)
    assert "\n[§1 " in _same_bundles(processors, make_finalize(), 2)
    for processor in processors:
        processor.apply(make_retrieval(items=[newcomer]), position=3)
    assert _same_bundles(processors, make_finalize(), 4).count("[§1 ") == 2


def test_a_plan_may_read_a_text_it_may_rerun_however_many_places_of_its_lines_between() -> None:
    # Nine texts hold the reader's lines after the first one: it is among the latest places of
    # none of them, yet it shares more than half of the reader's characters (a diff base).
    lines = "".join(f"{word} is a line the reader holds as well\n" for word in WORDS[:4])
    texts = [f"{lines}text {n} closes here\n" for n in range(10)] + [f"the reader: {lines}"]
    index = TextIndex(Memos())
    order = [indexed.serial for indexed in index.add(texts)]
    planner = Planner(index, order, Memos())
    shared = index.texts[order[0]].shared
    assert planner.may_read(10, {0}, shared)
    assert not planner.may_read(10, {0}, set())  # not through the lines it shares


def test_a_window_renumbered_past_ten_counts_its_numbers_exactly() -> None:
    # Each finalize puts a newcomer first: every entry, reference and base is renumbered, and
    # entries cross from one digit to two.
    processor = ContextProcessor(BundleConfig(max_items=30))
    afresh = ContextProcessor(BundleConfig(max_items=30), learning=Learning(0))
    document = DOCUMENTS[0]
    for n in range(14):
        chunk = document[n * 40 : n * 40 + 160]
        item = make_item(id=f"document:{n}", content=chunk, salience=0.5 + n / 40)
        event = Retrieval(conversation_id="c-1", event_id=f"r{n}", ts=T0 + n, items=[item])
        for apply in (processor.apply, afresh.apply):
            apply(event, position=2 * n)
        finalize = make_finalize(ts=T0 + n)
        got, expected = (
            apply(finalize, position=2 * n + 1) for apply in (processor.apply, afresh.apply)
        )
        assert got is not None and expected is not None
        assert encode_bundle(got) == encode_bundle(expected)
        _assert_counted_exactly(got, get_tokenizer().count)


def test_an_item_merged_with_only_a_new_kind_or_new_attributes_is_written_with_them() -> None:
    processors = _twins(BundleConfig())
    versions = [
        make_item(id="doc", kind="chunk", attributes={"lang": "en"}),
        make_item(id="doc", kind="page", attributes={"lang": "en"}),
        make_item(id="doc", kind="page", attributes={"lang": "de"}),
    ]
    contexts = []
    for n, item in enumerate(versions):
        for processor in processors:
            processor.apply(make_retrieval(items=[item]), position=2 * n)
        contexts.append(_same_bundles(processors, make_finalize(), 2 * n + 1))
    assert contexts == [
        "§1 doc (chunk) lang=en\nsome retrieved text\n",
        "§1 doc (page) lang=en\nsome retrieved text\n",
        "§1 doc (page) lang=de\nsome retrieved text\n",
    ]
