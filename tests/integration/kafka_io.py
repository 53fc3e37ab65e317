"""Producing events and collecting records in integration tests, every wait bounded."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio
import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import ConsumerRecord, TopicPartition

from stream_ctx.core.wire.events import Event
from stream_ctx.settings import ENV_PREFIX, KafkaSettings, Settings
from stream_ctx.shell.kafka.admin import ClientKwargs, TopicSpec, ensure_topics


async def create_input(client_kwargs: ClientKwargs, topic: str, partitions: int = 3) -> None:
    await ensure_topics(client_kwargs, [TopicSpec(name=topic, partitions=partitions)])


async def produce(
    client_kwargs: ClientKwargs,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    headers: Sequence[tuple[str, bytes]] | None = None,
) -> None:
    """Send raw (key, value) records in order and wait for every acknowledgement."""
    producer = AIOKafkaProducer(
        **client_kwargs, acks="all", enable_idempotence=False, max_batch_size=1_048_576, linger_ms=5
    )
    await producer.start()
    try:
        futures = [
            await producer.send(topic, value, key=key, headers=list(headers or []))
            for key, value in records
        ]
        for future in futures:
            await future
    finally:
        await producer.stop()


def event_records(events: Sequence[Event]) -> list[tuple[bytes | None, bytes | None]]:
    return [(e.conversation_id.encode(), msgspec.json.encode(e)) for e in events]


async def collect(
    client_kwargs: ClientKwargs, topic: str, count: int, *, timeout_s: float
) -> list[ConsumerRecord[bytes, bytes]]:
    """Read `topic` from the start until `count` records arrived (fails after `timeout_s`)."""
    return await collect_until(
        client_kwargs, topic, lambda found: len(found) >= count, timeout_s=timeout_s
    )


async def collect_until(
    client_kwargs: ClientKwargs,
    topic: str,
    is_done: Callable[[list[ConsumerRecord[bytes, bytes]]], bool],
    *,
    timeout_s: float,
) -> list[ConsumerRecord[bytes, bytes]]:
    """Read `topic` from the start until `is_done(records so far)` (fails after `timeout_s`)."""
    consumer = AIOKafkaConsumer(
        topic,
        **client_kwargs,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    found: list[ConsumerRecord[bytes, bytes]] = []
    try:
        with anyio.fail_after(timeout_s):
            while not is_done(found):
                batch = await consumer.getmany(timeout_ms=200)
                for records in batch.values():
                    found.extend(records)
    finally:
        await consumer.stop()
    return found


def settings_for(
    bootstrap: str,
    *,
    input_topic: str,
    output_topic: str,
    dlq_topic: str,
    group_id: str,
    **bundle: object,
) -> Settings:
    """Settings for a test run: short session timeout (Tansu answers a first join after ~half)."""
    kafka = KafkaSettings(
        bootstrap_servers=bootstrap,
        group_id=group_id,
        input_topics=[input_topic],
        output_topic=output_topic,
        dlq_topic=dlq_topic,
        session_timeout_ms=6_000,
    )
    base = Settings(kafka=kafka)
    return msgspec.structs.replace(base, bundle=msgspec.structs.replace(base.bundle, **bundle))


# How often bounded polls look again; short next to a group join (~3 s on the embedded broker).
_POLL_INTERVAL_S = 0.05


async def partitions_of(client_kwargs: ClientKwargs, topic: str) -> list[TopicPartition]:
    """The topic's partitions, from the cluster metadata."""
    consumer = AIOKafkaConsumer(**client_kwargs, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        # A metadata request for all topics: naming one would auto-create it on this broker.
        await consumer.topics()
        numbers = consumer.partitions_for_topic(topic)
    finally:
        await consumer.stop()
    assert numbers, f"topic {topic!r} has no partitions in the metadata"
    return [TopicPartition(topic, n) for n in sorted(numbers)]


async def high_watermarks(
    client_kwargs: ClientKwargs, topic: str, *, timeout_s: float
) -> dict[TopicPartition, int]:
    """Each partition's high watermark, from fetch responses (ListOffsets fails on this broker)."""
    partitions = await partitions_of(client_kwargs, topic)
    consumer = AIOKafkaConsumer(**client_kwargs, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        max_polls = int(timeout_s / _POLL_INTERVAL_S) + 1
        with anyio.fail_after(timeout_s):
            for _ in range(max_polls):
                await consumer.getmany(timeout_ms=int(_POLL_INTERVAL_S * 1000))
                marks = {tp: consumer.highwater(tp) for tp in partitions}
                if all(mark is not None for mark in marks.values()):
                    return {tp: mark for tp, mark in marks.items() if mark is not None}
    finally:
        await consumer.stop()
    raise AssertionError(f"no high watermark for every partition of {topic!r}")


async def commit(
    client_kwargs: ClientKwargs, group_id: str, offsets: Mapping[TopicPartition, int]
) -> None:
    """Commit `offsets` for the group from outside it, as a member of an old generation might."""
    consumer = AIOKafkaConsumer(**client_kwargs, group_id=group_id, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(list(offsets))
        await consumer.commit(dict(offsets))
    finally:
        await consumer.stop()


async def committed_offsets(
    client_kwargs: ClientKwargs, group_id: str, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, int | None]:
    """The group's committed offsets, read without joining the group (None: nothing committed)."""
    consumer = AIOKafkaConsumer(**client_kwargs, group_id=group_id, enable_auto_commit=False)
    await consumer.start()
    try:
        return {tp: await consumer.committed(tp) for tp in partitions}
    finally:
        await consumer.stop()


def bundles_by_id(records: Sequence[ConsumerRecord[bytes, bytes]]) -> dict[str, bytes]:
    """bundle_id -> bundle bytes; fails on two different values under one bundle_id."""
    found: dict[str, bytes] = {}
    for record in records:
        bundle_id = msgspec.json.decode(record.value)["bundle_id"]
        assert found.setdefault(bundle_id, record.value) == record.value, bundle_id
    return found


def write_config(path: Path, settings: Settings) -> Path:
    """A `stream-ctx run` config file holding the `[kafka]` table of `settings`."""
    kafka = settings.kafka
    servers = kafka.servers
    lines = [
        "[kafka]",
        f"bootstrap_servers = {json.dumps(servers)}",
        f"group_id = {json.dumps(kafka.group_id)}",
        f"input_topics = {json.dumps(kafka.input_topics)}",
        f"output_topic = {json.dumps(kafka.output_topic)}",
        f"dlq_topic = {json.dumps(kafka.dlq_topic)}",
        f"max_event_bytes = {kafka.max_event_bytes}",
        f"session_timeout_ms = {kafka.session_timeout_ms}",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def cli_command(config: Path) -> list[str]:
    """`stream-ctx run --config FILE`, through this interpreter so the venv's package is used."""
    return [sys.executable, "-m", "stream_ctx.shell.commands.cli", "run", "--config", str(config)]


def cli_environment() -> dict[str, str]:
    """This process's environment without STREAM_CTX_ overrides, so only the file configures."""
    return {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
