"""One learning table shared by a member's processors: bounded in all, emptied per partition."""

from __future__ import annotations

from stream_ctx.core.assembly.assembler import DagContextAssembler
from stream_ctx.core.assembly.delta import SentState, pack_sent
from stream_ctx.core.assembly.learning import Learned, Learning
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.counting.tokenizer import get_tokenizer
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


def test_a_window_exactly_as_large_as_the_table_is_kept() -> None:
    learning = Learning(max_items=3)
    _finalized(
        ContextProcessor(BundleConfig(min_salience_threshold=0.0), learning=learning), "c-a", 3, 1
    )
    assert learning.items == 3
    assert learning.take("c-a") is not None


def _sent(seq: int) -> SentState:
    return SentState(seq=seq, entries=[], next_number=1, tokens_sent=seq, tokens_full=seq)


def test_learned_sent_state_unpacks_the_bytes_it_is_given_not_the_last_ones() -> None:
    learned = Learned(DagContextAssembler(get_tokenizer()))
    first, second = pack_sent(_sent(1)), pack_sent(_sent(2))
    assert learned.sent_state(None) is None
    assert learned.sent_state(first) == _sent(1)
    assert learned.sent_state(first) == _sent(1)
    assert learned.sent_state(second) == _sent(2)
