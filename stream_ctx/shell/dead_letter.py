"""Dead-letter records: the original key, value and headers plus headers naming the error.

Header names follow Kafka Streams' dead-letter queue (KIP-1034) so existing tooling reads them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.structs import ConsumerRecord

from stream_ctx.errors import InvalidEventError

Headers = list[tuple[str, bytes]]


def dead_letter_headers(record: ConsumerRecord[bytes, bytes], error: BaseException) -> Headers:
    """The record's own headers followed by the error and where the record came from."""
    own: Sequence[tuple[str, bytes]] = record.headers or ()
    headers: Headers = [(name, value) for name, value in own]
    headers += [
        ("__streams.errors.exception", type(error).__name__.encode()),
        ("__streams.errors.message", str(error).encode("utf-8", "replace")),
        ("__streams.errors.topic", record.topic.encode()),
        ("__streams.errors.partition", str(record.partition).encode()),
        ("__streams.errors.offset", str(record.offset).encode()),
    ]
    if isinstance(error, InvalidEventError) and error.path is not None:
        headers.append(("stream-ctx.errors.path", error.path.encode()))
    return headers


async def send_dead_letter(
    producer: AIOKafkaProducer,
    record: ConsumerRecord[bytes, bytes],
    error: BaseException,
    *,
    topic: str,
    partitions: int,
    max_value_bytes: int,
    head_bytes: int,
) -> asyncio.Future[object]:
    """Send the record as it came, with the error headers; its acknowledgement is returned."""
    headers = dead_letter_headers(record, error)
    value = record.value
    if value is not None and len(value) > max_value_bytes:
        # Too large for one produce request: park the head and say what was cut.
        headers += [
            ("stream-ctx.errors.value-bytes", str(len(value)).encode()),
            ("stream-ctx.errors.value-truncated-to", str(head_bytes).encode()),
        ]
        value = value[:head_bytes]
    if record.key is None and value is None:
        # aiokafka's send() refuses a record with neither; a raw batch carries it as it was.
        batch = producer.create_batch()
        batch.append(key=None, value=None, timestamp=None, headers=headers)
        sent: asyncio.Future[object] = await producer.send_batch(
            batch, topic, partition=record.partition % partitions
        )
        return sent
    sent = await producer.send(topic, value, key=record.key, headers=headers)
    return sent
