"""A long local loop: `stream-ctx broker --max-memory` keeps the embedded broker's memory bounded.

Run: .venv/bin/python benchmarks/broker_memory.py [--minutes 60] [--rate 190]
    [--max-memory 2GiB] [--write docs/benchmarks/broker-memory.md]
`stream-ctx broker` and `stream-ctx run` run as a user runs them, two processes on one config
(tuned as the soak is); events are fed at `--rate` and the bundles read back. Every `--sample-s`
seconds the broker's RSS, the bundles so far, the broker's restarts and the events it refused
are sampled. Prints the samples and a summary; writes the page when asked.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TextIO

import anyio
import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError
from provenance import machine
from soak import SOAK_FETCH_WAIT_MS, TICK_S, Stream, rss_mib, write_config

from stream_ctx.client import rewind_emptied
from stream_ctx.core.wire.events import Finalize
from stream_ctx.shell.commands.broker import DEFAULT_MAX_MEMORY

STREAM_CTX = Path(sys.executable).parent / "stream-ctx"
TOPIC = "retrievals"
# The broker prints its banner within a second; a slow CI box gets thirty.
START_TIMEOUT_S = 30.0
# A restart drops the topics for a moment; a send waits this long for them to come back.
SEND_TIMEOUT_MS = 10_000


@dataclass(frozen=True, slots=True)
class Sample:
    at_s: float
    broker_rss_mib: float
    bundles: int
    restarts: int
    finalizes: int
    refused: int


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def child_pid(pid: int) -> int | None:
    """The broker process that `stream-ctx broker` (pid) runs now; a restart changes it.

    Any of its threads may have started it (the broker is launched from a worker thread)."""
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        if found := children.read_text().split():
            return int(found[0])
    return None


def start(args: list[str], out: TextIO) -> subprocess.Popen[bytes]:
    """A `stream-ctx` command as its own process, its output in `out`."""
    return subprocess.Popen([str(STREAM_CTX), *args], stdout=out, stderr=subprocess.STDOUT)


def restarts(broker_out: Path) -> int:
    """Restarts so far, from the lines `stream-ctx broker` prints."""
    return broker_out.read_text().count("restarted empty")


class Deliveries:
    """Counts what the broker acknowledged and refused; a finalize counts once acknowledged."""

    def __init__(self) -> None:
        self.finalizes = 0
        self.refused = 0

    def settle(self, future: asyncio.Future[object], *, is_finalize: bool) -> None:
        if future.exception() is not None:
            self.refused += 1
        elif is_finalize:
            self.finalizes += 1


async def measure(args: argparse.Namespace, workdir: Path) -> list[Sample]:
    servers = f"127.0.0.1:{free_port()}"
    config = write_config(
        workdir / "loop.toml", servers, TOPIC, "loop", fetch_max_wait_ms=SOAK_FETCH_WAIT_MS
    )
    broker_out = (workdir / "broker.out").open("w")
    broker = start(["broker", "--config", str(config), "--max-memory", args.max_memory], broker_out)
    run_log = (workdir / "run.log").open("w")
    runner: subprocess.Popen[bytes] | None = None
    try:
        with anyio.fail_after(START_TIMEOUT_S):
            for _ in range(int(START_TIMEOUT_S / 0.1)):
                if "Ctrl-C" in (workdir / "broker.out").read_text():
                    break
                await anyio.sleep(0.1)
        runner = start(["run", "--config", str(config)], run_log)
        return await feed_and_sample(args, servers, broker.pid, workdir / "broker.out")
    finally:
        for process in (runner, broker):
            if process is not None:
                process.send_signal(signal.SIGINT)
                process.wait(timeout=60)
        broker_out.close()
        run_log.close()


async def feed_and_sample(
    args: argparse.Namespace, servers: str, broker_pid: int, broker_out: Path
) -> list[Sample]:
    client = {"bootstrap_servers": servers}
    producer = AIOKafkaProducer(
        **client, acks="all", enable_idempotence=False, request_timeout_ms=SEND_TIMEOUT_MS
    )
    consumer = AIOKafkaConsumer(
        f"{TOPIC}.out", **client, group_id=None, auto_offset_reset="earliest"
    )
    await producer.start()
    await consumer.start()
    seconds = args.minutes * 60
    samples: list[Sample] = []
    bundles = 0
    deliveries = Deliveries()
    stream = Stream()

    async def feed() -> None:
        started, sent = time.monotonic(), 0
        while time.monotonic() - started < seconds:
            due = int((time.monotonic() - started) * args.rate) - sent
            for event in stream.take(max(0, due)):
                try:
                    future = await producer.send(
                        TOPIC, msgspec.json.encode(event), key=event.conversation_id.encode()
                    )
                except KafkaError:
                    deliveries.refused += 1
                    continue
                settle = partial(deliveries.settle, is_finalize=isinstance(event, Finalize))
                future.add_done_callback(settle)
            sent += max(0, due)
            await anyio.sleep(TICK_S)

    async def collect() -> None:
        nonlocal bundles
        while True:
            batches = await consumer.getmany(timeout_ms=500)
            bundles += sum(len(records) for records in batches.values())
            if not batches:
                await rewind_emptied(consumer)

    started = time.monotonic()
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(collect)
            tasks.start_soon(feed)
            for _ in range(math.ceil(seconds / args.sample_s)):
                await anyio.sleep(args.sample_s)
                pid = child_pid(broker_pid)
                sample = Sample(
                    at_s=time.monotonic() - started,
                    broker_rss_mib=rss_mib(pid) if pid else math.nan,
                    bundles=bundles,
                    restarts=restarts(broker_out),
                    finalizes=deliveries.finalizes,
                    refused=deliveries.refused,
                )
                samples.append(sample)
                print(
                    f"{sample.at_s:7.0f} s  broker {sample.broker_rss_mib:7.1f} MiB"
                    f"  finalizes {sample.finalizes}  bundles {sample.bundles}"
                    f"  restarts {sample.restarts}  refused {sample.refused}",
                    flush=True,
                )
            tasks.cancel_scope.cancel()
    finally:
        await producer.stop()
        await consumer.stop()
    return samples


def summary(samples: list[Sample], args: argparse.Namespace, *, start_overs: int) -> str:
    rss = [s.broker_rss_mib for s in samples if not math.isnan(s.broker_rss_mib)]
    lines = [
        f"{args.minutes:.0f} min at {args.rate:.0f} events/s, --max-memory {args.max_memory}:"
        f" broker RSS max {max(rss):.0f} MiB, {samples[-1].restarts} restarts;"
        f" {samples[-1].finalizes:,} finalizes acknowledged, {samples[-1].bundles:,} bundles"
        f" read, {samples[-1].refused} events refused; {start_overs} partition start-overs"
        " logged by `run`",
        "",
        "| minutes | broker RSS MiB (max in the interval) | bundles in the interval | restarts |",
        "|---|---|---|---|",
    ]
    per = max(1, round(600 / args.sample_s))
    previous = Sample(0.0, 0.0, 0, 0, 0, 0)
    for start in range(0, len(samples), per):
        chunk = samples[start : start + per]
        last = chunk[-1]
        top = max((s.broker_rss_mib for s in chunk if not math.isnan(s.broker_rss_mib)), default=0)
        lines.append(
            f"| {previous.at_s / 60:.0f}-{last.at_s / 60:.0f} | {top:.0f}"
            f" | {last.bundles - previous.bundles:,} | {last.restarts - previous.restarts} |"
        )
        previous = last
    return "\n".join(lines) + "\n"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=190.0, help="events/s (the soak's half load)")
    parser.add_argument("--max-memory", default=DEFAULT_MAX_MEMORY)
    parser.add_argument("--sample-s", type=float, default=10.0)
    parser.add_argument("--write", type=Path, help="write the summary page here")
    parser.add_argument("--logs", type=Path, help="keep the config and both logs here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.logs or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        samples = await measure(args, workdir)
        start_overs = (workdir / "run.log").read_text().count("was emptied: its")
    text = summary(samples, args, start_overs=start_overs)
    print(text, end="")
    if args.write:
        args.write.write_text(PAGE.format(minutes=round(args.minutes), machine=machine()) + text)


PAGE = """# The embedded broker's memory over a long local run

Written by
`python benchmarks/broker_memory.py --minutes {minutes} --write docs/benchmarks/broker-memory.md`
({machine}). `stream-ctx broker` and `stream-ctx run` ran as two processes on one config; the
benchmark fed events and read bundles back. Bundles trail finalizes by the ones in flight when a
sample is taken; a restart drops what the broker held.

"""


if __name__ == "__main__":
    anyio.run(main)
