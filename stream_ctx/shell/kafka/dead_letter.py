"""Dead-letter records: the original key, value and headers plus headers naming the error.

Header names follow Kafka Streams' dead-letter queue (KIP-1034) so existing tooling reads them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.structs import ConsumerRecord

from stream_ctx.errors import FinalizeRefusedError, InvalidEventError

__all__ = ("REFUSED_HEADER", "Headers", "send_dead_letter")

# Why a finalize was refused ("unknown", "ended", "expired"): serve answers its waiter by it.
REFUSED_HEADER = "stream-ctx.errors.refused"

Headers = list[tuple[str, bytes]]

log = logging.getLogger(__name__)


def _headers(record: ConsumerRecord[bytes, bytes], error: BaseException) -> Headers:
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
    if isinstance(error, FinalizeRefusedError):
        headers.append((REFUSED_HEADER, error.reason.encode()))
    return headers


async def send_dead_letter(
    producer: AIOKafkaProducer,
    record: ConsumerRecord[bytes, bytes],
    error: BaseException,
    *,
    topic: str,
    partitions: int,
    head_bytes: int,
    on_truncated: Callable[[], None],
) -> asyncio.Future[object]:
    """Send the record whole, with the error headers; the returned future is its
    acknowledgement. Only if the producer or the broker refuses it as too large, the first
    `head_bytes` of the value go instead, with headers saying so, and `on_truncated` is called."""
    headers = _headers(record, error)
    try:
        whole = await _send(producer, topic, record, record.value, headers, partitions)
    except MessageSizeTooLargeError:
        return await _send_head(
            producer, topic, record, headers, partitions, head_bytes, on_truncated
        )

    async def landed() -> object:
        try:
            return await whole
        except MessageSizeTooLargeError:
            head = await _send_head(
                producer, topic, record, headers, partitions, head_bytes, on_truncated
            )
            return await head

    return asyncio.ensure_future(landed())


async def _send_head(
    producer: AIOKafkaProducer,
    topic: str,
    record: ConsumerRecord[bytes, bytes],
    headers: Headers,
    partitions: int,
    head_bytes: int,
    on_truncated: Callable[[], None],
) -> asyncio.Future[object]:
    value = record.value or b""
    log.error(
        "dead letter of %s/%d@%d refused whole (%d bytes); parking its first %d bytes",
        record.topic,
        record.partition,
        record.offset,
        len(value),
        head_bytes,
    )
    on_truncated()
    cut = [
        ("stream-ctx.errors.value-bytes", str(len(value)).encode()),
        ("stream-ctx.errors.value-truncated-to", str(head_bytes).encode()),
    ]
    return await _send(producer, topic, record, value[:head_bytes], headers + cut, partitions)


async def _send(
    producer: AIOKafkaProducer,
    topic: str,
    record: ConsumerRecord[bytes, bytes],
    value: bytes | None,
    headers: Headers,
    partitions: int,
) -> asyncio.Future[object]:
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
