"""One measured process of benchmarks/suite.py: the passthrough ceiling or a stream-ctx Runner.

Each measurement runs in a fresh process, as a deployment would, so its CPU seconds and peak RSS
are its own (not the broker's, not the suite's) and no tokenizer cache carries over. The clock
starts when the group assigns the input partitions, the same event for both, so the ~3 s group
join of the embedded broker is outside every figure. Each run lasts as long as its workload
takes to drain (seconds to a minute in the suite).

    python benchmarks/suite_child.py '<json spec>'   # prints one line: RESULT {...}
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import pstats
import resource
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from stream_ctx.core.counting.tokenizer import get_tokenizer
from stream_ctx.settings import KafkaSettings, Settings
from stream_ctx.shell.http.metrics import Health, Metrics
from stream_ctx.shell.processing.runner import Runner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite_profile

RESULT_PREFIX = "RESULT "
# What the runner polls with; the passthrough uses the same so both fetch alike.
_POLL_MS = 100


def rss_kib(field: str = "VmRSS") -> int:
    """This process's resident set (VmRSS) or its peak so far (VmHWM), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def settings_from(spec: dict[str, Any]) -> Settings:
    kafka = KafkaSettings(
        bootstrap_servers=spec["bootstrap"],
        group_id=spec["group_id"],
        input_topics=[spec["input_topic"]],
        output_topic=spec["output_topic"],
        dlq_topic=spec["dlq_topic"],
        session_timeout_ms=spec["session_timeout_ms"],
    )
    base = Settings(kafka=kafka)
    bundle = msgspec.structs.replace(base.bundle, **spec.get("bundle", {}))
    return msgspec.structs.replace(base, bundle=bundle)


class _Clock:
    """Times, CPU and RSS at the moments a run passes: assigned, restored (ready), done."""

    def __init__(self, profile: bool) -> None:
        self.points: dict[str, dict[str, float]] = {}
        self.profiler = cProfile.Profile(time.process_time) if profile else None
        self.done = anyio.Event()

    def note(self, name: str, **extra: float) -> None:
        if name in self.points:
            return
        self.points[name] = {
            "t": time.perf_counter(),
            "cpu_s": time.process_time(),
            "rss_kib": rss_kib(),
            **extra,
        }
        if name == "assigned" and self.profiler is not None:
            self.profiler.enable()
        if name == "done":
            if self.profiler is not None:
                self.profiler.disable()
            self.done.set()


class _ProbeHealth(Health):
    """The runner reports ready once the partitions it was assigned are restored."""

    def __init__(self, clock: _Clock) -> None:
        super().__init__()
        self.clock = clock

    def set_ready(self, is_ready: bool) -> None:
        super().set_ready(is_ready)
        if is_ready:
            self.clock.note("ready")


class _ProbeMetrics(Metrics):
    """The runner sets conversations_held after every batch is published and committed."""

    def __init__(self, clock: _Clock, *, expect: int) -> None:
        super().__init__()
        self.clock = clock
        self.expect = expect
        self.runner: Runner | None = None

    def conversations_held(self, count: int) -> None:
        super().conversations_held(count)
        if self.runner is None:
            return
        stats = self.runner.stats
        if stats.events >= self.expect:
            self.clock.note("done", events=stats.events, held=count, bundles=stats.bundles)


