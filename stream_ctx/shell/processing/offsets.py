"""Where each owned input partition's processing stands: the next offset to process, which a
failed fetch rewinds to and the watchdog judges progress by."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from stream_ctx.errors import UndecodableBatchError

__all__ = ("InputOffsets",)


class InputOffsets:
    """The next input offset to process per partition, once one has been processed or found
    stuck; partition ownership forgets a partition when it goes."""

    def __init__(self) -> None:
        self._next: dict[TopicPartition, int] = {}

    def processed(self, tp: TopicPartition, next_offset: int) -> None:
        """A batch of `tp` is processed up to `next_offset`."""
        self._next[tp] = next_offset

    def stuck_at(self, error: UndecodableBatchError) -> None:
        """A partition paused at an undecodable batch: judged by the watchdog from here on."""
        self._next.setdefault(TopicPartition(error.topic, error.partition), error.offset)

    def positions(self, owned: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The next input offset of each partition of `owned` that has one."""
        return {tp: self._next[tp] for tp in owned if tp in self._next}

    async def rewind(
        self, consumer: AIOKafkaConsumer, owned: Collection[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Where each partition of `owned` not paused resumes: one past the last processed
        offset, else the committed one, else the start (Kafka resets an offset before the log
        start to the earliest)."""
        paused = consumer.paused()
        positions = {}
        for tp in owned:
            if tp in paused:
                continue
            if tp in self._next:
                positions[tp] = self._next[tp]
            else:
                committed: int | None = await consumer.committed(tp)
                positions[tp] = committed if committed is not None else 0
        return positions

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop the offsets of revoked partitions."""
        for tp in partitions:
            self._next.pop(tp, None)

    def clear(self) -> None:
        """Drop every offset: a failed session's next one starts from the committed ones."""
        self._next.clear()
