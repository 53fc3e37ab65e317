"""Releasing idle conversations on stream time never changes a bundle (changelog round trip)."""

from __future__ import annotations

import pytest

from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.codec import encode_bundle
from stream_ctx.core.wire.events import Event
from stream_ctx.errors import ConversationReleasedError
from stream_ctx.shell.state.changelog import ChangelogWrites, RestoredPartition
from tests.factories import (
    HOUR_MS,
    T0,
    make_end,
    make_finalize,
    make_item,
    make_retrieval,
    written,
)

CONFIG = BundleConfig(conversation_ttl_hours=1.0)


def _events_of_a(*, late_ts: int) -> list[Event]:
    return [
        make_retrieval(conversation_id="a", ts=T0, items=[make_item(id="x", content="first")]),
        make_finalize(conversation_id="a", ts=T0 + 1),
        # b moves the partition's stream time two hours past a's last event
        make_retrieval(conversation_id="b", ts=T0 + 2 * HOUR_MS),
        make_retrieval(conversation_id="a", ts=late_ts, items=[make_item(id="y", content="late")]),
        make_finalize(conversation_id="a", ts=late_ts + 1),
    ]


def _bundles(events: list[Event], *, release_after: int | None) -> list[bytes]:
    """Bundles of a tracking processor whose state goes through a changelog fold on every
    event; after event `release_after` idle conversations are released, and a late event is
    served by restoring the conversation from that changelog, as the runner does."""
    processor = ContextProcessor(CONFIG, is_tracking_changes=True)
    changelog = RestoredPartition()
    out = []
    for position, event in enumerate(events):
        try:
            bundle = processor.apply(event, position=position)
        except ConversationReleasedError as released:
            for cid, state, items, context in changelog.conversations():
                if cid == released.conversation_id:
                    processor.restore(cid, state, items, context)
            bundle = processor.apply(event, position=position)
        changelog.fold(written(ChangelogWrites.of(processor.take_changes())))
        if bundle is not None:
            out.append(encode_bundle(bundle))
        if position == release_after:
            processor.release_idle()
    return out


def test_release_frees_memory_of_conversations_idle_past_the_ttl() -> None:
    processor = ContextProcessor(CONFIG)
    for position, event in enumerate(_events_of_a(late_ts=T0 + 10)[:3]):
        processor.apply(event, position=position)
    assert processor.release_idle() == 1
    assert set(processor.conversations) == {"b"}


def test_late_event_for_a_released_conversation_asks_for_a_restore() -> None:
    processor = ContextProcessor(CONFIG)
    events = _events_of_a(late_ts=T0 + 10)
    for position, event in enumerate(events[:3]):
        processor.apply(event, position=position)
    processor.release_idle()
    with pytest.raises(ConversationReleasedError, match="'a' was released"):
        processor.apply(events[3], position=3)


@pytest.mark.parametrize(
    "late_ts", [T0 + 10, T0 + 3 * HOUR_MS], ids=["late-within-ttl", "after-ttl"]
)
def test_bundles_with_release_equal_bundles_without(late_ts: int) -> None:
    events = _events_of_a(late_ts=late_ts)
    held = _bundles(events, release_after=None)
    assert _bundles(events, release_after=2) == held
    assert len(held) == 2


def test_end_of_a_released_conversation_needs_no_restore() -> None:
    events = [*_events_of_a(late_ts=T0 + 10)[:3], make_end(conversation_id="a", ts=T0 + 20)]
    processor = ContextProcessor(CONFIG, is_tracking_changes=True)
    for position, event in enumerate(events[:3]):
        processor.apply(event, position=position)
    processor.take_changes()
    processor.release_idle()
    processor.apply(events[3], position=3)
    (change,) = processor.take_changes()
    assert change.state.is_ended
    assert change.dropped == {("x", 0)}
    assert change.contexts_dropped == {1}
