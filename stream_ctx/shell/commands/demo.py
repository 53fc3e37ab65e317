"""`stream-ctx demo`: the processor on an embedded broker, fed a realistic sample stream."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TextIO

import anyio
import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.events import Event, Finalize
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.settings import KafkaSettings, MetricsSettings, ServeSettings, Settings
from stream_ctx.shell.commands.logs import configure_logging
from stream_ctx.shell.commands.run import new_history, runner_app
from stream_ctx.shell.commands.subcommand import Commands, add_command, cancel_on_signal
from stream_ctx.shell.commands.tail import bundle_line
from stream_ctx.shell.http.server import run_http_server
from stream_ctx.shell.kafka.admin import TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import embedded_broker
from stream_ctx.shell.processing.runner import Runner

__all__ = ("add_to", "run_demo")

_INPUT, _OUTPUT = "ctx.retrievals", "ctx.bundles"
# Generous: joining the group alone takes a few seconds on the embedded broker.
_DEMO_TIMEOUT_S = 120.0
# Pacing between produced events, so bundles visibly arrive while the stream flows.
_PACE_S = 0.004
# With serve, the sample starts this long ago: its turns then end before the wall clock.
_RECENT_MS = 7_200_000
_bundle_decoder = msgspec.json.Decoder(Bundle)


async def run_demo(
    *,
    conversations: int = 24,
    seed: int = 42,
    inspect_port: int | None = None,
    serve_port: int | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """Start a broker, run the processor, feed events, print bundles; 0 when every one came.
    With `inspect_port` the inspector serves on 127.0.0.1, with `serve_port` `stream-ctx serve`,
    and both stay open until Ctrl-C."""
    shape = WorkloadShape(conversations=conversations, cut="sentence")
    if serve_port is not None:  # served conversations stay open, recent for serve's wall clock
        now_ms = time.time_ns() // 1_000_000
        shape = dataclasses.replace(shape, start_ms=now_ms - _RECENT_MS, is_ending=False)
    events = generate(seed, shape)
    expected = sum(isinstance(e, Finalize) for e in events)
    out.write(
        f"starting the embedded broker; {len(events)} events from {conversations} "
        f"conversations will ask for {expected} bundles\n"
    )
    async with embedded_broker() as broker:
        client = {"bootstrap_servers": broker.bootstrap_servers}
        await ensure_topics(client, [TopicSpec(name=_INPUT, partitions=4)])
        kafka = KafkaSettings(
            bootstrap_servers=broker.bootstrap_servers,
            group_id="stream-ctx-demo",
            input_topics=[_INPUT],
            output_topic=_OUTPUT,
            session_timeout_ms=6_000,
        )
        http = MetricsSettings(port=inspect_port, inspector=True)
        settings = Settings(kafka=kafka, metrics=http)
        runner = Runner(settings, history=new_history(http))
        async with anyio.create_task_group() as serving:
            if inspect_port is not None:
                serve = partial(
                    run_http_server, runner_app(runner), host=http.host, port=inspect_port
                )
                port = await serving.start(serve)
                out.write(f"inspector: http://{http.host}:{port}/inspect/\n")
            received: list[Bundle] = []
            sent: list[Event] = []
            # One signal watcher for the whole run: a second receiver opened later would have
            # its handler undone when the first one closes.
            streaming, interrupted = anyio.CancelScope(), anyio.Event()
            await serving.start(cancel_on_signal, streaming, interrupted)
            async with anyio.create_task_group() as tasks:
                with streaming, anyio.fail_after(_DEMO_TIMEOUT_S):
                    await tasks.start(runner.run)
                    out.write(f"processor running against {broker.bootstrap_servers}\n")
                    # The feed runs to its last event (the `end`s after the last finalize
                    # included) even when every bundle came before it.
                    async with anyio.create_task_group() as stream:
                        stream.start_soon(_feed, client, events, sent)
                        await _show_bundles(client, expected, out, received)
                if streaming.cancelled_caught:
                    out.write("\ninterrupted: stopping the processor, then the broker\n")
                    inspect_port = serve_port = None  # Ctrl-C means stop, inspector or not
                out.write(_summary(received, expected, sent=len(sent), events=len(events)))
                out.write(_showcase(received))
                if inspect_port is not None:
                    out.write(
                        f"the inspector stays open at http://{http.host}:{port}/inspect/;"
                        " Ctrl-C to stop\n"
                    )
                    out.flush()
                if serve_port is not None and received:
                    # Here, not at the top: the MCP server's import costs every other command
                    # a second.
                    from stream_ctx.shell.serve.service import serve_for_demo

                    served = msgspec.structs.replace(settings, serve=ServeSettings(port=serve_port))
                    last = received[-1].conversation_id
                    await serve_for_demo(served, conversation_id=last, out=out, until=interrupted)
                elif inspect_port is not None:
                    await interrupted.wait()
                runner.stop.set()
            serving.cancel_scope.cancel()
    if streaming.cancelled_caught:
        return 130  # a shell's status for a command ended by SIGINT
    return 0 if len(received) == expected else 1


async def _feed(client: Mapping[str, str], events: Sequence[Event], sent: list[Event]) -> None:
    """Send every event, paced, appending each to `sent` once it is handed to the producer."""
    producer = AIOKafkaProducer(**client, acks="all", enable_idempotence=False, linger_ms=2)
    await producer.start()
    try:
        deliveries = []
        for event in events:
            value = msgspec.json.encode(event)
            deliveries.append(
                await producer.send(_INPUT, value, key=event.conversation_id.encode())
            )
            await anyio.sleep(_PACE_S)
        await producer.flush()
        for event, delivery in zip(events, deliveries, strict=True):
            await delivery
            sent.append(event)
    finally:
        with anyio.CancelScope(shield=True):
            await producer.stop()


async def _show_bundles(
    client: Mapping[str, str], expected: int, out: TextIO, received: list[Bundle]
) -> None:
    """Print bundles as they arrive, appending them to `received`, until `expected` came."""
    consumer = AIOKafkaConsumer(
        _OUTPUT, **client, group_id=None, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        while len(received) < expected:
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for record in records:
                    bundle = _bundle_decoder.decode(record.value)
                    received.append(bundle)
                    out.write(_line(bundle, len(received), expected))
    finally:
        with anyio.CancelScope(shield=True):
            await consumer.stop()


def _line(bundle: Bundle, n: int, expected: int) -> str:
    return f"[{n:>3}/{expected}] {bundle_line(bundle)}"


def _summary(received: Sequence[Bundle], expected: int, *, sent: int, events: int) -> str:
    naive = sum(b.stats.tokens_naive for b in received)
    bundled = sum(b.stats.tokens_bundle for b in received)
    ratio = bundled / naive if naive else 1.0
    return (
        f"\n{len(received)}/{expected} bundles from {sent}/{events} events sent;"
        f" tokens {naive} naive -> {bundled} bundled "
        f"(ratio {ratio:.3f}, {1 - ratio:.1%} saved, counted with cl100k_base); "
        f"every character and attribute kept\n"
    )


def _showcase(received: Sequence[Bundle]) -> str:
    """One context as the model receives it: the shortest that refers back to an earlier item."""
    sharing = [b for b in received if "[§" in b.context and b.mode == "full"]
    if not sharing:
        return ""
    bundle = min(sharing, key=lambda b: (len(b.context), b.bundle_id))
    stats = bundle.stats
    return (
        f"\none context as the model receives it (bundle {bundle.bundle_id}: "
        f"{stats.tokens_bundle} tokens, {stats.tokens_naive} naive):\n\n{bundle.context}"
    )


def add_to(commands: Commands) -> None:
    """`stream-ctx demo [--conversations N] [--seed N] [--inspect] [--serve]`."""
    command = add_command(
        commands, "demo", summary="run the processor on an embedded broker over a sample stream"
    )
    command.add_argument("--conversations", type=int, default=24, help="sample size")
    command.add_argument("--seed", type=int, default=42, help="sample seed")
    command.add_argument(
        "--inspect", action="store_true", help="serve the live inspector and keep running"
    )
    command.add_argument(
        "--inspect-port", type=int, default=8765, help="inspector port on 127.0.0.1 (0: any free)"
    )
    command.add_argument(
        "--serve", action="store_true", help="also run `stream-ctx serve` (HTTP API, MCP) on it"
    )
    command.add_argument(
        "--serve-port", type=int, default=8780, help="serve's port on 127.0.0.1 (0: any free)"
    )
    command.set_defaults(handler=_demo)


def _demo(args: argparse.Namespace) -> int:
    configure_logging(level=logging.WARNING)
    demo = partial(
        run_demo,
        conversations=args.conversations,
        seed=args.seed,
        inspect_port=args.inspect_port if args.inspect else None,
        serve_port=args.serve_port if args.serve else None,
    )
    status: int = anyio.run(demo)
    return status
