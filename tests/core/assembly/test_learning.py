"""One learning table shared by a member's processors: bounded in all, emptied per partition."""

from __future__ import annotations

from stream_ctx.core.assembly.learning import Learning
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.window.config import BundleConfig
from tests.factories import make_finalize, make_item, make_retrieval


def _finalized(processor: ContextProcessor, cid: str, items: int, position: int) -> None:
    """Give conversation `cid` a window of `items` items and finalize it."""
    retrieved = [make_item(id=f"{cid}-{n}", content=f"Text {n} of {cid}.") for n in range(items)]
    processor.apply(make_retrieval(conversation_id=cid, items=retrieved), position=position)
    processor.apply(make_finalize(conversation_id=cid), position=position + 1)


def test_processors_sharing_a_table_keep_at_most_its_items_least_recent_first() -> None:
    learning = Learning(max_items=10)
    config = BundleConfig(min_salience_threshold=0.0)
    first, second = (ContextProcessor(config, learning=learning) for _ in range(2))
    _finalized(first, "c-a", 4, 1)
    _finalized(second, "c-b", 4, 1)
    assert learning.items == 8
    _finalized(first, "c-c", 4, 3)  # 12 held in all: c-a, the least recent, goes
    assert learning.items == 8
    assert learning.take("c-a") is None
    assert learning.take("c-b") is not None


def test_a_processor_whose_partition_moves_away_drops_only_its_learning() -> None:
    learning = Learning()
    config = BundleConfig(min_salience_threshold=0.0)
    leaving, staying = (ContextProcessor(config, learning=learning) for _ in range(2))
    _finalized(leaving, "c-a", 3, 1)
    _finalized(staying, "c-b", 2, 1)
    leaving.drop_learning()
    assert learning.items == 2
    assert learning.take("c-a") is None


def test_a_window_larger_than_the_table_is_not_kept() -> None:
    learning = Learning(max_items=2)
    _finalized(
        ContextProcessor(BundleConfig(min_salience_threshold=0.0), learning=learning), "c-a", 3, 1
    )
    assert learning.items == 0
