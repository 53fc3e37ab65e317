"""The input partitions a member owns: each with its processor, claimed paused until restored
from the changelog, released after a flush when revoked. The processors share the member's memo
tables and learning, so what they hold is bounded per member, not per partition."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from functools import partial

import anyio
from aiokafka import ConsumerRebalanceListener
from aiokafka.structs import TopicPartition

from stream_ctx.core.assembly.learning import Learning
from stream_ctx.core.conversation.changes import Restored
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.memo import Memos
from stream_ctx.core.window.accumulator import RankedItem
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.shell.http.metrics import Health, Metrics
from stream_ctx.shell.kafka.clients import SessionClients
from stream_ctx.shell.kafka.fetch import Batch
from stream_ctx.shell.kafka.topology import Topics
from stream_ctx.shell.processing.offsets import InputOffsets
from stream_ctx.shell.processing.stats import RunnerStats
from stream_ctx.shell.state.changelog import Record, RestoredPartition
from stream_ctx.shell.state.checkpoint import Checkpoint
from stream_ctx.shell.state.recovery import read_changelogs

__all__ = ("OwnedPartitions",)

log = logging.getLogger(__name__)


class OwnedPartitions(ConsumerRebalanceListener):  # type: ignore[misc]
    """Each owned partition's processor and input offsets. aiokafka calls it on every
    rebalance; the member is ready once every assigned partition is restored."""

    def __init__(
        self,
        config: BundleConfig,
        topics: Topics,
        clients: SessionClients,
        checkpoint: Checkpoint,
        *,
        restore_timeout_s: float,
        lock: anyio.Lock,
        stats: RunnerStats,
        metrics: Metrics,
        health: Health,
        is_recording_items: bool,
        on_ready: Callable[[], None],
    ) -> None:
        self._config, self._topics = config, topics
        self._clients, self._checkpoint = clients, checkpoint
        self._restore_timeout_s = restore_timeout_s
        # Held while processors change or process, so a revocation waits for the batch.
        self._lock = lock
        self._stats, self._metrics, self._health = stats, metrics, health
        self._is_recording_items, self._on_ready = is_recording_items, on_ready
        self.processors: dict[TopicPartition, ContextProcessor] = {}
        self.memos = Memos()
        self._learning = Learning()
        self.is_ready = False
        # A test seam, None in production: awaited inside the restore of newly assigned
        # partitions, to hold it in progress (recovery.read_changelogs says where).
        self.restore_hold: Callable[[], Awaitable[None]] | None = None
        self._pending: set[TopicPartition] = set()
        self.offsets = InputOffsets()
        self._orphans: dict[TopicPartition, list[Record]] = {}
        # Per restored partition, the input offset its state says the log reaches; checked
        # against the high watermark of its first fetch (`without_emptied`).
        self._restored_ends: dict[TopicPartition, int] = {}

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        await self.release(list(revoked))

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self.claim(list(assigned))

    @property
    def is_restoring(self) -> bool:
        """Whether claimed partitions wait for their restore."""
        return bool(self._pending)

    def forget(self) -> None:
        """Drop what a failed session held: a new one restores it from the changelog."""
        for processor in self.processors.values():
            processor.drop_learning()
        self.processors.clear()
        self._pending.clear()
        self.offsets.clear()
        self._orphans.clear()
        self._restored_ends.clear()
        self.mark_ready(is_rebalancing=True)  # ready again once assigned and restored

    def claim(self, assigned: list[TopicPartition]) -> None:
        """Newly assigned partitions wait, paused, until their state is restored."""
        fresh = [tp for tp in assigned if tp not in self.processors]
        self._pending.update(fresh)
        self._clients.consumer.pause(*fresh)
        self.mark_ready()
        log.info("assigned %s; restoring %d partition(s)", _names(assigned), len(fresh))

    async def release(self, revoked: list[TopicPartition]) -> None:
        """Finish and commit what is in flight for revoked partitions, then forget them."""
        self.mark_ready(is_rebalancing=True)
        self._pending.difference_update(revoked)
        async with self._lock:
            try:
                await self._checkpoint.flush()
            finally:
                self.offsets.forget(revoked)
                for tp in revoked:
                    processor = self.processors.pop(tp, None)
                    if processor is not None:
                        processor.drop_learning()
                    self._orphans.pop(tp, None)  # the new owner cleans them up itself
                    self._restored_ends.pop(tp, None)
        self._metrics.forget_partitions(revoked)
        self.count_held()
        log.info("revoked %s", _names(revoked))

    async def restore(self) -> None:
        """Rebuild the windows of the partitions waiting for it from their changelogs."""
        started = time.perf_counter()
        pending = self._pending
        restored = await self._read_changelogs(
            set(pending), is_wanted=pending.__contains__, hold=self.restore_hold
        )
        dropped = [tp for tp in restored if tp not in pending]
        if dropped:
            log.info("revoked while restoring: %s", _names(dropped))
        conversations = 0
        for tp, state in restored.items():
            if tp not in pending:
                continue
            processor = self._new_processor()
            for cid in state.conversation_ids():
                processor.restore_lazily(cid, partial(self._load, tp, state, cid))
                conversations += 1
            self.processors[tp] = processor
            if (end := state.end_offset()) is not None:
                self._restored_ends[tp] = end
            pending.discard(tp)
            self._clients.consumer.resume(tp)
            self._stats.restored_conversations += processor.held
            self._stats.restored_records += state.records
        elapsed = time.perf_counter() - started
        self._stats.restore_seconds += elapsed
        self.mark_ready()
        self._metrics.restored(seconds=elapsed, conversations=conversations)
        self.count_held()
        log.info(
            "restored %d conversation(s) from %d changelog record(s) in %.3f s (%.0f/s)",
            conversations,
            sum(s.records for s in restored.values()),
            elapsed,
            conversations / elapsed if elapsed > 0 else 0.0,
        )

    async def reload(self, tp: TopicPartition, processor: ContextProcessor, cid: str) -> None:
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

    def start_over(self, emptied: list[TopicPartition]) -> None:
        """Partitions whose input log was emptied (a topic recreated, the embedded broker
        restarted empty): their windows start over with the log, from offset 0, since the
        positions the old windows applied up to are gone."""
        for tp in emptied:
            old = self.processors[tp]
            log.warning(
                "input %s/%d was emptied: its %d held conversation(s) start over",
                tp.topic,
                tp.partition,
                old.held,
            )
            old.drop_learning()
            self.processors[tp] = self._new_processor()
            self.offsets.forget([tp])
            self._orphans.pop(tp, None)
            self._restored_ends.pop(tp, None)
        if emptied:
            self.count_held()

    def without_emptied(self, batch: Batch) -> Batch:
        """`batch` less the restored partitions whose state applied input past the end of the
        log their first fetch found: the log was emptied since (a member flushes its state into
        the changelog of a broker restarted empty), so they start over from offset 0."""
        consumer, emptied = self._clients.consumer, []
        for tp in batch:
            end = self._restored_ends.pop(tp, None)
            highwater = consumer.highwater(tp)
            if end is not None and highwater is not None and end > highwater:
                emptied.append(tp)
        if not emptied:
            return batch
        for tp in emptied:
            consumer.seek(tp, 0)
        self.start_over(emptied)
        return {tp: records for tp, records in batch.items() if tp not in emptied}

    def _new_processor(self) -> ContextProcessor:
        return ContextProcessor(
            self._config,
            is_tracking_changes=True,
            is_recording_items=self._is_recording_items,
            memos=self.memos,
            learning=self._learning,
        )

    def release_idle(self) -> None:
        """Free idle conversations' memory on each partition's stream time (state stays durable)."""
        released = sum(p.release_idle() for p in self.processors.values())
        if released:
            log.info("released %d idle conversation(s) from memory", released)
            self.count_held()

    def take_orphans(self, tp: TopicPartition) -> list[Record]:
        """Tombstones for records a crash left behind, found as restored conversations load."""
        return self._orphans.pop(tp, [])

    def window_of(self, conversation_id: str) -> tuple[list[RankedItem], int] | None:
        """A held conversation's window ranked at its partition's stream time, and that time."""
        for processor in self.processors.values():
            now_ms = processor.stream_time_ms
            ranked = processor.window_of(conversation_id, now_ms=now_ms)
            if ranked is not None:
                return ranked, now_ms
        return None

    def count_held(self) -> None:
        self._metrics.conversations_held(sum(p.held for p in self.processors.values()))

    def mark_ready(self, *, is_rebalancing: bool = False) -> None:
        """Ready once every assigned partition is restored; never while a rebalance runs."""
        self.is_ready = not is_rebalancing and not self._pending
        self._health.set_ready(self.is_ready)
        if self.is_ready:
            self._on_ready()

    def _load(self, tp: TopicPartition, restored: RestoredPartition, cid: str) -> Restored:
        """Decode a restored conversation on its first event; its orphans go out with the
        batch's first changelog writes, ahead of the same keys written again."""
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
            TopicPartition(self._topics.changelog(tp.topic), tp.partition): tp for tp in partitions
        }
        return await read_changelogs(
            self._clients.restorer,
            sources,
            is_wanted=is_wanted,
            only=only,
            timeout_s=self._restore_timeout_s,
            beat=self._health.beat,
            hold=hold,
        )


def _names(partitions: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(partitions)) or "nothing"
