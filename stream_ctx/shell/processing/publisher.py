"""What a member writes as it processes: bundles, dead letters and changelog records. Each send
returns its acknowledgement, which the checkpoint awaits before committing the offsets."""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial

from aiokafka.structs import ConsumerRecord, TopicPartition

from stream_ctx.core.wire.bundle import Bundle, BundleStats
from stream_ctx.core.wire.codec import encode_bundle
from stream_ctx.errors import InvalidEventError
from stream_ctx.shell.http.metrics import Metrics
from stream_ctx.shell.kafka.clients import SessionClients
from stream_ctx.shell.kafka.dead_letter import send_dead_letter
from stream_ctx.shell.kafka.topology import Topics
from stream_ctx.shell.processing.stats import RunnerStats
from stream_ctx.shell.state.changelog import Record

__all__ = ("Publisher",)

log = logging.getLogger(__name__)

# Room for a record's key, headers and framing beside a truncated dead letter's value.
_RECORD_OVERHEAD_BYTES = 64 * 1024
# Loop turns from send() to aiokafka's produce request (counted once against the embedded broker): 3
# when the producer is idle; 7 when the answer to its previous request has arrived but is unread
# (aiokafka sends one request at a time per broker), as after a finalize. A release gets 7.
_SENDER_TURNS = 7


class Publisher:
    """Sends on the session's producers; counts bundles and dead letters, and observes each
    bundle's latency once it is acknowledged."""

    def __init__(
        self,
        topics: Topics,
        clients: SessionClients,
        *,
        max_event_bytes: int,
        stats: RunnerStats,
        metrics: Metrics,
    ) -> None:
        self._topics, self._clients, self._stats, self._metrics = topics, clients, stats, metrics
        # A dead letter's value is cut to fit what the input topic carries, framing aside.
        self._head_bytes = max(1, max_event_bytes - _RECORD_OVERHEAD_BYTES)
        # Dead letters keep their input partition modulo this: the dead-letter topic's width,
        # set by the runner once the topics exist.
        self.dlq_partitions = 1
        self._unreleased = 0

    async def bundle(self, bundle: Bundle, *, finalized_ms: int) -> asyncio.Future[object]:
        """Send a bundle keyed by its conversation (on the wire at the next release()).
        `finalized_ms` is its finalize record's timestamp."""
        self._stats.bundles += 1
        sent: asyncio.Future[object] = await self._clients.producer.send(
            self._topics.output,
            encode_bundle(bundle),
            key=bundle.conversation_id.encode(),
        )
        sent.add_done_callback(partial(self._observe_published, bundle.stats, finalized_ms))
        self._unreleased += 1
        return sent

    async def release(self) -> None:
        """Give the loop a turn; with bundles sent since the last release, enough turns for the
        producer to put them on the wire, in one request per broker."""
        turns, self._unreleased = (_SENDER_TURNS if self._unreleased else 1), 0
        for _ in range(turns):
            await asyncio.sleep(0)

    async def dead_letter(
        self, record: ConsumerRecord[bytes, bytes], error: Exception
    ) -> asyncio.Future[object]:
        """Park a record that cannot be applied, with headers naming the error; never drop it."""
        self._stats.dead_letters += 1
        kind = type(error).__name__
        self._metrics.dead_lettered(kind)
        by_error = self._stats.dead_letters_by_error
        by_error[kind] = by_error.get(kind, 0) + 1
        is_invalid = isinstance(error, InvalidEventError)
        log.log(
            logging.WARNING if is_invalid else logging.ERROR,
            "dead letter #%d from %s/%d@%d: %s: %s",
            self._stats.dead_letters,
            record.topic,
            record.partition,
            record.offset,
            kind,
            error,
            exc_info=not is_invalid,
        )
        return await send_dead_letter(
            self._clients.producer,
            record,
            error,
            topic=self._topics.dead_letter,
            partitions=self.dlq_partitions,
            head_bytes=self._head_bytes,
            on_truncated=self._metrics.dead_letter_truncated,
        )

    async def changelog(
        self, tp: TopicPartition, records: list[Record]
    ) -> list[asyncio.Future[object]]:
        """Write changelog records of input partition `tp` to its co-partitioned changelog."""
        topic = self._topics.changelog(tp.topic)
        return [
            await self._clients.changelog.send(topic, value, key=key, partition=tp.partition)
            for key, value in records
        ]

    def _observe_published(
        self, stats: BundleStats, finalized_ms: int, sent: asyncio.Future[object]
    ) -> None:
        """Latency runs from the finalize record's timestamp to the bundle's acknowledgement."""
        if sent.cancelled() or sent.exception() is not None:
            return  # the flush awaiting it raises
        self._metrics.bundle_published(
            tokens_naive=stats.tokens_naive,
            tokens_bundle=stats.tokens_bundle,
            tokens_prefix_reused=stats.tokens_prefix_reused,
            latency_s=(time.time() * 1000 - finalized_ms) / 1000,
        )
