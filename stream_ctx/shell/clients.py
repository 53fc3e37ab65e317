"""Every aiokafka client stream-ctx makes, built in one place from `[kafka]` settings."""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from stream_ctx.shell.connection import client_kwargs
from stream_ctx.shell.settings import KafkaSettings
from stream_ctx.shell.topology import DLQ_MAX_MESSAGE_BYTES

# A heartbeat every third of the session timeout, Kafka's recommended ratio.
_HEARTBEAT_FRACTION = 3
# Fetch at least a whole default-sized (1 MiB) batch per partition, more if events may be larger.
_MIN_PARTITION_FETCH_BYTES = 1_048_576


def producer(kafka: KafkaSettings, **overrides: Any) -> AIOKafkaProducer:
    """The processor's producer: acks from all replicas, our codec and batch size, and room for a
    dead letter as large as any input record. No idempotence: Tansu lacks it; the protocol does
    not need it (repeats are byte-identical)."""
    options: dict[str, Any] = {
        **client_kwargs(kafka),
        "acks": "all",
        "enable_idempotence": False,
        "max_batch_size": kafka.max_batch_size,
        "linger_ms": kafka.linger_ms,
        "max_request_size": max(kafka.max_batch_size, DLQ_MAX_MESSAGE_BYTES),
        "compression_type": None if kafka.compression_type == "none" else kafka.compression_type,
    }
    return AIOKafkaProducer(**{**options, **overrides})


def group_consumer(kafka: KafkaSettings, **overrides: Any) -> AIOKafkaConsumer:
    """A member of `kafka.group_id` that commits by hand, from the earliest offset when none is."""
    options: dict[str, Any] = {
        **client_kwargs(kafka),
        "group_id": kafka.group_id,
        "fetch_max_wait_ms": kafka.fetch_max_wait_ms,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": kafka.session_timeout_ms,
        "heartbeat_interval_ms": kafka.session_timeout_ms // _HEARTBEAT_FRACTION,
        "max_partition_fetch_bytes": max(_MIN_PARTITION_FETCH_BYTES, kafka.max_event_bytes + 1024),
    }
    return AIOKafkaConsumer(**{**options, **overrides})


def reader(kafka: KafkaSettings, *topics: str, **overrides: Any) -> AIOKafkaConsumer:
    """A consumer outside any group that never commits: assigned by hand (changelog restore), or
    reading every partition of `topics` (watching output)."""
    options: dict[str, Any] = {
        **client_kwargs(kafka),
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": kafka.fetch_max_wait_ms,
    }
    return AIOKafkaConsumer(*topics, **{**options, **overrides})
