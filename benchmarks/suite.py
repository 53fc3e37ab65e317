"""The benchmark suite: stream-ctx against aiokafka's own ceiling, on one embedded broker.

    python benchmarks/suite.py [--quick] [--out bench-results/]

Phases, in one run: 1. ceiling (aiokafka consume -> produce passthrough) and the Quix Streams
peer; 2. the stream-ctx Runner on the same input (phases 1 and 2 on real text, then on the
original synthetic text); 3. latency at 25/50/75% of its max (`stream-ctx run` as a process);
4. how cost grows with conversations held and with max_items, and memory per held conversation;
5. restore against a bare read of the same changelog; 6. core figures and a profiled run's
per-stage CPU. Every phase but the synthetic side by side runs on real text
(suite_load.REAL_TEXT). Writes <out>/results.json, <out>/suite.md, <out>/suite.png (and,
unless --quick, docs/benchmarks/suite.md and suite.png). Prints progress. Asserts nothing.
Takes ~12 minutes on a 2-core machine (--quick: under a minute, as the smoke test runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite_core
import suite_latency
import suite_load as load
import suite_quix
import suite_report as report
from suite_child import RESULT_PREFIX, median_run, rates

from stream_ctx.core.wire.events import Event, Finalize
from stream_ctx.shell.kafka.admin import ClientKwargs, TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import embedded_broker

ROOT = Path(__file__).resolve().parent.parent
CHILD = Path(__file__).resolve().parent / "suite_child.py"
QUIX = Path(__file__).resolve().parent / "suite_quix.py"
SEED = 2026
# Real text first: the targets are judged on it. The synthetic text (the original
# workload) follows as the fixed baseline the original figures were taken on.
TEXTS = (load.REAL_TEXT, "synthetic")
# The compiled core (what `auto` runs where it is built) and its Python reference, side by side.
CORES = ("compiled", "python")
# A child that has not finished in this long is stuck (the slowest default phase takes ~60 s).
CHILD_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Sizes:
    """How big each phase is; `--quick` shrinks everything for the smoke test."""

    conversations: int = 1_000
    partitions: int = 4
    ceiling_runs: int = 3
    runner_runs: int = 3
    # The synthetic text's Runner row is the baseline beside the original figures, not a target's:
    # one run (~50 s on the loaded box) instead of three saves half of what the real text adds.
    baseline_runner_runs: int = 1
    profile_conversations: int = 300
    core_conversations: int = 150
    latency_fractions: tuple[float, ...] = (0.25, 0.5, 0.75)
    latency_seconds: float = 15.0
    held: tuple[int, ...] = (1_000, 10_000, 100_000)
    held_measured_conversations: int = 300
    max_items: tuple[int, ...] = (20, 50, 200)
    long_conversations: int = 16
    merge: int = 8
    memory_conversations: int = 200
    session_timeout_ms: int = 6_000
    core_adds: int = 20_000
    core_rounds: int = 30


QUICK = Sizes(
    conversations=30,
    ceiling_runs=1,
    runner_runs=1,
    profile_conversations=10,
    core_conversations=10,
    latency_seconds=1.5,
    held=(50, 200),
    held_measured_conversations=10,
    long_conversations=2,
    merge=4,
    memory_conversations=20,
    # Tansu answers a first join after about half the session timeout (1 s at least).
    session_timeout_ms=2_000,
    core_adds=2_000,
    core_rounds=5,
)


class Suite:
    def __init__(self, sizes: Sizes, out: Path) -> None:
        self.sizes = sizes
        self.out = out
        self.started = time.perf_counter()
        self.results: dict[str, Any] = {"sizes": asdict(sizes)}

    def progress(self, message: str) -> None:
        print(f"[{time.perf_counter() - self.started:6.1f} s] {message}", flush=True)

    async def child(self, spec: dict[str, Any], script: Path = CHILD) -> dict[str, Any]:
        """Run one measured process (benchmarks/suite_child.py) and return its result, with
        `spawned_t`: when it was started, on the same monotonic clock as its own points."""
        spec = {"session_timeout_ms": self.sizes.session_timeout_ms, "timeout_s": 300, **spec}
        spawned = time.perf_counter()
        done = await anyio.run_process(
            [sys.executable, str(script), json.dumps(spec)], check=False, stderr=None
        )
        lines = [x for x in done.stdout.decode().splitlines() if x.startswith(RESULT_PREFIX)]
        if done.returncode != 0 or not lines:
            raise RuntimeError(f"benchmark child {spec['mode']} failed ({done.returncode})")
        result: dict[str, Any] = json.loads(lines[-1][len(RESULT_PREFIX) :])
        return {**result, **rates(result, spawned)}

    def spec(self, kw: ClientKwargs, name: str, **extra: Any) -> dict[str, Any]:
        return {
            "mode": "runner",
            "bootstrap": kw["bootstrap_servers"],
            "input_topic": f"{name}.in",
            "output_topic": f"{name}.bundles",
            "dlq_topic": f"{name}.dlq",
            "group_id": f"{name}.group",
            **extra,
        }

    async def topic(self, kw: ClientKwargs, name: str, records: list[load.Record]) -> str:
        await ensure_topics(kw, [TopicSpec(name=name, partitions=self.sizes.partitions)])
        seconds = await load.produce(kw, name, records)
        self.progress(f"  produced {len(records):,} records to {name} in {seconds:.1f} s")
        return name

    # Phases 1, 2, 3 and the profiled run share one broker; phases 1 and 2 run once per text.
    async def throughput(self) -> None:
        sizes = self.sizes
        self.results["texts"] = list(TEXTS)
        self.results["real_text"] = load.REAL_TEXT
        self.results["side_by_side"] = {}
        async with embedded_broker() as broker:
            kw: ClientKwargs = {"bootstrap_servers": broker.bootstrap_servers}
            wanted = {f"c-{n:05d}" for n in range(sizes.profile_conversations)}
            for text in TEXTS:
                events = load.standard(sizes.conversations, SEED, text=text)
                self.results["side_by_side"][text] = await self.side_by_side(kw, text, events)
                if text == load.REAL_TEXT:
                    subset = [e for e in events if e.conversation_id in wanted]
            del events
            self.progress(
                f"6b. profiled Runner (cProfile, CPU clock) on part of the {load.REAL_TEXT} text"
            )
            await self.topic(kw, "profile.in", load.encode(subset))
            profiled = await self.child(
                self.spec(
                    kw,
                    "profile",
                    expect_events=len(subset),
                    profile=True,
                    profile_dump=str(self.out.resolve() / "runner.pstats"),
                )
            )
            self.results["profile"] = {
                **profiled["profile"],
                "text": load.REAL_TEXT,
                "events_profiled": len(subset),
                "seconds": profiled["points"]["done"]["t"] - profiled["points"]["assigned"]["t"],
            }
            del subset
            max_rate = self.results["side_by_side"][load.REAL_TEXT]["runner"]["events_per_s"]
            await self.latency(kw, max_rate)

    async def side_by_side(
        self, kw: ClientKwargs, text: str, events: list[Event]
    ) -> dict[str, Any]:
        """Phases 1 and 2 on one text: ceiling, Quix peer, Runner and count bound, one input."""
        sizes = self.sizes
        records = load.encode(events)
        workload = {
            "seed": SEED,
            "partitions": sizes.partitions,
            **load.describe(events, records, text),
        }
        finalizes = workload["finalizes"]
        self.progress(f"{text} text: {len(events):,} events, {finalizes:,} finalizes")
        source = await self.topic(kw, f"{text}.in", records)
        self.progress(f"1. [{text}] ceiling: aiokafka passthrough (consume -> produce -> commit)")
        passes = []
        for number in range(sizes.ceiling_runs):
            # Like each Runner run: a fresh process, group and output topic, from offset 0.
            name = f"{text}.ceiling{number}"
            await ensure_topics(kw, [TopicSpec(name=f"{name}.out", partitions=sizes.partitions)])
            done = await self.child(
                {
                    **self.spec(kw, name, mode="ceiling"),
                    "input_topic": source,
                    "output_topic": f"{name}.out",
                    "expect_events": len(records),
                }
            )
            passes.append(done)
            self.progress(f"  {done['events_per_s']:,.0f} events/s")
        ceiling = median_run(passes)
        quix = await self.quix(kw, text, source, len(records), ceiling["events_per_s"])
        rows = {}
        for core in CORES:
            rows[core] = await self.runner(kw, text, core, source, len(records), finalizes, ceiling)
        bound = suite_core.count_bound(events)

        self.progress(
            f"  exact-count bound: {bound['mb_per_s']:.1f} MB/s over "
            f"{bound['new_content_bytes_per_event']:,.0f} new content B/event = "
            f"{bound['events_per_s']:,.0f} events/s"
        )
        repeats = suite_core.repeat_bound(events)
        self.progress(
            f"  exact-repeat bound: {repeats['ms_per_window']:.2f} ms per window of "
            f"{repeats['bytes_per_window']:,.0f} B = {repeats['events_per_s']:,.0f} events/s"
        )
        return {
            "workload": workload,
            "ceiling": ceiling,
            "quix": quix,
            "runner": rows["compiled"],
            "runner_python": rows["python"],
            "count_bound": bound,
            "repeat_bound": repeats,
        }

    async def runner(
        self,
        kw: ClientKwargs,
        text: str,
        core: str,
        source: str,
        events: int,
        finalizes: int,
        ceiling: dict[str, Any],
    ) -> dict[str, Any]:
        """Phase 2: the stream-ctx Runner on the same input, with one core (`bundle.core`)."""
        self.progress(f"2. [{text}] stream-ctx Runner on the same input, {core} core")
        runs = []
        count = (
            self.sizes.runner_runs if text == load.REAL_TEXT else self.sizes.baseline_runner_runs
        )
        for number in range(count):
            # Each run is a new group (and process, and output topics), reading from the start.
            name = f"{text}.{core}{number}"
            run = await self.child(
                {
                    **self.spec(kw, name, expect_events=events, bundle={"core": core}),
                    "input_topic": source,
                }
            )
            assigned = run["points"]["assigned"]
            run.update(
                ratio_to_ceiling=run["events_per_s"] / ceiling["events_per_s"],
                expected_bundles=finalizes,
                rebalances=run["assignments"] - 1,
                restore_at_start_s=run["points"]["ready"]["t"] - assigned["t"],
            )
            runs.append(run)
            self.progress(
                f"  {run['events_per_s']:,.0f} events/s ({run['ratio_to_ceiling']:.1%} of the "
                f"ceiling), {run['bundles']:,}/{finalizes:,} bundles, CPU {run['cpu_s']:.1f} "
                f"s, peak RSS {run['peak_rss_kib'] / 1024:.0f} MiB"
            )
        return median_run(runs)

    async def quix(
        self, kw: ClientKwargs, text: str, source: str, events: int, ceiling: float
    ) -> dict[str, Any]:
        """Phase 1b: the Quix Streams peer (top-N only) on the same input, fresh groups."""
        if not suite_quix.is_available():
            message = "Quix Streams is not installed (pip install -e '.[bench]'): row skipped"
            self.progress(f"1b. {message}")
            return {"skipped": message}
        self.progress(
            f"1b. [{text}] peer: Quix Streams app, top-N window only (no dedup, no counts)"
        )
        runs = []
        for number in range(self.sizes.runner_runs):
            name = f"{text}.quix{number}"
            await ensure_topics(
                kw, [TopicSpec(name=f"{name}.out", partitions=self.sizes.partitions)]
            )
            run = await self.child(
                {
                    **self.spec(kw, name, mode="quix", expect_events=events),
                    "input_topic": source,
                    "output_topic": f"{name}.out",
                },
                script=QUIX,
            )
            runs.append(run)
            self.progress(
                f"  {run['events_per_s']:,.0f} events/s once joined "
                f"({run['events_per_s'] / ceiling:.1%} of the ceiling), "
                f"{run['events_per_s_from_start']:,.0f} from start"
            )
        return median_run(runs)

    async def latency(self, kw: ClientKwargs, max_rate: float) -> None:
        """Phase 3: `stream-ctx run` as its own process; this process offers paced load."""
        sizes = self.sizes
        self.progress("3. latency: `stream-ctx run` at fixed offered loads")
        source, sink = "latency.in", "latency.bundles"
        await ensure_topics(
            kw, [TopicSpec(name=t, partitions=sizes.partitions) for t in (source, sink)]
        )
        levels = [
            suite_latency.level(
                n, fraction, max_rate=max_rate, seconds=sizes.latency_seconds, seed=SEED
            )
            for n, fraction in enumerate(sizes.latency_fractions)
        ]
        config = suite_latency.write_config(
            self.out / "latency-run.toml",
            kw,
            source=source,
            sink=sink,
            session_timeout_ms=sizes.session_timeout_ms,
        )
        results, exit_code = await suite_latency.run_levels(
            kw,
            config=config,
            log_path=self.out / "latency-run.log",
            source=source,
            sink=sink,
            partitions=sizes.partitions,
            warm=load.renamed(load.standard(1, SEED + 99), "warm-"),
            levels=levels,
            progress=self.progress,
        )
        self.results["latency"] = {
            "max_events_per_s": max_rate,
            "levels": results,
            "at_half": min(results, key=lambda r: abs(r["fraction_of_max"] - 0.5)),
            "runner_exit_code": exit_code,
        }

    def core(self) -> None:
        """Phase 6a: the core alone: adds/s, finalize time, and apply times on the workload."""
        sizes = self.sizes
        self.progress("6a. core: adds/s, finalize time per bundle")
        core = suite_core.core_figures(
            adds=sizes.core_adds,
            rounds=sizes.core_rounds,
            conversations=sizes.core_conversations,
            seed=SEED + 7,
        )
        core["cpu_ms_per_event"] = {
            name: suite_core.replay_cpu_ms(sizes.core_conversations, SEED + 7, core=name)
            for name in CORES
        }
        self.results["core"] = core
        self.progress(
            f"  adds/s {core['adds_per_s']['20']:,.0f} (max_items 20); finalize 20 x 1 KB median "
            f"{core['finalize_20x1KB_ms']['median']:.2f} ms; workload finalize median "
            f"{core['workload_finalize_ms']['median']:.2f} ms; CPU per event "
            + ", ".join(f"{ms:.3f} ms ({n} core)" for n, ms in core["cpu_ms_per_event"].items())
        )

    def memory(self) -> None:
        """Phase 4c: bytes a ContextProcessor holds per open conversation (tracemalloc)."""
        n = self.sizes.memory_conversations
        self.progress(f"4c. memory per held conversation ({n} conversations, none ended)")
        memory = suite_core.held_memory(conversations=n, seed=SEED + 3)
        self.results["memory"] = memory
        self.progress(
            f"  {memory['bytes_per_conversation']:,.0f} B per conversation holding "
            f"{memory['content_bytes_per_conversation']:,.0f} B of content; process-wide caches:"
            f" +{memory['token_cache_bytes_per_conversation']:,.0f} B token counts, "
            f"+{memory['memo_cache_bytes_per_conversation']:,.0f} B memo tables"
        )

    async def held(self) -> None:
        """Phases 4a and 5: N conversations held, restored by a new member, then more load.

        A first Runner processes one small retrieval per conversation and stops; the changelog
        is read bare; a second Runner in the same group restores the N conversations and then
        processes the same measured stream (standard conversations among the held ids) at
        every N, timed from the end of its restore.
        """
        sizes = self.sizes
        measured = load.encode(
            load.standard(sizes.held_measured_conversations, SEED + 5, is_ending=False)
        )
        points = []
        async with embedded_broker() as broker:
            kw: ClientKwargs = {"bootstrap_servers": broker.bootstrap_servers}
            for held in sizes.held:
                self.progress(f"4a. {held:,} conversations held")
                warmup, content = load.held_warmup(held, SEED + held)
                name = f"held{held}"
                await self.topic(kw, f"{name}.in", warmup)
                first = await self.child(self.spec(kw, name, expect_events=len(warmup)))
                p = first["points"]
                changelog = f"{name}.in.{name}.group.changelog"
                bare = await load.bare_consume(kw, changelog, sizes.partitions)
                seconds = await load.produce(kw, f"{name}.in", measured)
                self.progress(f"  produced {len(measured):,} measured records in {seconds:.1f} s")
                second = await self.child(self.spec(kw, name, expect_events=len(measured)))
                q = second["points"]
                restored = max(1, second["restored_conversations"])
                point = {
                    "conversations_held": held,
                    "warmup_events_per_s": first["events"] / (p["done"]["t"] - p["assigned"]["t"]),
                    "rss_per_conversation_bytes": (p["done"]["rss_kib"] - p["assigned"]["rss_kib"])
                    * 1024
                    / held,
                    "warmup_content_bytes_per_conversation": content / held,
                    "measured_events": second["events"],
                    "events_per_s": second["events"] / (q["done"]["t"] - q["ready"]["t"]),
                    "peak_rss_kib": second["peak_rss_kib"],
                    "rebalances": first["assignments"] + second["assignments"] - 2,
                    "restore": {
                        "conversations": second["restored_conversations"],
                        "records": second["restored_records"],
                        "restore_seconds": second["restore_seconds"],
                        "bare_consume_seconds": bare["seconds"],
                        "bare_consume_records": bare["records"],
                        "ratio": second["restore_seconds"] / bare["seconds"],
                        "rss_per_conversation_bytes": (
                            q["ready"]["rss_kib"] - q["assigned"]["rss_kib"]
                        )
                        * 1024
                        / restored,
                    },
                }
                points.append(point)
                r = point["restore"]
                self.progress(
                    f"  restore: {r['conversations']:,} conversations from {r['records']:,} "
                    f"records in {r['restore_seconds']:.2f} s; bare consume "
                    f"{r['bare_consume_seconds']:.2f} s ({r['ratio']:.2f}x)"
                )
                self.progress(
                    f"  then {point['events_per_s']:,.0f} events/s over {second['events']:,} "
                    f"events with {held:,} held; RSS {point['rss_per_conversation_bytes']:,.0f} B "
                    "per held conversation"
                )
        self.results["held"] = points

    async def max_items(self) -> None:
        """Phase 4b: throughput as the window grows (long conversations, many distinct items)."""
        sizes = self.sizes
        events = load.merged(sizes.long_conversations, sizes.merge, SEED + 11)
        finalizes = sum(isinstance(e, Finalize) for e in events)
        points = []
        async with embedded_broker() as broker:
            kw: ClientKwargs = {"bootstrap_servers": broker.bootstrap_servers}
            await self.topic(kw, "long.in", load.encode(events))
            for max_items in sizes.max_items:
                self.progress(f"4b. max_items {max_items}")
                run = await self.child(
                    {
                        **self.spec(kw, f"long{max_items}", expect_events=len(events)),
                        "input_topic": "long.in",
                        "bundle": {"max_items": max_items},
                    }
                )
                p = run["points"]
                seconds = p["done"]["t"] - p["assigned"]["t"]
                points.append(
                    {
                        "max_items": max_items,
                        "events": run["events"],
                        "bundles": run["bundles"],
                        "events_per_s": run["events"] / seconds,
                        "bundles_per_s": run["bundles"] / seconds,
                        "rebalances": run["assignments"] - 1,
                    }
                )
                points[-1]["repeat_bound"] = suite_core.repeat_bound(events, max_items=max_items)
                self.progress(
                    f"  {points[-1]['events_per_s']:,.0f} events/s; windows of "
                    f"{points[-1]['repeat_bound']['bytes_per_window']:,.0f} B"
                )
        self.results["max_items"] = {
            "conversations": sizes.long_conversations,
            "events": len(events),
            "finalizes": finalizes,
            "points": points,
        }


async def main_async(sizes: Sizes, out: Path, write_docs: bool) -> None:
    suite = Suite(sizes, out)
    suite.results["machine"] = report.machine()
    suite.results["load_average_start"] = os.getloadavg()
    await suite.throughput()
    suite.core()
    suite.memory()
    await suite.held()
    await suite.max_items()
    suite.results["load_average_end"] = os.getloadavg()
    suite.results["elapsed_s"] = time.perf_counter() - suite.started
    suite.results["settings"] = report.figure_settings(suite.results)
    suite.results["targets"] = report.targets(suite.results)
    (out / "results.json").write_text(json.dumps(suite.results, indent=2) + "\n")
    markdown = report.markdown(suite.results)
    (out / "suite.md").write_text(markdown)
    report.chart(suite.results, out / "suite.png")
    if write_docs:
        docs = ROOT / "docs" / "benchmarks"
        (docs / "suite.md").write_text(markdown)
        report.chart(suite.results, docs / "suite.png")
    print()
    print(report.summary(suite.results), flush=True)
    suite.progress(f"done; results in {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="results folder")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks/ alone")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sizes = QUICK if args.quick else Sizes()
    anyio.run(main_async, sizes, args.out, not (args.quick or args.no_docs))


if __name__ == "__main__":
    main()
