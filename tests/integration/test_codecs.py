"""Input compressed with every Kafka codec gives its bundles; an undecodable batch stalls only its
partition, with an error naming topic, partition, offset and codec."""

from __future__ import annotations

import logging
from collections.abc import Callable

import aiokafka.codec
import anyio
import msgspec
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import TopicPartition

from stream_ctx.core.wire.events import Event
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.shell.kafka.admin import ClientKwargs
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from stream_ctx.shell.processing.runner import Runner
from tests.integration.kafka_io import (
    bundles_by_id,
    collect,
    committed_offsets,
    create_input,
    settings_for,
)
from tests.integration.test_runner import replay_bundles

# Group join on this broker takes ~3 s; the events here take well under a second.
RUN_TIMEOUT_S = 60.0
CODECS = ("gzip", "snappy", "lz4", "zstd")
# How often the test looks for the error line while the member runs.
POLL_S = 0.1
DECODE = "cannot be decoded"
SHAPE = WorkloadShape(conversations=3, retrievals_per_conversation=4, is_ending=False)


def events_of(codec: str) -> list[Event]:
    """A small stream whose conversation ids name the codec it is produced with."""
    return [
        msgspec.structs.replace(e, conversation_id=f"{codec}-{e.conversation_id}")
        for e in generate(3, SHAPE)
    ]


async def produce_compressed(
    client_kwargs: ClientKwargs, topic: str, partition: int, codec: str, events: list[Event]
) -> None:
    producer = AIOKafkaProducer(
        **client_kwargs, acks="all", enable_idempotence=False, compression_type=codec, linger_ms=5
    )
    await producer.start()
    try:
        sent = [
            await producer.send(
                topic,
                msgspec.json.encode(e),
                key=e.conversation_id.encode(),
                partition=partition,
            )
            for e in events
        ]
        for future in sent:
            await future
    finally:
        await producer.stop()


async def test_every_codec_gives_bundles_identical_to_replay(
    broker: EmbeddedBroker, client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    source, sink = unique_topic("in"), unique_topic("out")
    await create_input(client_kwargs, source, partitions=len(CODECS))
    streams = {codec: events_of(codec) for codec in CODECS}
    for partition, (codec, events) in enumerate(streams.items()):
        await produce_compressed(client_kwargs, source, partition, codec, events)
    every = [e for events in streams.values() for e in events]
    expected = replay_bundles(every)
    settings = settings_for(
        broker.bootstrap_servers,
        input_topic=source,
        output_topic=sink,
        dlq_topic=unique_topic("dlq"),
        group_id=unique_topic("group"),
    )
    runner = Runner(settings)
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with anyio.create_task_group() as tasks:
            await tasks.start(runner.run)
            found = await collect(client_kwargs, sink, len(expected), timeout_s=RUN_TIMEOUT_S)
            runner.stop.set()
    assert bundles_by_id(found) == expected
    for codec in CODECS:
        assert any(bundle_id.startswith(f"{codec}-") for bundle_id in expected), codec
    assert runner.stats.dead_letters == 0


async def test_undecodable_batch_stalls_its_partition_with_a_clear_error_not_the_member(
    broker: EmbeddedBroker,
    client_kwargs: ClientKwargs,
    unique_topic: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A crash loop seen once: a zstd batch read where the zstd library is missing. The
    broker only stores batches it can decode itself, so the consumer's library is taken away."""
    source, sink, group = unique_topic("in"), unique_topic("out"), unique_topic("group")
    await create_input(client_kwargs, source, partitions=2)
    healthy = events_of("gzip")
    await produce_compressed(client_kwargs, source, 1, "gzip", healthy)
    await produce_compressed(client_kwargs, source, 0, "zstd", events_of("zstd"))
    monkeypatch.setattr(aiokafka.codec, "has_zstd", lambda: False)
    expected = replay_bundles(healthy)
    settings = settings_for(
        broker.bootstrap_servers,
        input_topic=source,
        output_topic=sink,
        dlq_topic=unique_topic("dlq"),
        group_id=group,
    )
    # Our own output must not need the missing library either.
    kafka = msgspec.structs.replace(settings.kafka, compression_type="gzip")
    runner = Runner(msgspec.structs.replace(settings, kafka=kafka))
    caplog.set_level(logging.ERROR, logger="stream_ctx")
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with anyio.create_task_group() as tasks:
            await tasks.start(runner.run)
            found = await collect(client_kwargs, sink, len(expected), timeout_s=RUN_TIMEOUT_S)
            for _ in range(int(RUN_TIMEOUT_S / POLL_S)):
                errors = [r.getMessage() for r in caplog.records if DECODE in r.getMessage()]
                if errors:
                    break
                await anyio.sleep(POLL_S)
            runner.stop.set()
    assert bundles_by_id(found) == expected
    assert errors, caplog.text
    assert f"{source}/0 from offset 0" in errors[0]
    assert "codec 'zstd'" in errors[0]
    assert not any(r.exc_info for r in caplog.records), caplog.text
    offsets = await committed_offsets(
        client_kwargs, group, [TopicPartition(source, 0), TopicPartition(source, 1)]
    )
    assert offsets[TopicPartition(source, 0)] in (None, 0)  # nothing past the bad batch
    assert offsets[TopicPartition(source, 1)] == len(healthy)
