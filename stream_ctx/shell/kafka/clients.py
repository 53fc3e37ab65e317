"""Every aiokafka client stream-ctx makes, built in one place from `[kafka]` settings, and the
clients of a group member's session, made and closed together."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener
from aiokafka.errors import (
    CommitFailedError,
    IllegalGenerationError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from stream_ctx.errors import StreamCtxError
from stream_ctx.settings import KafkaSettings, client_kwargs
from stream_ctx.shell.kafka.topology import DLQ_MAX_MESSAGE_BYTES

__all__ = ("SessionClients", "group_consumer", "producer", "reader")

log = logging.getLogger(__name__)

# A heartbeat every third of the session timeout, Kafka's recommended ratio.
_HEARTBEAT_FRACTION = 3
# Fetch at least a whole default-sized (1 MiB) batch per partition, more if events may be larger.
_MIN_PARTITION_FETCH_BYTES = 1_048_576
# Stopping a client sends a last request or two; with the broker gone they cannot be answered.
_CLOSE_TIMEOUT_S = 5.0
# Commit errors that mean another member owns our partitions now: rejoin, do not crash.
_GROUP_MOVED_ON = (
    CommitFailedError,
    IllegalGenerationError,
    UnknownMemberIdError,
    RebalanceInProgressError,
)


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


@dataclass(frozen=True, slots=True)
class _Clients:
    consumer: AIOKafkaConsumer
    # Bundles and dead letters. aiokafka keeps one produce request in flight per broker and
    # producer, so changelog writes get their own: a bundle never waits behind them.
    producer: AIOKafkaProducer
    changelog: AIOKafkaProducer
    restorer: AIOKafkaConsumer


class SessionClients:
    """A group member's four clients, made fresh for each session and closed after it: the group
    consumer, the producers of bundles and of changelog records, and the changelog restorer."""

    def __init__(self, kafka: KafkaSettings) -> None:
        self._kafka = kafka
        self._clients: _Clients | None = None

    @property
    def consumer(self) -> AIOKafkaConsumer:
        return self._session.consumer

    @property
    def producer(self) -> AIOKafkaProducer:
        return self._session.producer

    @property
    def changelog(self) -> AIOKafkaProducer:
        return self._session.changelog

    @property
    def restorer(self) -> AIOKafkaConsumer:
        return self._session.restorer

    @property
    def _session(self) -> _Clients:
        if self._clients is None:
            raise StreamCtxError("the runner's Kafka clients exist only inside a session")
        return self._clients

    @asynccontextmanager
    async def session(self, listener: ConsumerRebalanceListener) -> AsyncIterator[None]:
        """Start fresh clients and join the group, telling `listener` of rebalances; on leaving,
        stop every client, each bounded (with the broker gone, leaving the group cannot finish)."""
        kafka = self._kafka
        consumer, restorer = group_consumer(kafka), reader(kafka)
        clients = _Clients(consumer, producer(kafka), producer(kafka), restorer)
        self._clients = clients
        try:
            await clients.producer.start()
            await clients.changelog.start()
            await clients.restorer.start()
            clients.consumer.subscribe(kafka.input_topics, listener=listener)
            await clients.consumer.start()
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await _close(clients)

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit the next input offset of each partition."""
        committed = {tp: OffsetAndMetadata(offset, "") for tp, offset in offsets.items()}
        try:
            await self.consumer.commit(committed)
        except _GROUP_MOVED_ON as exc:
            # The group rebalanced without us (a pause past the session timeout). Everything
            # these offsets cover is already published and in the changelog, so the new owner
            # re-reads from the last commit and skips what the changelog reflects; we rejoin.
            log.warning("commit refused, the group moved on without us: %s; rejoining", exc)


async def _close(clients: _Clients) -> None:
    for client in (clients.consumer, clients.restorer, clients.producer, clients.changelog):
        with anyio.move_on_after(_CLOSE_TIMEOUT_S):
            try:
                await client.stop()
            except asyncio.CancelledError:
                # Shielded, so not ours: aiokafka's fetcher re-raises the cancellation of its
                # own fetch task when stopped mid-retry, before closing the consumer's
                # connections. Passing it on would cancel us; the sockets are closed here.
                log.debug("aiokafka raised its own cancellation while stopping %r", client)
                await client._client.close()
            except Exception as exc:  # a client of a failed session; the next one is new
                log.debug("stopping %r failed: %s", client, exc)
