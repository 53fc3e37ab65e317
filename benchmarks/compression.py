"""Which codec to produce bundles with: batch bytes and produce throughput per codec.

Run: .venv/bin/python benchmarks/compression.py [--conversations N]
Bundles come from the standard workload (replayed); each codec sends the same bundles to the
embedded broker in 1 MiB batches, as the runner does. ~20 s with the defaults on a 2-core
machine.
"""

from __future__ import annotations

import argparse
import time

import anyio
from aiokafka import AIOKafkaProducer

from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.codec import encode_bundle
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.shell.kafka.admin import TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import embedded_broker

CODECS = (None, "gzip", "snappy", "lz4", "zstd")
_BATCH_BYTES = 1_048_576


def bundles(conversations: int) -> list[tuple[bytes, bytes]]:
    """(key, bundle bytes) of every finalize in the workload."""
    processor = ContextProcessor(BundleConfig())
    found = []
    for position, event in enumerate(generate(7, WorkloadShape(conversations=conversations))):
        bundle = processor.apply(event, position=position)
        if bundle is not None:
            found.append((bundle.conversation_id.encode(), encode_bundle(bundle)))
    return found


def batch_bytes(producer: AIOKafkaProducer, records: list[tuple[bytes, bytes]]) -> int:
    """Bytes on the wire: the records packed into full batches with the producer's codec."""
    total, batch = 0, producer.create_batch()
    for key, value in records:
        if batch.append(key=key, value=value, timestamp=None) is None:
            total += len(batch._build())
            batch = producer.create_batch()
            batch.append(key=key, value=value, timestamp=None)
    return total + len(batch._build())


async def measure(bootstrap: str, records: list[tuple[bytes, bytes]]) -> None:
    raw = sum(len(k) + len(v) for k, v in records)
    print(f"{len(records)} bundles, {raw / 1e6:.2f} MB of keys and values")
    print(f"{'codec':<8}{'wire MB':>9}{'ratio':>8}{'bundles/s':>11}{'MB/s (raw)':>12}")
    for codec in CODECS:
        topic = f"compression-{codec or 'none'}-{time.monotonic_ns()}"
        await ensure_topics({"bootstrap_servers": bootstrap}, [TopicSpec(name=topic, partitions=1)])
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=False,
            compression_type=codec,
            max_batch_size=_BATCH_BYTES,
            max_request_size=2 * _BATCH_BYTES,
        )
        await producer.start()
        try:
            wire = batch_bytes(producer, records)
            started = time.perf_counter()
            sent = [await producer.send(topic, v, key=k) for k, v in records]
            for future in sent:
                await future
            took = time.perf_counter() - started
        finally:
            await producer.stop()
        print(
            f"{codec or 'none':<8}{wire / 1e6:>9.2f}{raw / wire:>8.2f}"
            f"{len(records) / took:>11.0f}{raw / 1e6 / took:>12.1f}"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=400)
    args = parser.parse_args()
    records = bundles(args.conversations)
    async with embedded_broker() as broker:
        await measure(broker.bootstrap_servers, records)


if __name__ == "__main__":
    anyio.run(main)
