"""Workloads and Kafka traffic for benchmarks/suite.py: producing, paced load, bare consumption.

Measures nothing itself; the suite times what these helpers drive."""

from __future__ import annotations

import asyncio
import math
import random
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from stream_ctx.core.wire.events import Event, Finalize, Retrieval, RetrievedItem
from stream_ctx.corpora.realtext import documents
from stream_ctx.corpora.workload import WorkloadShape, generate, passage
from stream_ctx.settings import KafkaSettings
from stream_ctx.shell.kafka.admin import ClientKwargs

Record = tuple[bytes, bytes]
_KAFKA = KafkaSettings()
# The collector asks the broker to answer within 5 ms: Tansu holds a fetch for the whole
# fetch_max_wait_ms when no data is there yet (500 ms by default), which would swamp the latency.
COLLECT_WAIT_MS = 5
# How often a wait for bundles looks again: short next to the latencies being measured, which are
# taken at arrival, not at this check.
_CHECK_INTERVAL_S = 0.02
# The text of the suite's workloads: real documentation (stream_ctx.corpora.realtext's numpy
# corpus), on which the targets are judged; the side-by-side phase also runs the synthetic text.
REAL_TEXT = "numpy"
_WORD = re.compile(r"[^\W\d_]+")
# The fields of the workload's shape the report describes it by.
_SHAPE_FIGURES = (
    "items_per_retrieval",
    "chunk_chars",
    "finalize_every",
    "overlap",
    "re_retrieve",
    "tool_rerun",
)
_DAY_MS = 86_400_000


class _BundleId(msgspec.Struct):
    bundle_id: str


_bundle_id = msgspec.json.Decoder(_BundleId)


def encode(events: Sequence[Event]) -> list[Record]:
    """Kafka records keyed by conversation id, as retrievers would publish them."""
    return [(e.conversation_id.encode(), msgspec.json.encode(e)) for e in events]


def standard(
    conversations: int, seed: int, *, is_ending: bool = True, text: str = REAL_TEXT
) -> list[Event]:
    """The original workload shape (3-8 items of 200-1,500 chars, a finalize per 4 retrievals),
    on real text unless `text` says otherwise."""
    shape = WorkloadShape(conversations=conversations, is_ending=is_ending, text=text)
    return generate(seed, shape)


def describe(events: Sequence[Event], records: Sequence[Record], text: str) -> dict[str, Any]:
    """Sizes of a workload and how varied its text is (distinct contents, distinct words: runs of
    letters), with the real corpus's size when the text is real."""
    contents = {item.content for e in events if isinstance(e, Retrieval) for item in e.items}
    found: dict[str, Any] = {
        "text": text,
        "conversations": len({e.conversation_id for e in events}),
        "events": len(events),
        "finalizes": sum(isinstance(e, Finalize) for e in events),
        "mean_event_bytes": round(sum(len(v) for _, v in records) / len(records)),
        # `standard` sets only the count, the ending and the text; the rest is the default shape.
        "shape": {name: getattr(WorkloadShape(), name) for name in _SHAPE_FIGURES},
        "distinct_contents": len(contents),
        "distinct_words": len({word for text in contents for word in _WORD.findall(text)}),
    }
    if text != "synthetic":
        docs = documents(text)
        found.update(corpus_documents=len(docs), corpus_chars=sum(len(d.text) for d in docs))
    return found


def renamed(events: Sequence[Event], prefix: str) -> list[Event]:
    """The same events under other conversation ids (a stream that cannot collide with others)."""
    return [
        msgspec.structs.replace(e, conversation_id=f"{prefix}{e.conversation_id}") for e in events
    ]


def interleaved(events: Sequence[Event], seed: int) -> list[Event]:
    """A uniformly random interleaving that keeps each conversation's own order.

    `generate` interleaves round-robin, so every conversation's n-th event arrives in the same
    round: a round of nothing but finalizes. With conversations starting at different times, as
    in production, event kinds arrive mixed; this is that order.
    """
    streams: dict[str, list[Event]] = {}
    for event in events:
        streams.setdefault(event.conversation_id, []).append(event)
    turns = [cid for cid, stream in streams.items() for _ in stream]
    random.Random(seed).shuffle(turns)
    position = dict.fromkeys(streams, 0)
    mixed = []
    for cid in turns:
        mixed.append(streams[cid][position[cid]])
        position[cid] += 1
    return mixed


def merged(
    conversations: int, per_conversation: int, seed: int, *, text: str = REAL_TEXT
) -> list[Event]:
    """Long conversations: `per_conversation` generated ones merged under one id, so windows
    fill to ~24 distinct items per merged stream (the generator's documents cap a conversation
    at about that many)."""
    events = standard(conversations * per_conversation, seed, is_ending=False, text=text)
    return [
        msgspec.structs.replace(
            e, conversation_id=f"m-{int(e.conversation_id[2:]) // per_conversation:05d}"
        )
        for e in events
    ]


def held_warmup(
    conversations: int, seed: int, *, text: str = REAL_TEXT
) -> tuple[list[Record], int]:
    """One small retrieval per conversation (1-2 items of 80-240 chars of `text`), ids as
    `generate`'s.

    Returns the records and the content bytes they leave held.
    """
    rng = random.Random(seed)
    start_ms = WorkloadShape().start_ms
    records: list[Record] = []
    content_bytes = 0
    for n in range(conversations):
        cid = f"c-{n:05d}"
        items = []
        for k in range(rng.randint(1, 2)):
            content = passage(rng, rng.randint(80, 240), text=text)
            content_bytes += len(content.encode())
            items.append(
                RetrievedItem(
                    id=f"{cid}/warm{k}",
                    kind="chunk",
                    salience=round(rng.uniform(0.3, 1.0), 2),
                    content=content,
                    created_at=start_ms - rng.randint(0, 30 * _DAY_MS),
                    attributes={"language": rng.choice(("rust", "go"))},
                    tags=["warm"],
                )
            )
        event = Retrieval(conversation_id=cid, event_id=f"{cid}/w", ts=start_ms, items=items)
        records.append((cid.encode(), msgspec.json.encode(event)))
    return records, content_bytes


