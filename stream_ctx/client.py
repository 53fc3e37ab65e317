"""An async client for agent platforms: publish retrievals, request a bundle, await it.

One `ContextClient` holds one producer and one consumer, shared by any number of concurrent
requests. `request_bundle` sends a finalize carrying a fresh `request_id` and waits for the bundle
whose `(conversation_id, request_id)` matches; a single background task reads the output topic
(every partition, no consumer group) and hands each bundle to the request waiting for it. Bundles
nobody waits for, and repeated copies of one already delivered (publishing is at-least-once), are
skipped, so memory holds only the requests in flight.

Event times (`ts`, epoch milliseconds) default to this machine's wall clock; pass them explicitly
when the platform has its own notion of when a turn happened.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc
import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord, TopicPartition

from stream_ctx.core.assembly.rebuild import rebuild_full
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.codec import decode_event
from stream_ctx.core.wire.events import (
    BundleMode,
    End,
    Event,
    Finalize,
    History,
    RenderOrder,
    Retrieval,
    RetrievedItem,
)
from stream_ctx.errors import BrokerError, MissingTopicError, StreamCtxError
from stream_ctx.settings import KafkaSettings, client_kwargs

__all__ = (
    "DEFAULT_TIMEOUT_S",
    "BundleTimeoutError",
    "ClientError",
    "ClientStats",
    "ContextClient",
    "rewind_emptied",
)

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0
"""A finalize is answered in milliseconds; 30 s covers a processor rebalancing or restoring."""
# Connecting and locating the output topic's end is a few round trips; longer means unreachable.
_START_TIMEOUT_S = 30.0
# Closing flushes the producer and drops sockets; bounded so a dead broker cannot hang exit.
_CLOSE_TIMEOUT_S = 10.0
# Kafka answers a fetch as soon as a bundle arrives; brokers that hold every fetch to its
# deadline (the embedded Tansu holds half of it) add up to this much latency, so keep it short.
_FETCH_MAX_WAIT_MS = 100
# How long one read of the output topic blocks before the reader loops.
_POLL_MS = 1_000


class ClientError(StreamCtxError):
    """The client was used outside `async with`, was closed, or its bundle reader failed."""


class BundleTimeoutError(ClientError):
    """No bundle answered a request in time; retriable (a processor may be rebalancing)."""

    retriable = True

    def __init__(
        self, message: str, *, conversation_id: str, request_id: str, timeout_s: float
    ) -> None:
        super().__init__(message)
        self.conversation_id = conversation_id
        self.request_id = request_id
        self.timeout_s = timeout_s


@dataclass(slots=True)
class ClientStats:
    """Counters of one client's life, for logs and metrics."""

    published: int = 0
    requested: int = 0
    timeouts: int = 0
    records_read: int = 0
    bundles_matched: int = 0


class _BundleHead(msgspec.Struct):
    """The two fields a bundle is matched on; the rest is decoded only for a match."""

    conversation_id: str
    request_id: str | None = None


_head_decoder = msgspec.json.Decoder(_BundleHead)
_bundle_decoder = msgspec.json.Decoder(Bundle)
_encoder = msgspec.json.Encoder()


class _Waiter:
    __slots__ = ("bundle", "done", "error")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.bundle: Bundle | None = None
        self.error: ClientError | None = None


