"""The stream processor: a consumer-group member applying events and publishing bundles.

Each batch's bundles, dead letters and changelog writes go to a Checkpoint, which writes and
commits them in the order that makes replays exact (its module numbers the steps).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial

import anyio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener
from aiokafka.errors import (
    CommitFailedError,
    IllegalGenerationError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition

from stream_ctx.core.accumulator import RankedItem
from stream_ctx.core.bundle import Bundle, BundleStats
from stream_ctx.core.changes import Restored
from stream_ctx.core.codec import encode_bundle
from stream_ctx.core.events import Event
from stream_ctx.core.processor import ContextProcessor
from stream_ctx.core.tokenizer import get_tokenizer
from stream_ctx.errors import ConversationReleasedError, InvalidEventError, StreamCtxError
from stream_ctx.shell import clients
from stream_ctx.shell.admin import ensure_topics, partition_counts
from stream_ctx.shell.changelog import ChangelogWrites, Record, RestoredPartition
from stream_ctx.shell.checkpoint import Checkpoint
from stream_ctx.shell.connection import client_kwargs
from stream_ctx.shell.dead_letter import send_dead_letter
from stream_ctx.shell.fetch import DECODE_ERRORS, Batch, fetch_isolating
from stream_ctx.shell.heap import run_heap
from stream_ctx.shell.inspector.history import History
from stream_ctx.shell.intake import read_event
from stream_ctx.shell.metrics import Health, Metrics
from stream_ctx.shell.recovery import read_changelogs
from stream_ctx.shell.retry import Outage, is_transient
from stream_ctx.shell.settings import Settings
from stream_ctx.shell.topology import changelog_topic, topics_to_create
from stream_ctx.shell.watchdog import Progress

log = logging.getLogger("stream_ctx.runner")

# How long one fetch waits for records before the loop checks for shutdown and restores.
_POLL_MS = 100
# Room for a record's key, headers and framing beside a truncated dead letter's value.
_RECORD_OVERHEAD_BYTES = 64 * 1024
# Commit errors that mean another member owns our partitions now: rejoin, do not crash.
_GROUP_MOVED_ON = (
    CommitFailedError,
    IllegalGenerationError,
    UnknownMemberIdError,
    RebalanceInProgressError,
)
# Step-1 writes (bundles, dead letters, item versions) on the wire before processing waits for
# them: bounds memory in flight when publishing falls behind.
_MAX_IN_FLIGHT_SENDS = 20_000
# Loop turns from send() to aiokafka's produce request (counted once against the embedded broker): 3
# when the producer is idle; 7 when the answer to its previous request has arrived but is unread
# (aiokafka sends one request at a time per broker), as after a finalize. A bundle gets 7.
_SENDER_TURNS = 7
# Processing gives the loop a turn at least this often, so fetches, heartbeats and acks of what
# was sent progress while a large batch is processed.
_MAX_BUSY_S = 0.005
# Idle conversations are looked for this often: a scan of every held conversation.
_SWEEP_INTERVAL_S = 30.0
# Stopping a client sends a last request or two; with the broker gone they cannot be answered.
_CLOSE_TIMEOUT_S = 5.0
# Progress is judged this often: a stall is measured in minutes, the loop turns every 100 ms.
_WATCH_INTERVAL_S = 1.0


@dataclass(slots=True)
class RunnerStats:
    """Counters a run reports (and tests and metrics read)."""

    events: int = 0
    bundles: int = 0
    dead_letters: int = 0
    batches: int = 0
    restored_conversations: int = 0
    restored_records: int = 0
    restore_seconds: float = 0.0
    dead_letters_by_error: dict[str, int] = field(default_factory=dict)


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, runner: Runner) -> None:
        self._runner = runner

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        await self._runner.release(list(revoked))

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self._runner.claim(list(assigned))


@dataclass(frozen=True, slots=True)
class _Clients:
    consumer: AIOKafkaConsumer
    # Bundles and dead letters. aiokafka keeps one produce request in flight per broker and
    # producer, so changelog writes get their own: a bundle never waits behind them.
    producer: AIOKafkaProducer
    changelog: AIOKafkaProducer
    restorer: AIOKafkaConsumer


class Runner:
    """One processor instance; `run` until `stop` is set, then drain, commit and leave."""

    def __init__(
        self,
        settings: Settings,
        *,
        metrics: Metrics | None = None,
        health: Health | None = None,
        history: History | None = None,
        stall_after_s: float | None = None,
    ) -> None:
        self.settings = settings
        self.history = history  # fed only when an inspector reads it
        self.stats = RunnerStats()
        self.metrics = metrics if metrics is not None else Metrics()
        self.health = health if health is not None else Health()
        self.stop = anyio.Event()
        self.is_ready = False
        # A test seam, None in production: awaited inside the restore of newly assigned
        # partitions, to hold it in progress (recovery.read_changelogs says where).
        self.restore_hold: Callable[[], Awaitable[None]] | None = None
        self._kwargs = client_kwargs(settings.kafka)
        self._processors: dict[TopicPartition, ContextProcessor] = {}
        self.metrics.watch_memos(lambda: [p.memos for p in self._processors.values()])
        self._pending_restore: set[TopicPartition] = set()
        # Next input offset to process per partition: where a failed fetch rewinds to.
        self._next_offsets: dict[TopicPartition, int] = {}
        self._checkpoint = Checkpoint(
            send=self._write,
            commit=self._commit,
            interval_s=settings.state.commit_interval_ms / 1000,
        )
        self._orphans: dict[TopicPartition, list[Record]] = {}
        self._lock = anyio.Lock()
        self._clients: _Clients | None = None
        self._dlq_partitions = 1
        # Broker faults end a session and are retried only once one session has started: a
        # broker unreachable at startup is an error for whoever started us.
        self._has_started = False
        self._outage = Outage()
        if stall_after_s is None:
            stall_after_s = settings.metrics.stall_after_s
        self._progress = Progress(stall_after_s=stall_after_s)
        self.metrics.progress_clock(lambda: self._progress.seconds_since(time.monotonic()))

    @property
    def _kafka(self) -> _Clients:
        if self._clients is None:
            raise StreamCtxError("the runner's Kafka clients exist only inside run()")
        return self._clients

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> RunnerStats:
        """Create topics, join the group, process until stopped. A broker fault after the start
        (restore, produce, commit, a timeout) never parks a record: the session ends, and a new
        one resumes from the committed offsets and the changelog, after a backoff."""
        counts = await partition_counts(self._kwargs, self.settings.kafka.input_topics)
        self._dlq_partitions = max(counts.values())
        await ensure_topics(self._kwargs, topics_to_create(self.settings, counts))
        get_tokenizer(self.settings.bundle.tokenizer)  # loaded first, so its tables are frozen too
        with run_heap():
            await self._run_sessions(task_status)
        log.info(
            "stopped: %d events, %d bundles, %d dead letters",
            self.stats.events,
            self.stats.bundles,
            self.stats.dead_letters,
        )
        return self.stats

    async def _run_sessions(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Sessions until stopped: a transient broker fault starts a new one after a backoff."""
        while True:
            try:
                await self._session(task_status)
                break
            except Exception as exc:
                if not is_transient(exc) or not self._has_started:
                    raise
                self._mark_ready(is_rebalancing=True)  # not until a new session is restored
                if self.stop.is_set():
                    log.warning("could not drain (%s); unflushed events are re-read", exc)
                    break
                delay, is_new = self._outage.fail(now=time.monotonic())
                if is_new:
                    log.warning(
                        "Kafka unavailable (%s: %s); retrying with backoff from %.1f s, "
                        "then resuming from the last commit",
                        type(exc).__name__,
                        exc,
                        delay,
                    )
                else:
                    log.debug("Kafka still unavailable (%s); next try in %.1f s", exc, delay)
            task_status = anyio.TASK_STATUS_IGNORED
            with anyio.move_on_after(delay):
                await self.stop.wait()
            if self.stop.is_set():
                break

    async def _session(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        """One group membership: fresh clients and state, processing until stopped, then a
        drain; on a failure only the clients are closed (the next session re-reads)."""
        self._forget_session()
        kafka = self.settings.kafka
        consumer, restorer = clients.group_consumer(kafka), clients.reader(kafka)
        producer, changelog = clients.producer(kafka), clients.producer(kafka)
        self._clients = _Clients(consumer, producer, changelog, restorer)
        try:
            await producer.start()
            await changelog.start()
            await restorer.start()
            consumer.subscribe(kafka.input_topics, listener=_Rebalance(self))
            await consumer.start()
            self._has_started = True
            if self._outage.started_at is not None:
                log.warning(
                    "Kafka available again after %.1f s; rejoining the group",
                    time.monotonic() - self._outage.started_at,
                )
            task_status.started()
            await self._loop()
            async with self._lock:
                await self._checkpoint.flush()
        finally:
            with anyio.CancelScope(shield=True):
                await self._close_clients()

    def _forget_session(self) -> None:
        """Drop what a failed session held: a new one restores it from the changelog."""
        self._checkpoint.abandon()
        self._processors.clear()
        self._pending_restore.clear()
        self._next_offsets.clear()
        self._orphans.clear()
        self._mark_ready(is_rebalancing=True)  # ready again once assigned and restored

    def claim(self, assigned: list[TopicPartition]) -> None:
        """Newly assigned partitions wait, paused, until their state is restored."""
        fresh = [tp for tp in assigned if tp not in self._processors]
        self._pending_restore.update(fresh)
        self._kafka.consumer.pause(*fresh)
        self._mark_ready()
        log.info("assigned %s; restoring %d partition(s)", _names(assigned), len(fresh))

    async def release(self, revoked: list[TopicPartition]) -> None:
        """Finish and commit what is in flight for revoked partitions, then forget them."""
        self._mark_ready(is_rebalancing=True)
        self._pending_restore.difference_update(revoked)
        async with self._lock:
            try:
                await self._checkpoint.flush()
            finally:
                for tp in revoked:
                    self._processors.pop(tp, None)
                    self._next_offsets.pop(tp, None)
                    self._orphans.pop(tp, None)  # the new owner cleans them up itself
        self.metrics.forget_partitions(revoked)
        self._count_held()
        log.info("revoked %s", _names(revoked))

    async def _loop(self) -> None:
        kafka = self.settings.kafka
        next_sweep = time.monotonic() + _SWEEP_INTERVAL_S
        next_watch = time.monotonic()
        while not self.stop.is_set():
            self.health.beat()
            if time.monotonic() >= next_watch:
                self._watch()
                next_watch = time.monotonic() + _WATCH_INTERVAL_S
            if self._pending_restore:
                await self._restore(set(self._pending_restore))
                continue
            batch = await self._fetch()
            if not batch:
                if self._checkpoint.has_work:
                    # Idle: nothing else would flush it. In the background, so an event that
                    # arrives meanwhile is fetched and processed without waiting for the acks.
                    async with self._lock:
                        self._checkpoint.start_idle()
                continue
            async with self._lock:
                await self._process(batch, max_bytes=kafka.max_event_bytes)
                if time.monotonic() >= next_sweep:
                    self._release_idle()
                    next_sweep = time.monotonic() + _SWEEP_INTERVAL_S

    async def _fetch(self) -> Batch:
        consumer, limit = self._kafka.consumer, self.settings.kafka.max_poll_records
        try:
            batch: Batch = await consumer.getmany(timeout_ms=_POLL_MS, max_records=limit)
        except DECODE_ERRORS:
            paused = consumer.paused()
            positions = {
                tp: await self._next_offset(tp) for tp in self._processors if tp not in paused
            }
            batch, failed = await fetch_isolating(
                consumer, positions, max_records=limit, timeout_ms=_POLL_MS
            )
            for error in failed:
                log.error("%s", error)
                # Judged by the watchdog from here: records wait behind it until someone acts.
                self._next_offsets.setdefault(
                    TopicPartition(error.topic, error.partition), error.offset
                )
        return batch

    async def _next_offset(self, tp: TopicPartition) -> int:
        """The next input offset to process: one past the last processed, else the committed
        offset, else the start (Kafka resets an offset before the log start to the earliest)."""
        if tp in self._next_offsets:
            return self._next_offsets[tp]
        committed: int | None = await self._kafka.consumer.committed(tp)
        return committed if committed is not None else 0

    async def _process(self, batch: Batch, *, max_bytes: int) -> None:
        kafka = self.settings.kafka
        sends: list[asyncio.Future[object]] = []
        # Partitions revoked between the fetch and this batch are skipped.
        held = {tp: records for tp, records in batch.items() if tp in self._processors}
        yielded_at = time.monotonic()
        for tp, record in _in_arrival_order(held):
            processor = self._processors[tp]
            self.stats.events += 1
            try:
                event = read_event(record, max_bytes=max_bytes)
                bundle = await self._apply(tp, processor, event, record.offset)
            except Exception as exc:
                if is_transient(exc):
                    raise  # the broker's fault, not the record's: the session restarts
                sends.append(await self._dead_letter(record, exc))  # parked, never dropped
                continue
            if bundle is not None:
                self._inspect(tp, processor, bundle)
                self.stats.bundles += 1
                sent = await self._kafka.producer.send(
                    kafka.output_topic,
                    encode_bundle(bundle),
                    key=bundle.conversation_id.encode(),
                )
                sent.add_done_callback(
                    partial(self._observe_published, bundle.stats, record.timestamp)
                )
                sends.append(sent)
                for _ in range(_SENDER_TURNS):
                    await asyncio.sleep(0)  # on the wire now, not after the whole batch
                yielded_at = time.monotonic()
            elif time.monotonic() - yielded_at >= _MAX_BUSY_S:
                await asyncio.sleep(0)
                yielded_at = time.monotonic()
        changes = []
        for tp, records in held.items():
            processor = self._processors[tp]
            self.metrics.events_consumed(tp.topic, len(records))
            self._next_offsets[tp] = records[-1].offset + 1
            changes.append((tp, ChangelogWrites.of(processor.take_changes())))
            outcomes = processor.take_item_outcomes()
            self._inspect(tp, processor, None)
            self.metrics.items(
                accepted=outcomes.accepted, rejected=outcomes.rejected, evicted=outcomes.evicted
            )
            highwater = self._kafka.consumer.highwater(tp)
            if highwater is not None:
                self.metrics.lag(tp.topic, tp.partition, highwater - records[-1].offset - 1)
        checkpoint = self._checkpoint
        checkpoint.add_sent(sends)
        for tp, writes in changes:
            items = await self._write(tp, self._orphans.pop(tp, []))
            items += await self._write(tp, writes.items)
            checkpoint.add(
                tp,
                sent=items,
                states=writes.states,
                tombstones=writes.tombstones,
                next_offset=self._next_offsets[tp],
            )
        if checkpoint.in_flight > _MAX_IN_FLIGHT_SENDS:
            await checkpoint.flush()  # publishing fell behind: wait for it before fetching more
        elif checkpoint.is_due:
            checkpoint.start_background()
        self.stats.batches += 1
        self._count_held()

    async def _apply(
        self, tp: TopicPartition, processor: ContextProcessor, event: Event, offset: int
    ) -> Bundle | None:
        try:
            return processor.apply(event, position=offset)
        except ConversationReleasedError as released:
            await self._reload(tp, processor, released.conversation_id)
            return processor.apply(event, position=offset)

    def _observe_published(
        self, stats: BundleStats, finalized_ms: int, sent: asyncio.Future[object]
    ) -> None:
        """Latency runs from the finalize record's timestamp to the bundle's acknowledgement."""
        if sent.cancelled() or sent.exception() is not None:
            return  # the flush awaiting it raises
        self.metrics.bundle_published(
            tokens_naive=stats.tokens_naive,
            tokens_bundle=stats.tokens_bundle,
            tokens_prefix_reused=stats.tokens_prefix_reused,
            latency_s=(time.time() * 1000 - finalized_ms) / 1000,
        )

    def _watch(self) -> None:
        """Judge progress: one WARNING and a red /healthz when a stall begins, one INFO when a
        partition moves again."""
        consumer, now = self._kafka.consumer, time.monotonic()
        positions = {
            tp: self._next_offsets[tp] for tp in self._processors if tp in self._next_offsets
        }
        highwaters = {tp: consumer.highwater(tp) for tp in positions}
        was_stalled = self._progress.is_stalled
        lags, is_new = self._progress.observe(
            positions, {tp: mark for tp, mark in highwaters.items() if mark is not None}, now=now
        )
        if is_new:
            reason = self._progress.stall(lags, now=now, why=self._waiting_on).describe()
            log.warning("%s; /healthz reports stalled until one moves", reason)
            self.health.set_stalled(reason)
        elif was_stalled and not self._progress.is_stalled:
            log.info("progressing again")
            self.health.set_stalled(None)

    def _waiting_on(self, tp: TopicPartition) -> str:
        """What a partition with records waiting waits on, from what the member can see."""
        consumer = self._kafka.consumer
        if tp in consumer.paused():
            return "its undecodable batch, paused: see the error logged for it"
        answered_ms = consumer.last_poll_timestamp(tp)
        if not answered_ms:
            return "a first fetch response from the broker"
        answered_s = time.time() - answered_ms / 1000
        if answered_s >= _WATCH_INTERVAL_S + self.settings.kafka.fetch_max_wait_ms / 1000:
            return f"a fetch response from the broker (the last came {answered_s:.0f} s ago)"
        if self._checkpoint.in_flight:
            return f"acknowledgements of {self._checkpoint.in_flight} writes"
        return "records the broker's fetch responses do not hold"

    def window_of(self, conversation_id: str) -> tuple[list[RankedItem], int] | None:
        """A held conversation's window ranked at its partition's stream time, and that time."""
        for processor in self._processors.values():
            now_ms = processor.stream_time_ms
            ranked = processor.window_of(conversation_id, now_ms=now_ms)
            if ranked is not None:
                return ranked, now_ms
        return None

    def _inspect(
        self, tp: TopicPartition, processor: ContextProcessor, bundle: Bundle | None
    ) -> None:
        """Feed the inspector's history: item outcomes so far, then the bundle they led to."""
        if self.history is None:
            return
        source = f"{tp.topic}/{tp.partition}"
        self.history.record_items(source, processor.take_item_events())
        if bundle is not None:
            window = processor.window_of(bundle.conversation_id, now_ms=bundle.ts) or []
            self.history.record_bundle(source, bundle, [r.item.id for r in window])

    def _count_held(self) -> None:
        self.metrics.conversations_held(sum(p.held for p in self._processors.values()))

    def _mark_ready(self, *, is_rebalancing: bool = False) -> None:
        """Ready once every assigned partition is restored; never while a rebalance runs."""
        self.is_ready = not is_rebalancing and not self._pending_restore
        self.health.set_ready(self.is_ready)
        if self.is_ready:
            self._outage.recover()  # joined and restored: a later fault is a new outage

    async def _write(
        self, tp: TopicPartition, records: list[Record]
    ) -> list[asyncio.Future[object]]:
        topic = changelog_topic(tp.topic, self.settings)
        return [
            await self._kafka.changelog.send(topic, value, key=key, partition=tp.partition)
            for key, value in records
        ]

    async def _dead_letter(
        self, record: ConsumerRecord[bytes, bytes], error: Exception
    ) -> asyncio.Future[object]:
        self.stats.dead_letters += 1
        kind = type(error).__name__
        self.metrics.dead_lettered(kind)
        self.stats.dead_letters_by_error[kind] = self.stats.dead_letters_by_error.get(kind, 0) + 1
        level = logging.WARNING if isinstance(error, InvalidEventError) else logging.ERROR
        log.log(
            level,
            "dead letter #%d from %s/%d@%d: %s: %s",
            self.stats.dead_letters,
            record.topic,
            record.partition,
            record.offset,
            kind,
            error,
            exc_info=not isinstance(error, InvalidEventError),
        )
        return await send_dead_letter(
            self._kafka.producer,
            record,
            error,
            topic=self.settings.kafka.dlq_topic,
            partitions=self._dlq_partitions,
            head_bytes=max(1, self.settings.kafka.max_event_bytes - _RECORD_OVERHEAD_BYTES),
            on_truncated=self.metrics.dead_letter_truncated,
        )

    async def _commit(self, uncommitted: dict[TopicPartition, int]) -> None:
        if not uncommitted:
            return
        offsets = {tp: OffsetAndMetadata(offset, "") for tp, offset in uncommitted.items()}
        try:
            await self._kafka.consumer.commit(offsets)
        except _GROUP_MOVED_ON as exc:
            # The group rebalanced without us (a pause past the session timeout). Everything
            # these offsets cover is already published and in the changelog, so the new owner
            # re-reads from the last commit and skips what the changelog reflects; we rejoin.
            log.warning("commit refused, the group moved on without us: %s; rejoining", exc)

    async def _restore(self, partitions: set[TopicPartition]) -> None:
        """Rebuild the windows of newly assigned partitions from their changelogs."""
        started = time.perf_counter()
        restored = await self._read_changelogs(
            partitions, is_wanted=self._pending_restore.__contains__, hold=self.restore_hold
        )
        conversations = 0
        dropped = [tp for tp in restored if tp not in self._pending_restore]
        if dropped:
            log.info("revoked while restoring: %s", _names(dropped))
        for tp, state in restored.items():
            if tp not in self._pending_restore:
                continue
            processor = ContextProcessor(
                self.settings.bundle,
                is_tracking_changes=True,
                is_recording_items=self.history is not None,
            )
            for cid in state.conversation_ids():
                processor.restore_lazily(cid, partial(self._load, tp, state, cid))
                conversations += 1
            self._processors[tp] = processor
            self._pending_restore.discard(tp)
            self._kafka.consumer.resume(tp)
            self.stats.restored_conversations += processor.held
            self.stats.restored_records += state.records
        elapsed = time.perf_counter() - started
        self.stats.restore_seconds += elapsed
        self._mark_ready()
        self.metrics.restored(seconds=elapsed, conversations=conversations)
        self._count_held()
        log.info(
            "restored %d conversation(s) from %d changelog record(s) in %.3f s (%.0f/s)",
            conversations,
            sum(s.records for s in restored.values()),
            elapsed,
            conversations / elapsed if elapsed > 0 else 0.0,
        )

    def _load(self, tp: TopicPartition, restored: RestoredPartition, cid: str) -> Restored:
        """Decode a restored conversation on its first event. Tombstones for what a crash left
        behind go out first in this batch's step 1, ahead of the same keys written again by
        the events being re-applied."""
        self._orphans.setdefault(tp, []).extend(restored.orphans(cid))
        return restored.load(cid)

    async def _read_changelogs(
        self,
        partitions: set[TopicPartition],
        *,
        is_wanted: Callable[[TopicPartition], bool],
        only: str | None = None,
        hold: Callable[[], Awaitable[None]] | None = None,
    ) -> dict[TopicPartition, RestoredPartition]:
        sources = {
            TopicPartition(changelog_topic(tp.topic, self.settings), tp.partition): tp
            for tp in partitions
        }
        return await read_changelogs(
            self._kafka.restorer,
            sources,
            is_wanted=is_wanted,
            only=only,
            timeout_s=self.settings.state.restore_timeout_s,
            beat=self.health.beat,
            hold=hold,
        )

    async def _reload(self, tp: TopicPartition, processor: ContextProcessor, cid: str) -> None:
        """Bring back one released conversation for a late event (rare: a full partition read)."""
        started = time.perf_counter()
        restored = await self._read_changelogs({tp}, is_wanted=lambda _: True, only=cid)
        for found, state, items, previous_context in restored[tp].conversations():
            processor.restore(found, state, items, previous_context)
        log.info(
            "reloaded released conversation %r of %s/%d for a late event in %.3f s",
            cid,
            tp.topic,
            tp.partition,
            time.perf_counter() - started,
        )

    def _release_idle(self) -> None:
        """Free idle conversations' memory on each partition's stream time (state stays durable)."""
        released = sum(p.release_idle() for p in self._processors.values())
        if released:
            log.info("released %d idle conversation(s) from memory", released)
            self._count_held()

    async def _close_clients(self) -> None:
        """Stop the clients, each bounded: with the broker gone, leaving the group cannot finish."""
        if self._clients is None:
            return
        kafka = self._clients
        for client in (kafka.consumer, kafka.restorer, kafka.producer, kafka.changelog):
            with anyio.move_on_after(_CLOSE_TIMEOUT_S):
                try:
                    await client.stop()
                except asyncio.CancelledError:
                    # Shielded, so not ours: aiokafka's fetcher re-raises the cancellation of
                    # its own fetch task when stopped mid-retry, before closing the consumer's
                    # connections. Passing it on would cancel us; the sockets are closed here.
                    log.debug("aiokafka raised its own cancellation while stopping %r", client)
                    await client._client.close()
                except Exception as exc:  # a client of a failed session; the next one is new
                    log.debug("stopping %r failed: %s", client, exc)


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


def _names(partitions: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(partitions)) or "nothing"
