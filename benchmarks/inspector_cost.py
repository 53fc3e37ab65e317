"""What the inspector costs the processor: events/s with it closed and open, in one run.

Run: .venv/bin/python benchmarks/inspector_cost.py [--conversations N] [--rounds R]
Each round pre-loads the same workload into a fresh topic of the embedded broker, then times a
fresh runner from its first processed batch to its last event. "closed": no
history, no HTTP server. "open": the history is fed, the inspector serves, and a client holds
its live stream open while fetching the overview and a conversation page every second.
Rounds alternate closed/open so drift (a warm page cache, a busy neighbour) hits both.
"""

from __future__ import annotations

import argparse
import statistics
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from functools import partial

import anyio
import msgspec
from aiokafka import AIOKafkaProducer

from stream_ctx.core.events import Event
from stream_ctx.shell.admin import TopicSpec, ensure_topics
from stream_ctx.shell.broker import embedded_broker
from stream_ctx.shell.runner import Runner
from stream_ctx.shell.settings import KafkaSettings, MetricsSettings, Settings
from stream_ctx.shell.web import new_history, run_http_server, runner_app
from stream_ctx.workload import WorkloadShape, generate

_PARTITIONS = 4
# Generous: a group join takes seconds on the embedded broker; a round's work, a few more.
_ROUND_TIMEOUT_S = 300.0
# How often the open round's client fetches pages, like a person watching (the live stream
# ticks every second on its own).
_PAGE_EVERY_S = 1.0
# Counter polls: a millisecond is small next to a round of seconds.
_POLL_S = 0.001


async def load(servers: str, topic: str, events: list[Event]) -> None:
    await ensure_topics(
        {"bootstrap_servers": servers}, [TopicSpec(name=topic, partitions=_PARTITIONS)]
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=servers, acks="all", enable_idempotence=False, linger_ms=5
    )
    await producer.start()
    try:
        for event in events:
            await producer.send(
                topic, msgspec.json.encode(event), key=event.conversation_id.encode()
            )
        await producer.flush()
    finally:
        await producer.stop()


async def watch(base: str, cid: str) -> None:
    """A browser's load: the live stream held open, two pages fetched every second."""

    def fetch(path: str) -> None:
        try:
            with urllib.request.urlopen(f"{base}{path}", timeout=30) as response:  # noqa: S310
                response.read()
        except urllib.error.HTTPError as error:
            if error.code != 404:  # a conversation not seen yet is a 404 page
                raise

    async with await anyio.connect_tcp("127.0.0.1", int(base.rsplit(":", 1)[1])) as stream:
        await stream.send(
            b"GET /inspect/stream?c=" + cid.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_drain, stream)
            while True:
                await anyio.to_thread.run_sync(fetch, "/inspect/")
                await anyio.to_thread.run_sync(fetch, f"/inspect/c/{cid}")
                await anyio.sleep(_PAGE_EVERY_S)


async def _drain(stream: anyio.abc.SocketStream) -> None:
    while True:
        await stream.receive()


async def one_round(servers: str, n: int, events: list[Event], *, is_open: bool) -> float:
    """Events per second of one fresh runner over the pre-loaded workload."""
    topic = f"bench.inspector.{n}"
    await load(servers, topic, events)
    kafka = KafkaSettings(
        bootstrap_servers=servers,
        group_id=f"bench-inspector-{n}",
        input_topics=[topic],
        output_topic=f"{topic}.out",
        dlq_topic=f"{topic}.dlq",
        session_timeout_ms=6_000,
    )
    http = MetricsSettings(port=0 if is_open else None, inspector=True)
    runner = Runner(Settings(kafka=kafka, metrics=http), history=new_history(http))
    with anyio.fail_after(_ROUND_TIMEOUT_S):
        async with anyio.create_task_group() as serving:
            if is_open:
                app = runner_app(runner)
                port = await serving.start(partial(run_http_server, app, host=http.host, port=0))
                serving.start_soon(watch, f"http://127.0.0.1:{port}", events[0].conversation_id)
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(runner.run)
                # From the first processed batch: a group join (seconds here) is not the cost.
                await _until(lambda: runner.stats.events > 0)
                started, before = time.perf_counter(), runner.stats.events
                await _until(lambda: runner.stats.events >= len(events))
                elapsed = time.perf_counter() - started
                runner.stop.set()
            serving.cancel_scope.cancel()
    return (len(events) - before) / elapsed


async def _until(condition: Callable[[], bool]) -> None:
    """Poll the runner's counters (they signal nothing); the round's timeout bounds it."""
    for _ in range(int(_ROUND_TIMEOUT_S / _POLL_S)):
        if condition():
            return
        await anyio.sleep(_POLL_S)


async def main(conversations: int, rounds: int) -> None:
    events = generate(11, WorkloadShape(conversations=conversations))
    print(f"{len(events)} events from {conversations} conversations, {rounds} rounds each")
    figures: dict[bool, list[float]] = {False: [], True: []}
    async with embedded_broker() as broker:
        for n in range(2 * rounds):
            is_open = n % 2 == 1
            rate = await one_round(broker.bootstrap_servers, n, events, is_open=is_open)
            figures[is_open].append(rate)
            state = "open  " if is_open else "closed"
            print(f"  round {n + 1}: inspector {state} {rate:8.0f} events/s")
    closed, opened = statistics.median(figures[False]), statistics.median(figures[True])
    print(f"inspector closed: {closed:.0f} events/s (median)")
    print(f"inspector open:   {opened:.0f} events/s (median), {opened / closed - 1:+.1%}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    anyio.run(main, args.conversations, args.rounds)