async def run_runner(spec: dict[str, Any]) -> dict[str, Any]:
    """Run a Runner until `expect_events` are processed, then stop it."""
    get_tokenizer()  # loaded once per process before the clock starts, as in any running instance
    clock = _Clock(spec.get("profile", False))
    expect = int(spec["expect_events"])
    metrics = _ProbeMetrics(clock, expect=expect)
    health = _ProbeHealth(clock)
    runner = Runner(settings_from(spec), metrics=metrics, health=health)
    metrics.runner = runner
    assignments = 0
    claim = runner.partitions.claim

    def noting_claim(assigned: list[TopicPartition]) -> None:
        # The group's assignment: the moment both this run and the passthrough start the clock.
        nonlocal assignments
        assignments += 1
        clock.note("assigned")
        claim(assigned)

    runner.partitions.claim = noting_claim  # type: ignore[method-assign]
    with anyio.fail_after(spec["timeout_s"]):
        async with anyio.create_task_group() as tasks:
            await tasks.start(runner.run)
            await clock.done.wait()
            runner.stop.set()
    stats = runner.stats
    result: dict[str, Any] = {
        "points": clock.points,
        "events": stats.events,
        "bundles": stats.bundles,
        "dead_letters": stats.dead_letters,
        "batches": stats.batches,
        "assignments": assignments,
        "restore_seconds": stats.restore_seconds,
        "restored_conversations": stats.restored_conversations,
        "restored_records": stats.restored_records,
        "peak_rss_kib": rss_kib("VmHWM"),
        "process_cpu_s": _process_cpu(),
    }
    if clock.profiler is not None:
        if spec.get("profile_dump"):
            clock.profiler.dump_stats(spec["profile_dump"])
        profile = pstats.Stats(clock.profiler)
        result["profile"] = {
            "total_s": round(sum(e[2] for e in profile.stats.values()), 4),  # type: ignore[attr-defined]
            "stages_s": suite_profile.attribute(profile),
            "top_self": suite_profile.top_functions(profile),
            "cumulative_s": suite_profile.cumulative(
                profile,
                {
                    "ContextProcessor.apply": (
                        "stream_ctx/core/conversation/processor.py",
                        "apply",
                    ),
                    "ContextProcessor._finalize": (
                        "stream_ctx/core/conversation/processor.py",
                        "_finalize",
                    ),
                    "DagContextAssembler.assemble": (
                        "stream_ctx/core/assembly/assembler.py",
                        "assemble",
                    ),
                    "StateDag.build": ("stream_ctx/core/assembly/dag.py", "build"),
                    "Planner.plan": ("stream_ctx/core/text/repeats.py", "plan"),
                    "TextIndex.add": ("stream_ctx/core/text/textindex.py", "add"),
                    "lean_template": ("stream_ctx/core/entries/entry.py", "lean_template"),
                    "Template.counted": ("stream_ctx/core/entries/entry.py", "counted"),
                    "tokenizer encode": ("stream_ctx/core/counting/tokenizer.py", "encode"),
                    "decode_event": ("stream_ctx/core/wire/codec.py", "decode_event"),
                    "encode_bundle": ("stream_ctx/core/wire/codec.py", "encode_bundle"),
                    "BundleAccumulator.add": ("stream_ctx/core/window/accumulator.py", "add"),
                    "ChangelogWrites.of": ("stream_ctx/shell/state/changelog.py", "of"),
                    "tokens_prefix_reused": (
                        "stream_ctx/core/assembly/prefix.py",
                        "tokens_prefix_reused",
                    ),
                },
            ),
        }
    return result


class _Assigned(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, clock: _Clock) -> None:
        self.clock = clock

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self.clock.note("assigned")


async def run_ceiling(spec: dict[str, Any]) -> dict[str, Any]:
    """aiokafka alone: consume, produce every record unchanged, await the acks, commit.

    Same clients and settings as the Runner: group consumer, getmany(max_records), producer with
    acks=all, no idempotence, the Runner's batch size, linger and request size.
    """
    settings = settings_from(spec)
    kafka = settings.kafka
    clock = _Clock(profile=False)
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka.servers,
        acks="all",
        enable_idempotence=False,
        max_batch_size=kafka.max_batch_size,
        linger_ms=kafka.linger_ms,
        max_request_size=max(kafka.max_batch_size, 2 * kafka.max_event_bytes),
    )
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka.servers,
        group_id=kafka.group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=kafka.session_timeout_ms,
        heartbeat_interval_ms=kafka.session_timeout_ms // 3,
        max_partition_fetch_bytes=max(1_048_576, kafka.max_event_bytes + 1024),
    )
    expect = int(spec["expect_events"])
    moved = 0
    await producer.start()
    consumer.subscribe([spec["input_topic"]], listener=_Assigned(clock))
    await consumer.start()
    try:
        with anyio.fail_after(spec["timeout_s"]):
            while moved < expect:
                batch = await consumer.getmany(
                    timeout_ms=_POLL_MS, max_records=settings.kafka.max_poll_records
                )
                sends = []
                offsets = {}
                for tp, records in batch.items():
                    sends += [
                        await producer.send(kafka.output_topic, r.value, key=r.key) for r in records
                    ]
                    offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "")
                    moved += len(records)
                await asyncio.gather(*sends)
                if offsets:
                    await consumer.commit(offsets)
            clock.note("done", events=moved)
    finally:
        await consumer.stop()
        await producer.stop()
    return {
        "points": clock.points,
        "events": moved,
        "peak_rss_kib": rss_kib("VmHWM"),
        "process_cpu_s": _process_cpu(),
    }


def rates(result: dict[str, Any], spawned_t: float) -> dict[str, float]:
    """events/s once joined (from the group's first assignment) and from the process's start,
    and CPU seconds from the assignment to the last commit."""
    assigned, done = result["points"]["assigned"], result["points"]["done"]
    seconds = done["t"] - assigned["t"]
    return {
        "seconds": seconds,
        "seconds_from_start": done["t"] - spawned_t,
        "events_per_s": result["events"] / seconds,
        "events_per_s_from_start": result["events"] / (done["t"] - spawned_t),
        "cpu_s": done["cpu_s"] - assigned["cpu_s"],
    }


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median events/s once joined, with every run's rates beside it."""
    ranked = sorted(runs, key=lambda x: x["events_per_s"])
    return {
        **ranked[len(ranked) // 2],
        "all_events_per_s": [x["events_per_s"] for x in runs],
        "all_events_per_s_from_start": [x["events_per_s_from_start"] for x in runs],
    }


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    spec = json.loads(sys.argv[1])
    run = run_ceiling if spec["mode"] == "ceiling" else run_runner
    result = anyio.run(run, spec)
    print(RESULT_PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
