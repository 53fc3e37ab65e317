"""Event-loop turns from aiokafka's `send()` to its produce request, against the embedded broker.

    python benchmarks/sender_turns.py [--sends 20]

The Runner yields `_SENDER_TURNS` turns after each bundle so that it is on the wire before the
next finalize holds the loop. Counted twice per send: with the producer idle, and right after a
blocking pause (a finalize) during which the answer to the previous request arrived unread
(aiokafka keeps one request in flight per broker, so that answer must be read first).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import anyio
from aiokafka import AIOKafkaProducer
from aiokafka.producer import sender

from stream_ctx.shell.admin import TopicSpec, ensure_topics
from stream_ctx.shell.broker import embedded_broker

# More than any count seen; reaching it means the request did not start by itself.
MAX_TURNS = 30
# Long next to the broker's answer (~2 ms here), as a finalize is.
FINALIZE_S = 0.015
VALUE = b"x" * 5_000


async def turns_until_request(producer: AIOKafkaProducer, started: list[float]) -> int | None:
    """Loop turns after one send() until a produce request starts; None past MAX_TURNS."""
    before = len(started)
    await producer.send("turns", VALUE, partition=0)
    for turn in range(1, MAX_TURNS + 1):
        await asyncio.sleep(0)
        if len(started) > before:
            return turn
    return None


async def count(sends: int) -> tuple[list[int | None], list[int | None]]:
    """(turns with the producer idle, turns with the previous request's answer unread)."""
    started: list[float] = []
    request = sender.Sender._send_produce_req

    async def noted(self: Any, node_id: int, batches: Any) -> Any:
        started.append(time.perf_counter())
        return await request(self, node_id, batches)

    sender.Sender._send_produce_req = noted
    try:
        async with embedded_broker() as broker:
            kw = {"bootstrap_servers": broker.bootstrap_servers}
            await ensure_topics(kw, [TopicSpec(name="turns", partitions=1)])
            producer = AIOKafkaProducer(
                **kw, acks="all", enable_idempotence=False, compression_type="zstd"
            )
            await producer.start()
            try:
                await (await producer.send("turns", VALUE, partition=0))  # metadata, connection
                idle, pending = [], []
                for _ in range(sends):
                    await asyncio.sleep(0.02)  # every answer read: the producer is idle
                    idle.append(await turns_until_request(producer, started))
                    time.sleep(FINALIZE_S)  # noqa: ASYNC251 - the loop held, as by a finalize
                    pending.append(await turns_until_request(producer, started))
            finally:
                await producer.stop()
    finally:
        sender.Sender._send_produce_req = request
    return idle, pending


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=20)
    args = parser.parse_args()
    idle, pending = anyio.run(count, args.sends)
    print(f"producer idle: {idle}")
    print(f"previous answer unread: {pending}")


if __name__ == "__main__":
    main()
