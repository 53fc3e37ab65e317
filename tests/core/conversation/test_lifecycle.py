"""Where a conversation stands after it closes, is released or is forgotten, as the next event,
the changelog and a restore see it; and the core, memos and pending changes a processor keeps."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from stream_ctx.core.conversation.changes import ConversationState
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.memo import Memos
from stream_ctx.core.text.engine import PYTHON_CORE, Core
from stream_ctx.core.text.repeats import Planner
from stream_ctx.core.text.textindex import TextIndex
from stream_ctx.core.window.accumulator import WindowCounters
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.errors import FinalizeRefusedError
from tests.factories import HOUR_MS, T0, make_end, make_finalize, make_item, make_retrieval


def _hour_ttl(*, is_tracking_changes: bool = False) -> ContextProcessor:
    return ContextProcessor(
        BundleConfig(conversation_ttl_hours=1.0), is_tracking_changes=is_tracking_changes
    )


def test_a_finalize_refused_past_the_ttl_still_closes_the_conversation_at_its_position() -> None:
    processor = _hour_ttl()
    processor.apply(make_retrieval(items=[make_item(id="a")]), position=1)
    with pytest.raises(FinalizeRefusedError):
        processor.apply(make_finalize(ts=T0 + 2 * HOUR_MS), position=2)
    # A replay up to the refused finalize's position is skipped; the next event starts afresh.
    assert processor.apply(make_retrieval(ts=T0 + 2 * HOUR_MS), position=2) is None
    assert "c-1" not in processor.conversations
    processor.apply(make_retrieval(ts=T0 + 2 * HOUR_MS, items=[make_item(id="b")]), position=3)
    bundle = processor.apply(make_finalize(ts=T0 + 2 * HOUR_MS), position=4)
    assert bundle is not None
    assert ([item.id for item in bundle.items], bundle.seq) == (["b"], 1)


def test_the_changelog_says_expired_for_a_conversation_closed_by_its_ttl() -> None:
    processor = _hour_ttl(is_tracking_changes=True)
    processor.apply(make_retrieval(), position=1)
    processor.take_changes()
    with pytest.raises(FinalizeRefusedError):
        processor.apply(make_finalize(ts=T0 + 2 * HOUR_MS), position=2)
    (change,) = processor.take_changes()
    assert (change.state.is_ended, change.state.is_expired, change.state.position) == (
        True,
        True,
        2,
    )


def test_the_changelog_says_ended_for_a_released_conversation_that_ends() -> None:
    processor = _hour_ttl(is_tracking_changes=True)
    processor.apply(make_retrieval(), position=1)
    processor.apply(make_retrieval(conversation_id="c-2", ts=T0 + 2 * HOUR_MS), position=2)
    processor.take_changes()
    assert processor.release_idle() == 1
    processor.apply(make_end(ts=T0 + HOUR_MS // 2), position=3)
    (change,) = processor.take_changes()
    assert (change.state.is_ended, change.state.is_expired, change.state.position) == (
        True,
        False,
        3,
    )


@pytest.mark.parametrize(("is_expired", "reason"), [(True, "expired"), (False, "ended")])
def test_a_finalize_of_a_restored_closed_conversation_is_refused_with_why_it_closed(
    is_expired: bool, reason: str
) -> None:
    processor = ContextProcessor(BundleConfig())
    closed = ConversationState(
        counters=WindowCounters(seq=3),
        last_ts=T0,
        position=5,
        is_ended=True,
        is_expired=is_expired,
    )
    processor.restore("c-1", closed, [])
    with pytest.raises(FinalizeRefusedError) as refused:
        processor.apply(make_finalize(ts=T0 + 1), position=6)
    assert refused.value.reason == reason


def test_a_conversation_with_changes_not_yet_taken_is_not_released() -> None:
    processor = _hour_ttl(is_tracking_changes=True)
    processor.apply(make_retrieval(), position=1)
    processor.apply(make_retrieval(conversation_id="c-2", ts=T0 + 2 * HOUR_MS), position=2)
    assert processor.release_idle() == 0
    processor.take_changes()
    assert processor.release_idle() == 1
    assert set(processor.conversations) == {"c-2"}


def test_a_forgotten_ended_conversation_starts_afresh_even_at_an_old_position() -> None:
    processor = ContextProcessor(BundleConfig())
    processor.apply(make_retrieval(items=[make_item(id="a")]), position=4)
    processor.apply(make_end(ts=T0 + 1), position=5)
    processor.forget(["c-1"])
    processor.apply(make_retrieval(ts=T0 + 2, items=[make_item(id="b")]), position=3)
    bundle = processor.apply(make_finalize(ts=T0 + 2), position=6)
    assert bundle is not None
    assert ([item.id for item in bundle.items], bundle.seq) == (["b"], 1)


def test_a_processor_keeps_the_core_and_memos_it_is_given_and_plans_with_that_core() -> None:
    planned: list[int] = []

    def planner(index: TextIndex, serials: Sequence[int], memos: Memos) -> Planner:
        planned.append(len(serials))
        return Planner(index, serials, memos)

    memos = Memos()
    spy = Core("python", TextIndex, planner)
    processor = ContextProcessor(BundleConfig(core="compiled"), core=spy, memos=memos)
    assert processor.core is spy
    assert processor.memos is memos
    processor.apply(make_retrieval(items=[make_item(id="a"), make_item(id="b")]), position=1)
    assert processor.apply(make_finalize(), position=2) is not None
    assert planned
    assert ContextProcessor(BundleConfig(core="python")).core is PYTHON_CORE


def test_a_conversation_never_seen_has_no_state() -> None:
    assert ContextProcessor(BundleConfig()).state_of("never-seen") is None
