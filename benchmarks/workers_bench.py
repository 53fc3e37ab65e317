"""`stream-ctx run --workers N` against N = 1, in paired alternating runs on one broker.

    python benchmarks/workers_bench.py [--conversations 600] [--pairs 3] [--workers 2]

Each run drains the same backlog (the suite's workload) as a fresh group with fresh output
topics: `stream-ctx run --workers N` is launched, and this process times the bundles' arrival.
events/s *once joined* runs from the first bundle to the last, *from start* from the launch to
the last; CPU is the whole process tree's (imports, join and drain included). Runs alternate so
that load from other work on the machine falls on both alike; the spread is printed. With the
defaults (600 conversations, 3 pairs) it takes several minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import itertools
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite_load as load
from suite_latency import CLI_STOP_TIMEOUT_S, write_config

from stream_ctx.core.wire.events import Finalize
from stream_ctx.corpora.workload import TEXTS
from stream_ctx.shell.kafka.admin import ClientKwargs, TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import embedded_broker

SEED = 2026
PARTITIONS = 4
# Tansu answers a first join after about half of it; the suite uses the same.
SESSION_TIMEOUT_MS = 6_000
# A drain of the default backlog takes well under a minute even on one loaded core.
DRAIN_TIMEOUT_S = 300.0
_RUN = (sys.executable, "-m", "stream_ctx.shell.commands.cli", "run")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def one_run(
    kw: ClientKwargs, name: str, workers: int, *, events: int, ids: list[str], out: Path
) -> dict[str, Any]:
    """Launch `stream-ctx run --workers N` on the backlog; time it until every bundle is out."""
    sink = f"{name}.bundles"
    await ensure_topics(kw, [TopicSpec(name=sink, partitions=PARTITIONS)])
    config = write_config(
        out / f"{name}.toml",
        kw,
        source="backlog.in",
        sink=sink,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        group_id=f"{name}.group",
        dlq_topic=f"{name}.dlq",
    )
    collector, stop = load.Collector(), anyio.Event()
    cpu = _children_cpu_s()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(collector.run, kw, sink, PARTITIONS, stop)
        launched = time.perf_counter()
        with (out / f"{name}.log").open("wb") as log:
            process = await anyio.open_process(
                [*_RUN, "--config", str(config), "--workers", str(workers)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            is_complete = await collector.wait_for(ids, timeout_s=DRAIN_TIMEOUT_S)
        finally:
            process.send_signal(signal.SIGTERM)
            with anyio.move_on_after(CLI_STOP_TIMEOUT_S):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            stop.set()
    arrived = sorted(collector.arrived[i] for i in ids if i in collector.arrived)
    return {
        "workers": workers,
        "is_complete": is_complete,
        "bundles": len(arrived),
        "events_per_s": events / (arrived[-1] - arrived[0]),
        "events_per_s_from_start": events / (arrived[-1] - launched),
        "cpu_ms_per_event": (_children_cpu_s() - cpu) / events * 1000,
        # Bundles leave as they are built, or in bursts at the end of each fetch batch.
        "largest_gap_ms": max(b - a for a, b in itertools.pairwise(arrived)) * 1000,
        "exit_code": process.returncode,
    }


async def main_async(conversations: int, pairs: int, workers: int, text: str) -> None:
    generated = load.standard(conversations, SEED, text=text)
    ids = [i for i in load.bundle_ids(generated) if i is not None]
    out = Path(tempfile.mkdtemp(prefix="workers-bench-"))
    runs: dict[int, list[dict[str, Any]]] = {1: [], workers: []}
    print(f"{len(generated):,} events, {sum(isinstance(e, Finalize) for e in generated):,} bundles")
    async with embedded_broker() as broker:
        kw: ClientKwargs = {"bootstrap_servers": broker.bootstrap_servers}
        await ensure_topics(kw, [TopicSpec(name="backlog.in", partitions=PARTITIONS)])
        await load.produce(kw, "backlog.in", load.encode(generated))
        for pair in range(pairs):
            for count in (1, workers) if pair % 2 == 0 else (workers, 1):
                run = await one_run(
                    kw, f"p{pair}w{count}", count, events=len(generated), ids=ids, out=out
                )
                runs[count].append(run)
                print(
                    f"pair {pair + 1}, --workers {count}: {run['events_per_s']:,.0f} events/s once "
                    f"joined, {run['events_per_s_from_start']:,.0f} from start, "
                    f"{run['cpu_ms_per_event']:.2f} CPU ms/event, largest gap between bundles "
                    f"{run['largest_gap_ms']:,.0f} ms, {run['bundles']}/{len(ids)} "
                    f"bundles, exit {run['exit_code']}",
                    flush=True,
                )
    for count, found in runs.items():
        rates = [r["events_per_s"] for r in found]
        print(
            f"--workers {count}: median {statistics.median(rates):,.0f} events/s once joined "
            f"(runs {', '.join(f'{x:,.0f}' for x in rates)})"
        )
    ratios = [
        w["events_per_s"] / o["events_per_s"] for w, o in zip(runs[workers], runs[1], strict=True)
    ]
    print(
        f"paired ratio --workers {workers} / 1: median {statistics.median(ratios):.2f} "
        f"(pairs {', '.join(f'{x:.2f}' for x in ratios)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=600)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    # The README's figures were taken on the synthetic text.
    parser.add_argument("--text", choices=TEXTS, default="synthetic")
    args = parser.parse_args()
    anyio.run(main_async, args.conversations, args.pairs, args.workers, args.text)


if __name__ == "__main__":
    main()
