"""The stream processor: a consumer-group member applying events and publishing bundles.

The Runner wires its parts and runs the loop: the Supervisor runs sessions, OwnedPartitions
claims, restores and releases partitions, the Publisher sends, and the Checkpoint commits in the
order its module numbers.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Iterator
from functools import partial

import anyio
import anyio.abc
from aiokafka.structs import ConsumerRecord, TopicPartition

from stream_ctx.client import rewind_emptied
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.counting.tokenizer import get_tokenizer
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.events import Event
from stream_ctx.errors import ConversationReleasedError
from stream_ctx.settings import Settings, client_kwargs
from stream_ctx.shell.http.inspector.history import InspectorHistory
from stream_ctx.shell.http.metrics import Health, Metrics
from stream_ctx.shell.kafka.admin import ensure_topics, partition_counts
from stream_ctx.shell.kafka.clients import SessionClients
from stream_ctx.shell.kafka.fetch import DECODE_ERRORS, Batch, fetch_isolating
from stream_ctx.shell.kafka.topology import Topics, topics_to_create
from stream_ctx.shell.processing.heap import run_heap
from stream_ctx.shell.processing.intake import read_event
from stream_ctx.shell.processing.ownership import OwnedPartitions
from stream_ctx.shell.processing.publisher import Publisher
from stream_ctx.shell.processing.retry import is_transient
from stream_ctx.shell.processing.stats import RunnerStats
from stream_ctx.shell.processing.supervisor import Supervisor
from stream_ctx.shell.processing.watchdog import Watchdog
from stream_ctx.shell.state.changelog import ChangelogWrites
from stream_ctx.shell.state.checkpoint import Checkpoint

__all__ = ("Runner",)

log = logging.getLogger(__name__)

# How long one fetch waits for records before the loop checks for shutdown and restores.
_POLL_MS = 100
# Processing gives the loop a turn at least this often, so fetches, heartbeats and acks of what
# was sent progress while a large batch is processed; the bundles made since the last turn go out
# then, in one produce request (and at the batch's end).
_MAX_BUSY_S = 0.005
# Idle conversations are looked for this often: a scan of every held conversation.
_SWEEP_INTERVAL_S = 30.0


class Runner:
    """One processor instance; `run` until `stop` is set, then drain, commit and leave."""

    def __init__(
        self,
        settings: Settings,
        *,
        metrics: Metrics | None = None,
        health: Health | None = None,
        history: InspectorHistory | None = None,
        stall_after_s: float | None = None,
    ) -> None:
        self.settings = settings
        self.history = history  # fed only when an inspector reads it
        self.stats = RunnerStats()
        self.metrics = metrics if metrics is not None else Metrics()
        self.health = health if health is not None else Health()
        self.stop = anyio.Event()
        self._kwargs = client_kwargs(settings.kafka)
        self.clients = SessionClients(settings.kafka)
        topics = Topics.of(settings)
        self.publisher = Publisher(
            topics,
            self.clients,
            max_event_bytes=settings.kafka.max_event_bytes,
            stats=self.stats,
            metrics=self.metrics,
        )
        self.checkpoint = Checkpoint(
            send=self.publisher.changelog,
            commit=self.clients.commit,
            interval_s=settings.state.commit_interval_ms / 1000,
        )
        self._supervisor = Supervisor(self.stop)
        # Held while a batch is processed or a revocation flushes and drops partitions.
        self._lock = anyio.Lock()
        self.partitions = OwnedPartitions(
            settings.bundle,
            topics,
            self.clients,
            self.checkpoint,
            restore_timeout_s=settings.state.restore_timeout_s,
            lock=self._lock,
            stats=self.stats,
            metrics=self.metrics,
            health=self.health,
            is_recording_items=history is not None,
            on_ready=self._supervisor.recovered,
        )
        self.metrics.watch_memos(self.partitions.memos)
        self._watchdog = Watchdog(
            self.health,
            stall_after_s=settings.metrics.stall_after_s
            if stall_after_s is None
            else stall_after_s,
            fetch_max_wait_ms=settings.kafka.fetch_max_wait_ms,
        )
        self.metrics.progress_clock(self._watchdog.seconds_since_progress)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> RunnerStats:
        """Create topics, join the group, process until stopped. A broker fault after the start
        (restore, produce, commit, a timeout) never parks a record: the session ends, and a new
        one resumes from the committed offsets and the changelog, after a backoff."""
        counts = await partition_counts(self._kwargs, self.settings.kafka.input_topics)
        self.publisher.dlq_partitions = max(counts.values())
        await ensure_topics(self._kwargs, topics_to_create(self.settings, counts))
        get_tokenizer(self.settings.bundle.tokenizer)  # loaded first, so its tables are frozen too
        # Not ready from a fault until a new session is restored.
        on_fault = partial(self.partitions.mark_ready, is_rebalancing=True)
        with run_heap():
            await self._supervisor.run(self._session, on_fault=on_fault, task_status=task_status)
        log.info(
            "stopped: %d events, %d bundles, %d dead letters",
            self.stats.events,
            self.stats.bundles,
            self.stats.dead_letters,
        )
        return self.stats

    async def _session(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        """One group membership: fresh clients and state, processing until stopped, then a
        drain; on a failure only the clients are closed (the next session re-reads)."""
        self.checkpoint.abandon()
        self.partitions.forget()
        async with self.clients.session(listener=self.partitions):
            self._supervisor.started()
            task_status.started()
            await self._loop()
            async with self._lock:
                await self.checkpoint.flush()

    async def _loop(self) -> None:
        next_sweep = time.monotonic() + _SWEEP_INTERVAL_S
        while not self.stop.is_set():
            self.health.beat()
            if self._watchdog.is_due:
                self._watchdog.observe(
                    self.clients.consumer,
                    self.partitions.offsets.positions(self.partitions.processors),
                    in_flight=self.checkpoint.in_flight,
                )
            if self.partitions.is_restoring:
                await self.partitions.restore()
                continue
            batch = await self._fetch()
            if not batch:
                async with self._lock:
                    owned = self.partitions.processors
                    self.partitions.start_over(await rewind_emptied(self.clients.consumer, owned))
                if self.checkpoint.has_work:
                    # Idle: nothing else would flush it. In the background, so an event that
                    # arrives meanwhile is fetched and processed without waiting for the acks.
                    async with self._lock:
                        self.checkpoint.start_idle()
                continue
            async with self._lock:
                await self._process(self.partitions.without_emptied(batch))
                if time.monotonic() >= next_sweep:
                    self.partitions.release_idle()
                    next_sweep = time.monotonic() + _SWEEP_INTERVAL_S

    async def _fetch(self) -> Batch:
        """The next batch; an undecodable record batch pauses its own partition, not all."""
        consumer, limit = self.clients.consumer, self.settings.kafka.max_poll_records
        try:
            batch: Batch = await consumer.getmany(timeout_ms=_POLL_MS, max_records=limit)
        except DECODE_ERRORS:
            positions = await self.partitions.offsets.rewind(consumer, self.partitions.processors)
            batch, failed = await fetch_isolating(
                consumer, positions, max_records=limit, timeout_ms=_POLL_MS
            )
            for error in failed:
                log.error("%s", error)
                self.partitions.offsets.stuck_at(error)
        return batch

    async def _process(self, batch: Batch) -> None:
        """Apply a batch in arrival order, sending each bundle as it is made and dead-lettering
        what cannot be applied; then hand each partition's changes to the checkpoint."""
        max_bytes = self.settings.kafka.max_event_bytes
        processors = self.partitions.processors
        # Partitions revoked between the fetch and this batch are skipped.
        held = {tp: records for tp, records in batch.items() if tp in processors}
        sent: list[asyncio.Future[object]] = []
        yielded_at = time.monotonic()
        for tp, record in _in_arrival_order(held):
            processor = processors[tp]
            self.stats.events += 1
            try:
                event = read_event(record, max_bytes=max_bytes)
                bundle = await self._apply(tp, processor, event, record.offset)
            except Exception as exc:
                if is_transient(exc):
                    raise  # the broker's fault, not the record's: the session restarts
                sent.append(await self.publisher.dead_letter(record, exc))  # parked, never dropped
                continue
            if bundle is not None:
                self._feed_inspector(tp, processor, bundle)
                sent.append(await self.publisher.bundle(bundle, finalized_ms=record.timestamp))
            if time.monotonic() - yielded_at >= _MAX_BUSY_S:
                await self.publisher.release()
                yielded_at = time.monotonic()
        await self.publisher.release()
        self.checkpoint.cover(sent)
        for tp, records in held.items():
            await self._checkpoint_partition(tp, processors[tp], records)
        await self.checkpoint.end_batch()
        self.stats.batches += 1
        self.partitions.count_held()

    async def _checkpoint_partition(
        self,
        tp: TopicPartition,
        processor: ContextProcessor,
        records: list[ConsumerRecord[bytes, bytes]],
    ) -> None:
        """A partition's part of the batch: its changes to the checkpoint, its figures out."""
        next_offset = records[-1].offset + 1
        self.metrics.events_consumed(tp.topic, len(records))
        self.partitions.offsets.processed(tp, next_offset)
        writes = ChangelogWrites.of(processor.take_changes())
        outcomes = processor.take_item_outcomes()
        self._feed_inspector(tp, processor, None)
        self.metrics.items(
            accepted=outcomes.accepted, rejected=outcomes.rejected, evicted=outcomes.evicted
        )
        highwater = self.clients.consumer.highwater(tp)
        if highwater is not None:
            self.metrics.lag(tp.topic, tp.partition, highwater - next_offset)
        orphans = self.partitions.take_orphans(tp)
        await self.checkpoint.add(tp, writes, orphans=orphans, next_offset=next_offset)

    async def _apply(
        self, tp: TopicPartition, processor: ContextProcessor, event: Event, offset: int
    ) -> Bundle | None:
        try:
            return processor.apply(event, position=offset)
        except ConversationReleasedError as released:
            await self.partitions.reload(tp, processor, released.conversation_id)
            return processor.apply(event, position=offset)

    def _feed_inspector(
        self, tp: TopicPartition, processor: ContextProcessor, bundle: Bundle | None
    ) -> None:
        if self.history is not None:
            self.history.record_processing(f"{tp.topic}/{tp.partition}", processor, bundle)


def _in_arrival_order(
    batch: Batch,
) -> Iterator[tuple[TopicPartition, ConsumerRecord[bytes, bytes]]]:
    """Every partition's records, each partition's in offset order, merged by create time: a
    finalize waits only for what arrived before it, not for whole partitions fetched with it.
    Partitions are independent, so the order among them changes no bundle."""
    return heapq.merge(
        *([(tp, record) for record in records] for tp, records in batch.items()),
        key=lambda pair: pair[1].timestamp,
    )
