"""Producing events and collecting records in integration tests, every wait bounded."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import ConsumerRecord

from stream_ctx.core.events import Event
from stream_ctx.shell.admin import ClientKwargs, TopicSpec, ensure_topics
from stream_ctx.shell.settings import KafkaSettings, Settings


async def create_input(client_kwargs: ClientKwargs, topic: str, partitions: int = 3) -> None:
    await ensure_topics(client_kwargs, [TopicSpec(name=topic, partitions=partitions)])


async def produce(client_kwargs: ClientKwargs, topic: str,
                  records: Sequence[tuple[bytes | None, bytes | None]],
                  headers: Sequence[tuple[str, bytes]] | None = None) -> None:
    """Send raw (key, value) records in order and wait for every acknowledgement."""
    producer = AIOKafkaProducer(**client_kwargs, acks="all", enable_idempotence=False,
                                max_batch_size=1_048_576, linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic, value, key=key, headers=list(headers or []))
                   for key, value in records]
        for future in futures:
            await future
    finally:
        await producer.stop()


def event_records(events: Sequence[Event]) -> list[tuple[bytes | None, bytes | None]]:
    return [(e.conversation_id.encode(), msgspec.json.encode(e)) for e in events]


async def collect(client_kwargs: ClientKwargs, topic: str, count: int, *,
                  timeout_s: float) -> list[ConsumerRecord[bytes, bytes]]:
    """Read `topic` from the start until `count` records arrived (fails after `timeout_s`)."""
    consumer = AIOKafkaConsumer(topic, **client_kwargs, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    found: list[ConsumerRecord[bytes, bytes]] = []
    try:
        with anyio.fail_after(timeout_s):
            while len(found) < count:
                batch = await consumer.getmany(timeout_ms=200)
                for records in batch.values():
                    found.extend(records)
    finally:
        await consumer.stop()
    return found


def settings_for(bootstrap: str, *, input_topic: str, output_topic: str, dlq_topic: str,
                 group_id: str, **bundle: object) -> Settings:
    """Settings for a test run: short session timeout (Tansu answers a first join after ~half)."""
    kafka = KafkaSettings(bootstrap_servers=bootstrap, group_id=group_id,
                          input_topics=[input_topic], output_topic=output_topic,
                          dlq_topic=dlq_topic, session_timeout_ms=6_000)
    base = Settings(kafka=kafka)
    return msgspec.structs.replace(base, bundle=msgspec.structs.replace(base.bundle, **bundle))