def bundle_ids(events: Sequence[Event]) -> list[str | None]:
    """The bundle_id each event's bundle will carry (None for events that give no bundle)."""
    seq: dict[str, int] = {}
    found: list[str | None] = []
    for event in events:
        if isinstance(event, Finalize):
            n = seq[event.conversation_id] = seq.get(event.conversation_id, 0) + 1
            found.append(f"{event.conversation_id}:{n}")
        else:
            found.append(None)
    return found


def producer_for(client_kwargs: ClientKwargs) -> AIOKafkaProducer:
    """A producer with the Runner's batch settings (acks=all, 1 MiB batches, its linger)."""
    return AIOKafkaProducer(
        **client_kwargs,
        acks="all",
        enable_idempotence=False,
        max_batch_size=_KAFKA.max_batch_size,
        linger_ms=_KAFKA.linger_ms,
        max_request_size=max(_KAFKA.max_batch_size, 2 * _KAFKA.max_event_bytes),
    )


async def produce(client_kwargs: ClientKwargs, topic: str, records: Sequence[Record]) -> float:
    """Send every record in order and await every acknowledgement; returns seconds taken."""
    producer = producer_for(client_kwargs)
    await producer.start()
    started = time.perf_counter()
    try:
        futures = [await producer.send(topic, value, key=key) for key, value in records]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return time.perf_counter() - started


async def bare_consume(
    client_kwargs: ClientKwargs, topic: str, partitions: int
) -> dict[str, float]:
    """Read `topic` from offset 0 to its high watermark as the runner's restorer does, no work."""
    consumer = AIOKafkaConsumer(
        **client_kwargs, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        started = time.perf_counter()
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        remaining, records = set(tps), 0
        with anyio.fail_after(300):
            while remaining:
                fetched = await consumer.getmany(*remaining, timeout_ms=100)
                records += sum(len(batch) for batch in fetched.values())
                for tp in list(remaining):
                    mark = consumer.highwater(tp)
                    if mark is not None and await consumer.position(tp) >= mark:
                        remaining.discard(tp)
        return {"seconds": time.perf_counter() - started, "records": records}
    finally:
        await consumer.stop()


@dataclass
class Collector:
    """Arrival time of every bundle on the output topic, by bundle_id."""

    arrived: dict[str, float] = field(default_factory=dict)

    async def run(
        self, client_kwargs: ClientKwargs, topic: str, partitions: int, stop: anyio.Event
    ) -> None:
        consumer = AIOKafkaConsumer(
            **client_kwargs,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=COLLECT_WAIT_MS,
        )
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, 0)
            while not stop.is_set():
                fetched = await consumer.getmany(timeout_ms=50)
                now = time.perf_counter()
                for records in fetched.values():
                    for record in records:
                        self.arrived[_bundle_id.decode(record.value).bundle_id] = now
        finally:
            await consumer.stop()

    async def wait_for(self, ids: Sequence[str], *, timeout_s: float) -> bool:
        """Whether every id arrived within `timeout_s`."""
        for _ in range(math.ceil(timeout_s / _CHECK_INTERVAL_S)):
            if all(i in self.arrived for i in ids):
                return True
            await anyio.sleep(_CHECK_INTERVAL_S)
        return all(i in self.arrived for i in ids)


async def offered_load(
    client_kwargs: ClientKwargs,
    topic: str,
    events: Sequence[Event],
    collector: Collector,
    *,
    rate: float,
    timeout_s: float,
) -> dict[str, float]:
    """Produce `events` paced at `rate`/s; latency = finalize send() -> its bundle's arrival."""
    records = encode(events)
    ids = bundle_ids(events)
    sent_at: dict[str, float] = {}
    producer = producer_for(client_kwargs)
    await producer.start()
    try:
        started = time.perf_counter()
        for n, ((key, value), bundle_id) in enumerate(zip(records, ids, strict=True)):
            delay = started + n / rate - time.perf_counter()
            if delay > 0:
                await anyio.sleep(delay)
            if bundle_id is not None:
                sent_at[bundle_id] = time.perf_counter()
            await producer.send(topic, value, key=key)
        offered_s = time.perf_counter() - started
        await producer.flush()
    finally:
        await producer.stop()
    expected = [i for i in ids if i is not None]
    is_complete = await collector.wait_for(expected, timeout_s=timeout_s)
    latencies = sorted(
        (collector.arrived[i] - sent_at[i]) * 1000 for i in expected if i in collector.arrived
    )
    last = max((collector.arrived[i] for i in expected if i in collector.arrived), default=started)
    return {
        "offered_events_per_s": rate,
        "events": len(records),
        "finalizes": len(expected),
        "bundles_received": len(latencies),
        "is_complete": is_complete,
        "send_seconds": offered_s,
        "achieved_events_per_s": len(records) / max(last - started, offered_s),
        "latency_ms_p50": statistics.median(latencies) if latencies else float("nan"),
        "latency_ms_p99": _quantile(latencies, 0.99),
        "latency_ms_max": latencies[-1] if latencies else float("nan"),
    }


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of sorted values."""
    if not ordered:
        return float("nan")
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]
