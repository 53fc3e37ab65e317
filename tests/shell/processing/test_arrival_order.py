"""The Runner takes a fetched batch's records by create time across partitions, never
reordering one partition's records."""

from __future__ import annotations

from aiokafka.structs import ConsumerRecord, TopicPartition

from stream_ctx.shell.processing.runner import _in_arrival_order

A, B, C = (TopicPartition("in", n) for n in range(3))


def _record(tp: TopicPartition, offset: int, timestamp: int) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=tp.topic,
        partition=tp.partition,
        offset=offset,
        timestamp=timestamp,
        timestamp_type=0,
        key=None,
        value=b"",
        checksum=None,
        serialized_key_size=0,
        serialized_value_size=0,
        headers=(),
    )


def test_records_of_all_partitions_come_in_create_time_order() -> None:
    batch = {
        A: [_record(A, 0, 30), _record(A, 1, 40)],
        B: [_record(B, 7, 10), _record(B, 8, 50)],
        C: [_record(C, 3, 20)],
    }
    order = [(tp.partition, r.offset) for tp, r in _in_arrival_order(batch)]
    assert order == [(1, 7), (2, 3), (0, 0), (0, 1), (1, 8)]


def test_a_partition_keeps_its_offset_order_when_its_clock_goes_back() -> None:
    batch = {A: [_record(A, 0, 50), _record(A, 1, 10)], B: [_record(B, 0, 30)]}
    order = [(tp.partition, r.offset) for tp, r in _in_arrival_order(batch)]
    assert order == [(1, 0), (0, 0), (0, 1)]
