"""Soak: `stream-ctx run` at half of its measured maximum for a long time; RSS, lag, latency.

Run: .venv/bin/python benchmarks/soak.py [--minutes 60] [--sample-s 10]
    [--plot docs/benchmarks/soak.png]
First a live probe measures the maximum: events fed at a low rate, and the rate at which the
processor's CPU time would fill a core. Then a fresh topic gets events paced at `--fraction` of
it while every `--sample-s` seconds the processor's RSS and CPU, the group's lag (high watermark
minus committed offset), the finalize-to-bundle latencies of the interval and the broker's CPU
and RSS are sampled. Prints the samples, RSS growth and lag trend; writes the plot.

The embedded broker's memory engine lists every stored batch of a partition on each fetch that
returns data (docs/decisions/soak-stall.md): the soak fetches with Kafka's default wait and sends
in one-second batches, so that cost stays small for an hour (not for a day).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from stream_ctx.core.wire.events import Event, Finalize
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.shell.kafka.admin import TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import embedded_broker

PARTITIONS = 4
# Conversations per generated chunk; each chunk's ids are new, so the stream never repeats.
CHUNK_CONVERSATIONS = 200
# Sends are spread over the second in ticks; each tick's sends make one batch per partition,
# and each batch is an object the memory engine lists on every fetch of its partition. A
# producer lingering a second makes the same batches.
TICK_S = 1.0
# While soaking, the processor and the bundle reader fetch with Kafka's default wait
# (fetch.max.wait.ms 500): Tansu holds each fetch that long, so each client makes two fetches a
# second, and each fetch that returns data lists every stored batch of its partitions (the
# processor's own default of 10 ms would fetch as soon as data arrives).
SOAK_FETCH_WAIT_MS = 500
# The processor's producer lingers half a second: one batch per partition per linger instead of
# one per bundle (the default sends each bundle at once), so the output partitions, which the
# bundle reader fetches, grow by two batches a second each.
SOAK_LINGER_MS = 500
# States and offsets are flushed once a second (the default is 100 ms; Kafka Streams' is 30 s):
# each flush is one more batch per changelog partition, and the memory engine's produce to a
# partition also slows with the batches it holds.
SOAK_COMMIT_INTERVAL_MS = 1000
# The maximum is measured live, under the soak's own conditions (feed, reader and broker on the
# same cores): a probe feeds this rate for this long, and the maximum is the rate at which the
# processor's CPU time would fill one core. A drained backlog overstates it twice over: one
# fetch then holds thousands of events and a conversation's state is written once, not per tick.
PROBE_RATE = 250.0
PROBE_S = 240.0
# The probe's first samples hold the join and the processor's warm-up: its CPU per event rose
# over the first ~40,000 events in every run, then held; the rest are measured.
PROBE_WARMUP_S = 150.0
# Samples of the first minute are the baseline of RSS growth (after imports and warm-up).
BASELINE_S = 60.0


@dataclass(slots=True)
class Sample:
    at_s: float
    rss_mib: float
    lag: int
    p50_ms: float
    p99_ms: float
    bundles: int
    cpu_pct: float = math.nan
    broker_cpu_pct: float = math.nan
    broker_rss_mib: float = math.nan


@dataclass(slots=True)
class Stream:
    """Endless workload: chunk after chunk of conversations, with fresh ids per chunk."""

    chunk: int = 0
    pending: list[Event] = field(default_factory=list)

    def take(self, count: int) -> list[Event]:
        while len(self.pending) < count:
            events = generate(self.chunk, WorkloadShape(conversations=CHUNK_CONVERSATIONS))
            self.pending += [
                msgspec.structs.replace(e, conversation_id=f"s{self.chunk}-{e.conversation_id}")
                for e in events
            ]
            self.chunk += 1
        taken, self.pending = self.pending[:count], self.pending[count:]
        return taken


def write_config(
    path: Path,
    servers: str,
    topic: str,
    group: str,
    *,
    fetch_max_wait_ms: int = 10,
) -> Path:
    path.write_text(
        "[kafka]\n"
        f'bootstrap_servers = "{servers}"\n'
        f'group_id = "{group}"\n'
        f'input_topics = ["{topic}"]\n'
        f'output_topic = "{topic}.out"\n'
        f'dlq_topic = "{topic}.dlq"\n'
        f"fetch_max_wait_ms = {fetch_max_wait_ms}\n"
        "session_timeout_ms = 6000\n"
        f"linger_ms = {SOAK_LINGER_MS}\n"
        "[state]\n"
        f"commit_interval_ms = {SOAK_COMMIT_INTERVAL_MS}\n",
        encoding="utf-8",
    )
    return path


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return math.nan


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


class Processor:
    """`stream-ctx run` as its own process, its stderr in a file."""

    def __init__(self, config: Path, log: Path) -> None:
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "stream_ctx.shell.commands.cli", "run", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)
        self._log.close()


async def lag_of(client: dict[str, str], group: str, topic: str, marks: dict[int, int]) -> int:
    consumer = AIOKafkaConsumer(**client, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        committed = [await consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)]
    finally:
        await consumer.stop()
    return sum(marks.get(p, 0) - (c or 0) for p, c in enumerate(committed))


async def measure_max(client: dict[str, str], workdir: Path, broker_pid: int) -> float:
    """Events/s at which the processor would use a whole core, from a live probe at a low rate."""
    samples = await soak(
        client, workdir, rate=PROBE_RATE, seconds=PROBE_S, sample_s=10.0, broker_pid=broker_pid
    )
    busy = statistics.fmean(s.cpu_pct for s in samples if s.at_s > PROBE_WARMUP_S) / 100
    return PROBE_RATE / busy


async def soak(
    client: dict[str, str],
    workdir: Path,
    *,
    rate: float,
    seconds: float,
    sample_s: float,
    broker_pid: int,
) -> list[Sample]:
    topic = f"soak-{time.monotonic_ns()}"
    group = f"{topic}-group"
    await ensure_topics(client, [TopicSpec(name=topic, partitions=PARTITIONS)])
    config = write_config(
        workdir / "soak.toml",
        client["bootstrap_servers"],
        topic,
        group,
        fetch_max_wait_ms=SOAK_FETCH_WAIT_MS,
    )
    processor = Processor(config, workdir / "soak.log")
    producer = AIOKafkaProducer(**client, acks="all", enable_idempotence=False, linger_ms=5)
    consumer = AIOKafkaConsumer(
        f"{topic}.out",
        **client,
        group_id=None,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=SOAK_FETCH_WAIT_MS,
    )
    await producer.start()
    await consumer.start()
    sent_at: dict[str, deque[float]] = {}
    latencies: list[float] = []
    marks: dict[int, int] = {}
    samples: list[Sample] = []
    bundles = 0
    stream = Stream()

    async def feed() -> None:
        started, sent = time.monotonic(), 0
        while time.monotonic() - started < seconds:
            due = int((time.monotonic() - started) * rate) - sent
            for event in stream.take(max(0, due)):
                meta = await producer.send(
                    topic, msgspec.json.encode(event), key=event.conversation_id.encode()
                )
                if isinstance(event, Finalize):
                    sent_at.setdefault(event.conversation_id, deque()).append(time.monotonic())
                meta.add_done_callback(lambda f: _mark(f, marks))
            sent += max(0, due)
            await anyio.sleep(TICK_S)

    async def collect() -> None:
        nonlocal bundles
        while True:
            for records in (await consumer.getmany(timeout_ms=50)).values():
                now = time.monotonic()
                for record in records:
                    bundles += 1
                    # A conversation's bundles arrive in the order of its finalizes.
                    queue = sent_at.get(record.key.decode())
                    if queue:
                        latencies.append((now - queue.popleft()) * 1000)

    started = time.monotonic()
    broker_cpu, broker_cpu_at = cpu_seconds(broker_pid), started
    own_cpu = cpu_seconds(processor.process.pid)
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(collect)
            async with anyio.create_task_group() as feeding:
                feeding.start_soon(feed)
                while time.monotonic() - started < seconds:
                    await anyio.sleep(sample_s)
                    window, latencies[:] = list(latencies), []
                    cpu, now = cpu_seconds(broker_pid), time.monotonic()
                    cpu_pct = 100 * (cpu - broker_cpu) / (now - broker_cpu_at)
                    own = cpu_seconds(processor.process.pid)
                    own_pct = 100 * (own - own_cpu) / (now - broker_cpu_at)
                    broker_cpu, broker_cpu_at, own_cpu = cpu, now, own
                    sample = Sample(
                        at_s=time.monotonic() - started,
                        rss_mib=rss_mib(processor.process.pid),
                        lag=await lag_of(client, group, topic, dict(marks)),
                        p50_ms=percentile(window, 0.5),
                        p99_ms=percentile(window, 0.99),
                        bundles=bundles,
                        cpu_pct=own_pct,
                        broker_cpu_pct=cpu_pct,
                        broker_rss_mib=rss_mib(broker_pid),
                    )
                    samples.append(sample)
                    print(
                        f"{sample.at_s:7.0f} s  rss {sample.rss_mib:7.1f} MiB  lag {sample.lag:6d}"
                        f"  p50 {sample.p50_ms:8.1f} ms  p99 {sample.p99_ms:8.1f} ms"
                        f"  bundles {sample.bundles}  CPU {sample.cpu_pct:5.1f}%"
                        f"  broker {sample.broker_cpu_pct:5.1f}% CPU"
                        f" {sample.broker_rss_mib:7.1f} MiB",
                        flush=True,
                    )
            tasks.cancel_scope.cancel()
    finally:
        await producer.stop()
        await consumer.stop()
        processor.stop()
    return samples


def _mark(future: object, marks: dict[int, int]) -> None:
    meta = future.result()  # type: ignore[attr-defined]
    marks[meta.partition] = max(marks.get(meta.partition, 0), meta.offset + 1)


def report(samples: list[Sample], *, rate: float, max_rate: float) -> str:
    steady = [s for s in samples if s.at_s > BASELINE_S] or samples
    base = (
        statistics.median(s.rss_mib for s in samples if s.at_s <= BASELINE_S)
        if any(s.at_s <= BASELINE_S for s in samples)
        else samples[0].rss_mib
    )
    last = statistics.median(s.rss_mib for s in samples[-max(1, len(samples) // 10) :])
    hours = [s.at_s / 3600 for s in steady]
    rss_slope = slope(hours, [s.rss_mib for s in steady])
    lag_slope = slope([s.at_s / 60 for s in steady], [float(s.lag) for s in steady])
    p50 = statistics.median(s.p50_ms for s in steady if not math.isnan(s.p50_ms))
    p99 = max(s.p99_ms for s in steady if not math.isnan(s.p99_ms))
    return (
        f"max {max_rate:.0f} events/s; soaked at {rate:.0f} events/s for "
        f"{samples[-1].at_s / 60:.1f} min, {samples[-1].bundles} bundles\n"
        f"RSS: first minute {base:.1f} MiB, last tenth {last:.1f} MiB "
        f"({last - base:+.1f} MiB), after the first minute {rss_slope:+.1f} MiB/h\n"
        f"lag: mean {statistics.fmean(s.lag for s in steady):.0f} events, "
        f"max {max(s.lag for s in steady)}, trend {lag_slope:+.1f} events/min\n"
        f"latency: median of interval p50s {p50:.1f} ms, worst interval p99 {p99:.1f} ms\n"
    )


def plot(samples: list[Sample], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s.at_s / 60 for s in samples]
    fig, axes = plt.subplots(4, 1, figsize=(8, 10), sharex=True)
    axes[0].plot(minutes, [s.rss_mib for s in samples])
    axes[0].set_ylabel("RSS (MiB)")
    axes[1].plot(minutes, [s.lag for s in samples])
    axes[1].set_ylabel("lag (events)")
    axes[2].plot(minutes, [s.p50_ms for s in samples], label="p50")
    axes[2].plot(minutes, [s.p99_ms for s in samples], label="p99")
    axes[2].set_ylabel("finalize to bundle (ms)")
    axes[2].set_yscale("log")
    axes[2].legend()
    axes[3].plot(minutes, [s.cpu_pct for s in samples], label="processor CPU (%)")
    axes[3].plot(minutes, [s.broker_cpu_pct for s in samples], label="broker CPU (%)")
    axes[3].plot(minutes, [s.broker_rss_mib / 10 for s in samples], label="broker RSS (10 MiB)")
    axes[3].legend()
    axes[3].set_xlabel("minutes")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--sample-s", type=float, default=10.0)
    parser.add_argument("--fraction", type=float, default=0.5, help="of the measured maximum")
    parser.add_argument("--plot", type=Path, default=Path("docs/benchmarks/soak.png"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        async with embedded_broker() as broker:
            client = {"bootstrap_servers": broker.bootstrap_servers}
            max_rate = await measure_max(client, Path(tmp), broker.pid)
            rate = args.fraction * max_rate
            print(f"maximum {max_rate:.0f} events/s; soaking at {rate:.0f} events/s", flush=True)
            samples = await soak(
                client,
                Path(tmp),
                rate=rate,
                seconds=args.minutes * 60,
                sample_s=args.sample_s,
                broker_pid=broker.pid,
            )
    text = report(samples, rate=rate, max_rate=max_rate)
    print(text, end="")
    plot(samples, args.plot, f"soak at {rate:.0f} events/s ({args.fraction:.0%} of max)")
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    anyio.run(main)
