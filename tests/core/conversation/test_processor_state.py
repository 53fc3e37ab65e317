"""The processor's persisted side: restoring states (ended, released, at a position) and the
packed contexts a batch writes and tombstones."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from stream_ctx.core.conversation.changes import ConversationState, Restored
from stream_ctx.core.conversation.lifecycle import _DORMANT_LOADS_PER_SWEEP
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.window.accumulator import WindowCounters
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.errors import ConversationReleasedError
from tests.factories import HOUR_MS, T0, make_end, make_finalize, make_item, make_retrieval


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


def test_without_a_ttl_nothing_is_released() -> None:
    processor = ContextProcessor(BundleConfig(conversation_ttl_hours=None))
    processor.apply(make_retrieval(), position=1)
    processor.apply(make_retrieval(conversation_id="c-2", ts=T0 + 1_000 * HOUR_MS), position=2)
    assert processor.release_idle() == 0
    assert set(processor.conversations) == {"c-1", "c-2"}


def test_a_conversation_idle_exactly_the_ttl_is_kept_and_one_ms_more_is_released() -> None:
    processor = ContextProcessor(BundleConfig(conversation_ttl_hours=1.0))
    processor.apply(make_retrieval(), position=1)
    processor.apply(make_retrieval(conversation_id="c-2", ts=T0 + HOUR_MS), position=2)
    assert processor.release_idle() == 0
    processor.apply(make_retrieval(conversation_id="c-2", ts=T0 + HOUR_MS + 1), position=3)
    assert processor.release_idle() == 1
    assert set(processor.conversations) == {"c-2"}


def test_one_sweep_loads_a_bounded_number_of_dormant_conversations() -> None:
    processor = ContextProcessor(BundleConfig(conversation_ttl_hours=1.0))
    loaded: list[str] = []
    state = ConversationState(counters=WindowCounters(), last_ts=T0, position=0)

    def loader(cid: str) -> Callable[[], Restored]:
        def load() -> Restored:
            loaded.append(cid)
            return state, [], None

        return load

    count = _DORMANT_LOADS_PER_SWEEP + 1
    for n in range(count):
        processor.restore_lazily(f"c-{n}", loader(f"c-{n}"))
    assert processor.release_idle() == 0
    assert loaded == [f"c-{n}" for n in range(_DORMANT_LOADS_PER_SWEEP)]
    assert set(processor.conversations) == set(loaded)
    assert processor.held == count


@pytest.mark.parametrize("is_finalized", [False, True])
@pytest.mark.parametrize("is_released", [False, True])
def test_an_end_tombstones_the_items_and_the_kept_context(
    is_finalized: bool, is_released: bool
) -> None:
    processor = ContextProcessor(BundleConfig(conversation_ttl_hours=1.0), is_tracking_changes=True)
    processor.apply(make_retrieval(items=[make_item(id="a"), make_item(id="b")]), position=7)
    if is_finalized:
        processor.apply(make_finalize(), position=8)
    processor.take_changes()
    if is_released:
        processor.apply(make_retrieval(conversation_id="c-2", ts=T0 + 2 * HOUR_MS), position=9)
        processor.take_changes()
        assert processor.release_idle() == 1
    processor.apply(make_end(ts=T0 + 3 * HOUR_MS), position=10)
    changes = {change.conversation_id: change for change in processor.take_changes()}
    change = changes["c-1"]
    assert change.dropped == {("a", 7), ("b", 7)}
    assert change.contexts_dropped == ({1} if is_finalized else set())
    assert (change.state.is_ended, change.state.position, change.state.last_ts) == (True, 10, T0)
    assert change.state.counters == WindowCounters(seq=1 if is_finalized else 0)


def test_forget_drops_every_trace_of_the_conversations_it_names() -> None:
    processor = ContextProcessor(BundleConfig(conversation_ttl_hours=1.0), is_tracking_changes=True)
    processor.apply(make_retrieval(conversation_id="released"), position=1)
    processor.apply(make_end(conversation_id="ended"), position=2)
    processor.apply(make_retrieval(conversation_id="kept", ts=T0 + 2 * HOUR_MS), position=3)
    processor.take_changes()
    assert processor.release_idle() == 1
    state = ConversationState(counters=WindowCounters(seq=4), last_ts=T0, position=0)
    processor.restore_lazily("dormant", lambda: (state, [], None))
    # Touched in this batch: its change is pending.
    processor.apply(make_retrieval(conversation_id="held", ts=T0 + 2 * HOUR_MS), position=4)
    processor.forget(["dormant", "released", "ended", "held"])
    assert set(processor.conversations) == {"kept"}
    assert processor.held == 1
    assert processor.take_changes() == []
    # Known to no one now: an event starts the conversation afresh, even at an old position, and
    # a late one for the released conversation is no longer refused.
    for cid, position, ts in [("dormant", 0, T0), ("released", 1, T0 + 1), ("ended", 2, T0)]:
        processor.apply(make_retrieval(conversation_id=cid, ts=ts), position=position)
        bundle = processor.apply(make_finalize(conversation_id=cid, ts=ts), position=position + 10)
        assert bundle is not None
        assert ([item.id for item in bundle.items], bundle.seq) == (["it-1"], 1)


def test_item_outcomes_are_counted_and_reset_when_taken() -> None:
    processor = ContextProcessor(BundleConfig(max_items=1, min_salience_threshold=0.3))
    offered = [
        make_item(id="a", salience=0.5),
        make_item(id="a", salience=0.6),
        make_item(id="low", salience=0.1),
        make_item(id="b", salience=0.9),
        make_item(id="low-2", salience=0.2),
        make_item(id="c", salience=0.95),
    ]
    processor.apply(make_retrieval(items=offered), position=1)
    outcomes = processor.take_item_outcomes()
    assert (outcomes.accepted, outcomes.rejected, outcomes.evicted) == (4, 2, 2)
    after = processor.take_item_outcomes()
    assert (after.accepted, after.rejected, after.evicted) == (0, 0, 0)


def test_two_ends_in_one_batch_tombstone_each_conversation_under_its_own_id() -> None:
    processor = ContextProcessor(BundleConfig(), is_tracking_changes=True)
    processor.apply(make_retrieval(items=[make_item(id="a")]), position=1)
    processor.apply(make_retrieval(conversation_id="c-2", items=[make_item(id="b")]), position=2)
    processor.take_changes()
    processor.apply(make_end(), position=3)
    processor.apply(make_end(conversation_id="c-2"), position=4)
    changes = {change.conversation_id: change for change in processor.take_changes()}
    assert {cid: change.dropped for cid, change in changes.items()} == {
        "c-1": {("a", 1)},
        "c-2": {("b", 2)},
    }


def test_a_lazily_restored_conversation_is_loaded_once_on_its_first_event_and_continues() -> None:
    processor = ContextProcessor(BundleConfig())
    loads: list[str] = []
    state = ConversationState(counters=WindowCounters(seq=4), last_ts=T0, position=3)

    def load() -> Restored:
        loads.append("c-1")
        return state, [], None

    processor.restore_lazily("c-1", load)
    assert processor.apply(make_retrieval(), position=4) is None
    bundle = processor.apply(make_finalize(), position=5)
    assert loads == ["c-1"]
    assert bundle is not None and bundle.bundle_id == "c-1:5"


def test_events_without_positions_follow_one_another() -> None:
    processor = ContextProcessor(BundleConfig())
    processor.apply(make_retrieval())
    bundle = processor.apply(make_finalize())
    assert bundle is not None and bundle.bundle_id == "c-1:1"


def test_events_without_positions_are_numbered_from_zero_each_one_past_the_last() -> None:
    processor = ContextProcessor(BundleConfig())
    processor.apply(make_retrieval(items=[make_item(id="a")]))
    processor.apply(make_retrieval(items=[make_item(id="b")]), position=5)
    processor.apply(make_retrieval(items=[make_item(id="c")]))
    window = processor.conversations["c-1"].window
    assert {item.id: item.revision for item in window.items.values()} == {"a": 0, "b": 5, "c": 6}
    state = processor.state_of("c-1")
    assert state is not None and state.position == 6


def test_stream_time_is_the_latest_event_time_seen_and_zero_before_any() -> None:
    processor = ContextProcessor(BundleConfig())
    assert processor.stream_time_ms == 0
    processor.apply(make_retrieval(ts=0), position=1)
    assert processor.stream_time_ms == 0
    processor.apply(make_retrieval(conversation_id="c-2", ts=T0), position=2)
    processor.apply(make_retrieval(conversation_id="c-3", ts=T0 - 5), position=3)
    assert processor.stream_time_ms == T0


def test_a_merge_tombstones_the_version_it_replaces() -> None:
    processor = ContextProcessor(BundleConfig(), is_tracking_changes=True)
    processor.apply(make_retrieval(items=[make_item(id="a", content="first")]), position=1)
    processor.take_changes()
    processor.apply(make_retrieval(items=[make_item(id="a", content="second")]), position=2)
    (change,) = processor.take_changes()
    assert change.dropped == {("a", 1)}
    assert {key: item.content for key, item in change.put.items()} == {("a", 2): "second"}


def test_recorded_item_outcomes_name_their_conversation_event_time_and_position() -> None:
    processor = ContextProcessor(BundleConfig(), is_recording_items=True)
    processor.apply(make_retrieval(conversation_id="c-7", ts=T0 + 3), position=4)
    (event,) = processor.take_item_events()
    assert (event.conversation_id, event.ts, event.position) == ("c-7", T0 + 3, 4)
    assert (event.result.item_id, event.result.status) == ("it-1", "accepted")


def _released_at(position: int) -> ContextProcessor:
    """A processor (TTL 1 h) whose conversation c-1, last touched at T0 and `position`, was
    released as idle: c-2 moved stream time past the TTL."""
    processor = ContextProcessor(BundleConfig(conversation_ttl_hours=1.0))
    processor.apply(make_retrieval(items=[make_item(id="old")]), position=position)
    processor.apply(make_retrieval(conversation_id="c-2", ts=T0 + 2 * HOUR_MS), position=50)
    assert processor.release_idle() == 1
    return processor


def test_a_released_conversation_skips_a_replay_of_its_last_event() -> None:
    processor = _released_at(7)
    assert processor.apply(make_retrieval(items=[make_item(id="old")]), position=7) is None
    assert "c-1" not in processor.conversations


def test_a_released_conversation_restarts_afresh_on_an_event_past_its_ttl() -> None:
    processor = _released_at(7)
    later = T0 + HOUR_MS + 1
    processor.apply(make_retrieval(items=[make_item(id="new")], ts=later), position=51)
    bundle = processor.apply(make_finalize(ts=later), position=52)
    assert bundle is not None
    assert ([item.id for item in bundle.items], bundle.seq) == (["new"], 1)


def test_at_exactly_the_ttl_a_held_conversation_goes_on_and_a_released_one_needs_a_restore() -> (
    None
):
    held = ContextProcessor(BundleConfig(conversation_ttl_hours=1.0))
    held.apply(make_retrieval(items=[make_item(id="old")]), position=7)
    bundle = held.apply(make_finalize(ts=T0 + HOUR_MS), position=51)
    assert bundle is not None and [item.id for item in bundle.items] == ["old"]
    released = _released_at(7)
    with pytest.raises(ConversationReleasedError, match="conversation 'c-1' was released") as err:
        released.apply(make_finalize(ts=T0 + HOUR_MS), position=51)
    assert err.value.conversation_id == "c-1"


def test_an_end_within_the_ttl_ends_a_released_conversation_without_a_restore() -> None:
    processor = _released_at(7)
    assert processor.apply(make_end(ts=T0 + HOUR_MS // 2), position=51) is None
    assert processor.apply(make_retrieval(ts=T0 + HOUR_MS // 2), position=51) is None
    processor.apply(make_retrieval(items=[make_item(id="new")], ts=T0 + HOUR_MS), position=52)
    bundle = processor.apply(make_finalize(ts=T0 + HOUR_MS), position=53)
    assert bundle is not None
    assert ([item.id for item in bundle.items], bundle.seq) == (["new"], 1)


def test_an_end_of_a_held_conversation_records_the_ends_position() -> None:
    processor = ContextProcessor(
        BundleConfig(conversation_ttl_hours=None), is_tracking_changes=True
    )
    processor.apply(make_retrieval(), position=1)
    processor.take_changes()
    processor.apply(make_end(ts=T0 + 5), position=4)
    (change,) = processor.take_changes()
    assert change.dropped == {("it-1", 1)}
    assert (change.state.is_ended, change.state.position, change.state.last_ts) == (True, 4, T0)