class ContextClient:
    """Publishes events to `input_topic` and awaits bundles from `output_topic`; use `async with`.

    `connection` is passed to aiokafka (`security_protocol`, `sasl_*`, `ssl_context`, ...).
    Producing uses acks=all. Idempotence is off by default because the embedded broker lacks it;
    on Apache Kafka pass `enable_idempotence=True` so producer retries cannot duplicate events.
    """

    def __init__(
        self,
        *,
        bootstrap_servers: str | list[str],
        input_topic: str = "ctx.retrievals",
        output_topic: str = "ctx.bundles",
        enable_idempotence: bool = False,
        linger_ms: int = 5,
        **connection: Any,
    ) -> None:
        self.input_topic = input_topic
        self.output_topic = output_topic
        self.stats = ClientStats()
        self._connection: dict[str, Any] = {"bootstrap_servers": bootstrap_servers, **connection}
        self._enable_idempotence = enable_idempotence
        self._linger_ms = linger_ms
        self._producer: AIOKafkaProducer | None = None
        self._reader: _BundleReader | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        self._failure: ClientError | None = None

    @classmethod
    def from_settings(cls, kafka: KafkaSettings, **options: Any) -> ContextClient:
        """A client for the processor configured by `kafka` (its first input topic, TLS, SASL)."""
        kwargs = client_kwargs(kafka)
        return cls(
            input_topic=kafka.input_topics[0],
            output_topic=kafka.output_topic,
            **kwargs,
            **options,
        )

    @property
    def pending(self) -> int:
        """Requests waiting for their bundle."""
        return 0 if self._reader is None else len(self._reader.waiting)

    async def __aenter__(self) -> Self:
        if self._producer is not None:
            raise ClientError("the ContextClient is already started; enter it once at a time")
        self._failure = None
        producer = AIOKafkaProducer(
            **self._connection,
            acks="all",
            enable_idempotence=self._enable_idempotence,
            linger_ms=self._linger_ms,
        )
        # Without a group nothing is committed; "earliest" only applies if a position falls
        # out of range (retention), where re-reading beats skipping someone's bundle.
        consumer = AIOKafkaConsumer(
            **self._connection,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=_FETCH_MAX_WAIT_MS,
        )
        servers = self._connection["bootstrap_servers"]
        reader = _BundleReader(consumer, output_topic=self.output_topic, stats=self.stats)
        try:
            with anyio.fail_after(_START_TIMEOUT_S):
                await producer.start()
                await consumer.start()
                await reader.start_at_end(input_topic=self.input_topic, servers=servers)
        except BaseException as exc:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT_S):
                await consumer.stop()
                await producer.stop()
            if isinstance(exc, TimeoutError):
                raise BrokerError(
                    f"Kafka at {servers!r} did not let the client start within {_START_TIMEOUT_S} s"
                ) from exc
            if isinstance(exc, KafkaError):
                raise BrokerError(f"Kafka at {servers!r} refused the client: {exc}") from exc
            raise
        self._producer, self._reader = producer, reader
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._tasks.start_soon(reader.run, self._fail)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._fail(ClientError("the ContextClient is closed"))
        try:
            if self._tasks is not None:
                self._tasks.cancel_scope.cancel()
                await self._tasks.__aexit__(None, None, None)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT_S):
                if self._reader is not None:
                    await self._reader.consumer.stop()
                if self._producer is not None:
                    await self._producer.stop()
            self._tasks, self._reader, self._producer = None, None, None

    async def publish(self, event: Event) -> None:
        """Send one event keyed by its conversation id and wait for the broker's acknowledgement.

        The event is checked against the schema first (structs skip their constraints when
        built in code), so a bad value raises InvalidEventError here instead of being
        dead-lettered by the processor.
        """
        producer, _ = self._started()
        value = _encoder.encode(event)
        decode_event(value)
        try:
            delivery = await producer.send(
                self.input_topic, value, key=event.conversation_id.encode()
            )
            await delivery
        except KafkaError as exc:
            raise BrokerError(
                f"cannot publish a {type(event).__name__.lower()} event of conversation"
                f" {event.conversation_id!r} to {self.input_topic!r}: {exc}"
            ) from exc
        self.stats.published += 1

    async def publish_items(
        self,
        conversation_id: str,
        items: Sequence[RetrievedItem],
        *,
        ts: int | None = None,
        query: str | None = None,
        event_id: str | None = None,
    ) -> Retrieval:
        """Publish a retrieval of `items`; returns the event sent."""
        event = Retrieval(
            conversation_id=conversation_id,
            event_id=event_id or _fresh_id(),
            ts=_now_ms() if ts is None else ts,
            items=list(items),
            query=query,
        )
        await self.publish(event)
        return event

    async def end(
        self, conversation_id: str, *, ts: int | None = None, event_id: str | None = None
    ) -> End:
        """Publish the end of a conversation (its window and state are dropped)."""
        event = End(
            conversation_id=conversation_id,
            event_id=event_id or _fresh_id(),
            ts=_now_ms() if ts is None else ts,
        )
        await self.publish(event)
        return event

    async def request_bundle(
        self,
        conversation_id: str,
        *,
        ts: int | None = None,
        max_tokens: int | None = None,
        order: RenderOrder | None = None,
        mode: BundleMode | None = None,
        history: History | None = None,
        request_id: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> Bundle:
        """Send a finalize and return the bundle answering it, or raise BundleTimeoutError.

        `mode` overrides `[bundle] mode` for this bundle; `history="reset"` says the platform no
        longer holds the earlier bundles, so this one is full. A delta's full form is
        `ContextClient.rebuild_full(delta, previous_full)`.

        `request_id` (a fresh uuid4 unless given) must be unique per conversation: a bundle
        already on the output topic when the client started is never delivered, but one
        published later for a reused id would be.
        """
        _, reader = self._started()
        request_id = request_id or str(uuid.uuid4())
        key = (conversation_id, request_id)
        if key in reader.waiting:
            raise ClientError(
                f"request {request_id!r} of conversation {conversation_id!r} is already waiting"
                " for its bundle; use a fresh request_id"
            )
        waiter = reader.waiting[key] = _Waiter()
        self.stats.requested += 1
        finalize = Finalize(
            conversation_id=conversation_id,
            event_id=_fresh_id(),
            ts=_now_ms() if ts is None else ts,
            request_id=request_id,
            max_tokens=max_tokens,
            order=order,
            mode=mode,
            history=history,
        )
        try:
            with anyio.move_on_after(timeout_s):
                # Registered before sending: the bundle may arrive before the ack does.
                await self.publish(finalize)
                await waiter.done.wait()
        finally:
            if reader.waiting.get(key) is waiter:
                del reader.waiting[key]
        if waiter.error is not None:
            raise waiter.error
        if waiter.bundle is None:
            self.stats.timeouts += 1
            raise BundleTimeoutError(
                f"no bundle for request {request_id!r} of conversation {conversation_id!r}"
                f" arrived on {self.output_topic!r} within {timeout_s} s; is a stream-ctx"
                f" processor consuming {self.input_topic!r}?",
                conversation_id=conversation_id,
                request_id=request_id,
                timeout_s=timeout_s,
            )
        return waiter.bundle

    rebuild_full = staticmethod(rebuild_full)

    def _started(self) -> tuple[AIOKafkaProducer, _BundleReader]:
        if self._failure is not None:
            # A fresh exception per call: one instance raised in many tasks piles up tracebacks.
            raise ClientError(str(self._failure)) from self._failure.__cause__
        if self._producer is None or self._reader is None:
            raise ClientError(
                "the ContextClient is not started; use `async with ContextClient(...)`"
            )
        return self._producer, self._reader

    def _fail(self, error: ClientError) -> None:
        """Fail every waiting request and every later call with `error`."""
        self._failure = self._failure or error
        if self._reader is not None:
            self._reader.fail(error)


class _BundleReader:
    """Reads every partition of the output topic from where it ended at start, and hands each
    bundle to the request waiting for it (requests register in `waiting` before they send)."""

    def __init__(
        self, consumer: AIOKafkaConsumer, *, output_topic: str, stats: ClientStats
    ) -> None:
        self.consumer = consumer
        self.waiting: dict[tuple[str, str], _Waiter] = {}
        self._output_topic, self._stats = output_topic, stats

    async def start_at_end(self, *, input_topic: str, servers: object) -> None:
        """Assign every output partition and position it at the end, exactly, before any request.

        ListOffsets gives a position at or before the end (exact on Kafka; the embedded broker
        answers the start of the last batch plus one). A fetch from there reports each
        partition's high watermark, the true end, which becomes the start.
        """
        # A listing of all topics: naming one in a metadata request would auto-create it.
        consumer = self.consumer
        topics = await consumer.topics()
        missing = [t for t in (input_topic, self._output_topic) if t not in topics]
        if missing:
            names = ", ".join(repr(t) for t in missing)
            subject = f"topic {names} does" if len(missing) == 1 else f"topics {names} do"
            raise MissingTopicError(
                f"{subject} not exist on {servers!r}; the"
                " stream-ctx processor creates its output topic when it starts, the input topic"
                " must be created beforehand"
            )
        numbers = consumer.partitions_for_topic(self._output_topic) or set()
        partitions = [TopicPartition(self._output_topic, n) for n in sorted(numbers)]
        consumer.assign(partitions)
        await consumer.seek_to_end(*partitions)
        for tp in partitions:
            await consumer.position(tp)
        ends: dict[TopicPartition, int] = {}
        for _ in range(int(_START_TIMEOUT_S * 1000 / _FETCH_MAX_WAIT_MS) + 1):
            await consumer.getmany(*partitions, timeout_ms=_FETCH_MAX_WAIT_MS)
            for tp in partitions:
                mark = consumer.highwater(tp)
                if mark is not None:
                    ends.setdefault(tp, mark)
            if len(ends) == len(partitions):
                break
        else:
            raise TimeoutError  # the caller turns it into a BrokerError naming the servers
        for tp, end in ends.items():
            consumer.seek(tp, end)
        log.debug(
            "reading %r from %s", self._output_topic, {tp.partition: e for tp, e in ends.items()}
        )

    async def run(self, on_failure: Callable[[ClientError], None]) -> None:
        """Hand each bundle to the request waiting for it, until cancelled; if reading breaks,
        `on_failure` hears of it at once (every waiter too, rather than timing out one by one)."""
        try:
            while True:
                batch = await self.consumer.getmany(timeout_ms=_POLL_MS)
                for records in batch.values():
                    for record in records:
                        self._deliver(record)
                if not batch:
                    await rewind_emptied(self.consumer)
        except Exception as exc:
            log.exception("the bundle reader of %r stopped", self._output_topic)
            failure = ClientError(f"the bundle reader of {self._output_topic!r} stopped: {exc!r}")
            failure.__cause__ = exc
            on_failure(failure)

    def _deliver(self, record: ConsumerRecord[bytes, bytes]) -> None:
        self._stats.records_read += 1
        where = f"{record.topic}/{record.partition}@{record.offset}"
        if record.value is None:
            return
        try:
            head = _head_decoder.decode(record.value)
        except msgspec.DecodeError as exc:
            log.warning("skipped a record that is not a bundle (%s): %s", where, exc)
            return
        if head.request_id is None:
            return
        # Popped on the first copy, so a repeated bundle finds no one waiting.
        waiter = self.waiting.pop((head.conversation_id, head.request_id), None)
        if waiter is None:
            return
        try:
            waiter.bundle = _bundle_decoder.decode(record.value)
        except msgspec.DecodeError as exc:
            waiter.error = ClientError(
                f"the bundle for request {head.request_id!r} of conversation"
                f" {head.conversation_id!r} cannot be decoded: {exc} ({where})"
            )
        else:
            self._stats.bundles_matched += 1
        waiter.done.set()

    def fail(self, error: ClientError) -> None:
        """Fail every waiting request with `error`."""
        for waiter in self.waiting.values():
            # One instance per waiter: an exception raised in many tasks piles up tracebacks.
            waiter.error = ClientError(str(error))
            waiter.error.__cause__ = error.__cause__
            waiter.done.set()
        self.waiting.clear()


async def rewind_emptied(
    consumer: AIOKafkaConsumer, partitions: Iterable[TopicPartition] | None = None
) -> list[TopicPartition]:
    """Read again from offset 0 each of `partitions` (default: the assigned ones) whose
    position is past its high watermark: its log was emptied (a topic recreated, the embedded
    broker restarted empty).

    Kafka answers such a fetch with OffsetOutOfRange and the consumer resets to the earliest
    offset; a broker that answers it with nothing would leave the reader waiting for offsets
    the log will take long to reach. Call it after an empty fetch."""
    emptied = []
    for tp in consumer.assignment() if partitions is None else partitions:
        mark = consumer.highwater(tp)
        if mark is not None and await consumer.position(tp) > mark:
            consumer.seek(tp, 0)
            emptied.append(tp)
    if emptied:
        log.warning(
            "%s: the position was past the end, the log was emptied; reading from offset 0",
            ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(emptied)),
        )
    return emptied


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _fresh_id() -> str:
    return uuid.uuid4().hex
