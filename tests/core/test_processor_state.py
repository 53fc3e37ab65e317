"""The processor's persisted side: restoring states (ended, released, at a position) and the
packed contexts a batch writes and tombstones."""

from __future__ import annotations

import pytest

from stream_ctx.core.accumulator import WindowCounters
from stream_ctx.core.config import BundleConfig
from stream_ctx.core.processor import ContextProcessor, ConversationState
from stream_ctx.errors import ConversationReleasedError
from tests.factories import HOUR_MS, T0, make_finalize, make_item, make_retrieval


def _ended_at(position: int) -> ConversationState:
    return ConversationState(
        counters=WindowCounters(), last_ts=T0, position=position, is_ended=True
    )


def test_restoring_an_ended_state_drops_the_held_conversation_and_skips_replays() -> None:
    processor = ContextProcessor(BundleConfig())
    processor.apply(make_retrieval(items=[make_item(id="old")]), position=1)
    processor.restore("c-1", _ended_at(5), [])
    assert "c-1" not in processor.conversations
    # At or below the end's position: a replay of what the end already covered.
    assert processor.apply(make_retrieval(items=[make_item(id="replayed")]), position=5) is None
    assert "c-1" not in processor.conversations
    processor.apply(make_retrieval(items=[make_item(id="new")]), position=6)
    bundle = processor.apply(make_finalize(), position=7)
    assert bundle is not None
    assert ([item.id for item in bundle.items], bundle.seq) == (["new"], 1)


def test_restoring_an_ended_state_of_an_unknown_conversation_is_fine() -> None:
    processor = ContextProcessor(BundleConfig())
    processor.restore("c-9", _ended_at(3), [])
    assert processor.held == 0
    assert processor.apply(make_retrieval(conversation_id="c-9"), position=3) is None
    assert processor.held == 0


def test_a_restored_position_skips_the_events_it_covers() -> None:
    source = ContextProcessor(BundleConfig())
    source.apply(make_retrieval(items=[make_item(id="kept")]), position=9)
    source.apply(make_finalize(), position=10)
    state = source.state_of("c-1")
    assert state is not None
    assert (state.position, state.counters.seq) == (10, 1)
    processor = ContextProcessor(BundleConfig())
    processor.restore("c-1", state, list(source.conversations["c-1"].window.items.values()))
    assert processor.apply(make_retrieval(items=[make_item(id="late")]), position=10) is None
    bundle = processor.apply(make_finalize(), position=11)
    assert bundle is not None
    assert ([item.id for item in bundle.items], bundle.seq) == (["kept"], 2)


def test_restoring_a_released_conversation_lets_its_late_event_through() -> None:
    processor = ContextProcessor(BundleConfig(conversation_ttl_hours=1.0))
    processor.apply(make_retrieval(items=[make_item(id="a")]), position=1)
    state = processor.state_of("c-1")
    items = list(processor.conversations["c-1"].window.items.values())
    processor.apply(make_retrieval(conversation_id="c-2", ts=T0 + 2 * HOUR_MS), position=2)
    assert processor.release_idle() == 1
    late = make_finalize(ts=T0 + HOUR_MS // 2)
    with pytest.raises(ConversationReleasedError):
        processor.apply(late, position=3)
    assert state is not None
    processor.restore("c-1", state, items)
    bundle = processor.apply(late, position=3)
    assert bundle is not None
    assert [item.id for item in bundle.items] == ["a"]


def test_a_batch_writes_only_its_last_context_and_tombstones_the_one_before_it() -> None:
    processor = ContextProcessor(BundleConfig(), is_tracking_changes=True)
    processor.apply(make_retrieval(), position=1)
    processor.apply(make_finalize(), position=2)
    processor.apply(make_finalize(), position=3)
    (change,) = processor.take_changes()
    # Seq 1 was superseded within the batch: never written, so nothing to tombstone.
    assert (set(change.contexts_put), change.contexts_dropped) == ({2}, set())
    processor.apply(make_finalize(), position=4)
    (change,) = processor.take_changes()
    assert (set(change.contexts_put), change.contexts_dropped) == ({3}, {2})
