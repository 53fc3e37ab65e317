"""Input offsets: what a failed fetch rewinds to, and what the watchdog judges progress by."""

from __future__ import annotations

from aiokafka.structs import TopicPartition

from stream_ctx.errors import UndecodableBatchError
from stream_ctx.shell.processing.offsets import InputOffsets

A, B, C, D = (TopicPartition("ctx.retrievals", n) for n in range(4))


class _Consumer:
    """The two consumer calls a rewind makes: paused partitions and committed offsets."""

    def __init__(
        self, *, paused: set[TopicPartition], committed: dict[TopicPartition, int]
    ) -> None:
        self._paused, self._committed = paused, committed

    def paused(self) -> set[TopicPartition]:
        return self._paused

    async def committed(self, tp: TopicPartition) -> int | None:
        return self._committed.get(tp)


def _stuck(tp: TopicPartition, offset: int) -> UndecodableBatchError:
    return UndecodableBatchError(
        topic=tp.topic, partition=tp.partition, offset=offset, codec="lz4", cause="corrupt"
    )


def test_positions_are_the_processed_offsets_of_owned_partitions_only() -> None:
    offsets = InputOffsets()
    offsets.processed(A, 10)
    offsets.processed(B, 3)
    offsets.processed(A, 12)
    assert offsets.positions([A, C]) == {A: 12}


def test_a_stuck_partition_keeps_an_offset_it_already_has() -> None:
    offsets = InputOffsets()
    offsets.processed(A, 10)
    offsets.stuck_at(_stuck(A, 40))
    offsets.stuck_at(_stuck(B, 7))
    assert offsets.positions([A, B]) == {A: 10, B: 7}


async def test_rewind_skips_paused_then_takes_processed_committed_or_the_start() -> None:
    offsets = InputOffsets()
    offsets.processed(A, 10)
    offsets.processed(B, 5)
    consumer = _Consumer(paused={B}, committed={A: 2, C: 8})
    rewound = await offsets.rewind(consumer, [A, B, C, D])
    assert rewound == {A: 10, C: 8, D: 0}


def test_forget_drops_revoked_partitions_and_clear_drops_all() -> None:
    offsets = InputOffsets()
    for tp, offset in ((A, 1), (B, 2), (C, 3)):
        offsets.processed(tp, offset)
    offsets.forget([A, D])
    assert offsets.positions([A, B, C]) == {B: 2, C: 3}
    offsets.clear()
    assert offsets.positions([A, B, C]) == {}
