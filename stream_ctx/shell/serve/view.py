"""The output topic as a view: every partition read from the start, outside any consumer group,
into a BundleStore; requests wait on it for their bundle (or, read from the dead-letter topic,
the processor's refusal), subscribers hear of each new one."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import anyio.abc
import msgspec
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord, TopicPartition
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from stream_ctx.client import rewind_emptied
from stream_ctx.core.wire.codec import decode_event
from stream_ctx.core.wire.events import Finalize
from stream_ctx.errors import (
    BrokerError,
    FinalizeRefusedError,
    InvalidEventError,
    MissingTopicError,
    StreamCtxError,
)
from stream_ctx.settings import KafkaSettings
from stream_ctx.shell.kafka import clients
from stream_ctx.shell.kafka.dead_letter import REFUSED_HEADER
from stream_ctx.shell.serve.store import BundleStore, Kept

__all__ = ("BundleView", "DuplicateRequestError", "Progress")

log = logging.getLogger(__name__)

# Connecting and reading every partition's end is a few round trips; longer means unreachable.
_START_TIMEOUT_S = 30.0
# Closing drops sockets; bounded so a broker that went away cannot hang shutdown.
_CLOSE_TIMEOUT_S = 5.0
# How long one read blocks before the reader loops (and reports progress while rebuilding).
_POLL_MS = 500
# Rebuild progress goes to the log at most this often.
_PROGRESS_EVERY_S = 1.0
# A subscriber this many bundles behind is dropped (its stream ends) rather than held in memory.
_SUBSCRIBER_BUFFER = 64


class DuplicateRequestError(StreamCtxError):
    """A finalize with this request id is already waiting for its bundle."""


class Progress(msgspec.Struct, frozen=True):
    """How far the rebuild from the topic has come: records read of those there at start."""

    records_read: int
    records_total: int
    is_done: bool


class _Waiter:
    __slots__ = ("done", "kept")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.kept: Kept | FinalizeRefusedError | None = None


class BundleView:
    """Reads `kafka.output_topic` into `store` with `run`; ready once rebuilt to the end it saw
    at start."""

    def __init__(self, kafka: KafkaSettings, store: BundleStore) -> None:
        self.kafka = kafka
        self.store = store
        self.progress = Progress(0, 0, is_done=False)
        self.rebuilt = anyio.Event()
        self.records_read = 0
        self._waiters: dict[tuple[str, str], _Waiter] = {}
        # conversation (None: all) -> each subscriber's stream and whether it is lossy
        self._subscribers: dict[str | None, dict[MemoryObjectSendStream[Kept], bool]] = {}

    @property
    def is_ready(self) -> bool:
        """Rebuilt: every bundle on the topic when serve started is in the view."""
        return self.progress.is_done

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Read the topic until cancelled; started once every partition is assigned and rewound."""
        # `kafka.fetch_max_wait_ms` as the processor's: some brokers hold every fetch that long,
        # which a finalize's answer waits out.
        consumer = clients.reader(self.kafka)
        topic, servers = self.kafka.output_topic, self.kafka.servers
        try:
            with anyio.fail_after(_START_TIMEOUT_S):
                await consumer.start()
                partitions = await self._assign(consumer)
            task_status.started()
            await self._read(consumer, partitions)
        except TimeoutError as exc:
            raise BrokerError(
                f"Kafka at {servers!r} did not let serve read {topic!r} within {_START_TIMEOUT_S} s"
            ) from exc
        except KafkaError as exc:
            raise BrokerError(f"reading {topic!r} from {servers!r} failed: {exc!r}") from exc
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT_S):
                await consumer.stop()
            for streams in self._subscribers.values():
                for stream in streams:
                    stream.close()

    @contextmanager
    def expect(self, conversation_id: str, request_id: str) -> Iterator[anyio.Event]:
        """Register for the bundle answering `request_id`; the event is set when it is kept."""
        key = (conversation_id, request_id)
        if key in self._waiters:
            raise DuplicateRequestError(
                f"`request_id` {request_id!r} of conversation {conversation_id!r} is already"
                " waiting for its bundle; use a fresh one"
            )
        waiter = self._waiters[key] = _Waiter()
        try:
            yield waiter.done
        finally:
            if self._waiters.get(key) is waiter:
                del self._waiters[key]

    def answer(self, conversation_id: str, request_id: str) -> Kept | FinalizeRefusedError | None:
        """The bundle answering a request registered with `expect`, or the processor's refusal,
        once it arrived."""
        waiter = self._waiters.get((conversation_id, request_id))
        return waiter.kept if waiter else None

    @contextmanager
    def subscribe(
        self, conversation_id: str | None, *, is_lossy: bool = False
    ) -> Iterator[MemoryObjectReceiveStream[Kept]]:
        """New bundles of one conversation (or of all, for None) as they are kept, until serve
        stops. A subscriber too far behind has its stream ended, or if lossy misses bundles."""
        send, receive = anyio.create_memory_object_stream[Kept](_SUBSCRIBER_BUFFER)
        streams = self._subscribers.setdefault(conversation_id, {})
        streams[send] = is_lossy
        try:
            with receive:
                yield receive
        finally:
            streams.pop(send, None)
            if not streams:
                self._subscribers.pop(conversation_id, None)
            send.close()

    async def _assign(self, consumer: AIOKafkaConsumer) -> list[TopicPartition]:
        """The output topic's partitions (returned: the rebuild waits for them) and the
        dead-letter topic's, where refused finalizes land, both from the start."""
        # A listing of all topics: naming one in a metadata request would auto-create it.
        topic, dlq = self.kafka.output_topic, self.kafka.dlq_topic
        existing = await consumer.topics()
        if topic not in existing:
            raise MissingTopicError(
                f"output topic {topic!r} does not exist on {self.kafka.servers!r} yet;"
                " `stream-ctx run` creates it: start the processor first"
            )
        partitions = _partitions(consumer, topic)
        refusals = _partitions(consumer, dlq) if dlq in existing else []
        consumer.assign(partitions + refusals)
        await consumer.seek_to_beginning(*partitions, *refusals)
        return partitions

    async def _read(self, consumer: AIOKafkaConsumer, partitions: list[TopicPartition]) -> None:
        """Fold records into the store forever; rebuilt once each partition reached the high
        watermark its first fetch reported (ListOffsets is not exact on every broker)."""
        starts = {tp: await consumer.position(tp) for tp in partitions}
        ends: dict[TopicPartition, int] = {}
        reported = time.monotonic()
        while True:
            batch = await consumer.getmany(timeout_ms=_POLL_MS)
            for tp, records in batch.items():
                fold = self._fold if tp.topic == self.kafka.output_topic else self._refusal
                for record in records:
                    fold(record)
            if not batch:
                await rewind_emptied(consumer)
            if self.progress.is_done:
                continue
            for tp in partitions:
                mark = consumer.highwater(tp)
                if mark is not None:
                    ends.setdefault(tp, mark)
            behind = 0
            for tp in partitions:  # a known position is answered without a round trip
                if tp not in ends or await consumer.position(tp) < ends[tp]:
                    behind += 1
            total = sum(ends.get(tp, 0) - starts[tp] for tp in partitions)
            self.progress = Progress(self.records_read, total, is_done=not behind)
            now = time.monotonic()
            if self.progress.is_done or now - reported >= _PROGRESS_EVERY_S:
                reported = now
                self._report()
            if self.progress.is_done:
                self.rebuilt.set()

    def _report(self) -> None:
        p = self.progress
        share = p.records_read / p.records_total if p.records_total else 1.0
        log.info(
            "rebuilding the view of %r: %d/%d records (%.0f%%), %d conversations%s",
            self.kafka.output_topic,
            p.records_read,
            p.records_total,
            100 * min(share, 1.0),
            len(self.store),
            "; done" if p.is_done else "",
        )

    def _refusal(self, record: ConsumerRecord[bytes, bytes]) -> None:
        """A dead letter that is a refused finalize answers its waiter, if one is here."""
        reason = dict(record.headers or ()).get(REFUSED_HEADER)
        if reason is None or record.value is None:
            return
        try:
            event = decode_event(record.value)
        except InvalidEventError:
            return
        if not isinstance(event, Finalize) or event.request_id is None:
            return
        waiter = self._waiters.get((event.conversation_id, event.request_id))
        if waiter is not None and waiter.kept is None:
            waiter.kept = FinalizeRefusedError(event.conversation_id, reason.decode())
            waiter.done.set()

    def _fold(self, record: ConsumerRecord[bytes, bytes]) -> None:
        self.records_read += 1
        if record.value is None:
            return
        try:
            kept = Kept.from_record(record.value)
        except msgspec.DecodeError as exc:
            where = f"{record.topic}/{record.partition}@{record.offset}"
            log.warning("skipped a record that is not a bundle (%s): %s", where, exc)
            return
        head = kept.head
        if head.request_id is not None:  # a repeat of an answer still answers
            waiter = self._waiters.get((head.conversation_id, head.request_id))
            if waiter is not None and waiter.kept is None:
                waiter.kept = kept
                waiter.done.set()
        if not self.store.add(kept):
            return
        for key in (head.conversation_id, None):
            for stream, is_lossy in list(self._subscribers.get(key, {}).items()):
                try:
                    stream.send_nowait(kept)
                except anyio.WouldBlock:
                    if is_lossy:
                        continue
                    stream.close()  # the subscriber's stream ends; it reconnects and refetches
                    self._subscribers[key].pop(stream, None)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    self._subscribers[key].pop(stream, None)


def _partitions(consumer: AIOKafkaConsumer, topic: str) -> list[TopicPartition]:
    return [TopicPartition(topic, n) for n in sorted(consumer.partitions_for_topic(topic) or ())]
