"""Phase 3 of benchmarks/suite.py alone: `stream-ctx run` as its own process under paced load,
on a fresh embedded broker, at `--fractions` of a given max rate (before/after comparisons).

    python benchmarks/latency_alone.py --max-rate 1400

Each level lasts `--seconds`; the run takes about the number of levels times that, plus ~10 s
to start. Variants side by side (commits, settings, orders) in paired runs:
benchmarks/latency_pairs.py.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

import anyio
import suite_latency as latency
import suite_load as load
from suite import SEED, Sizes

from stream_ctx.shell.kafka.admin import ClientKwargs, TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import embedded_broker


async def measure_alone(
    max_rate: float, fractions: Sequence[float], seconds: float, order: str
) -> None:
    """Phase 3 on its own broker, at `fractions` of a given max (before/after comparisons)."""
    partitions, session_timeout_ms = Sizes.partitions, Sizes.session_timeout_ms
    out = Path(tempfile.mkdtemp(prefix="suite-latency-"))
    async with embedded_broker() as broker:
        kw: ClientKwargs = {"bootstrap_servers": broker.bootstrap_servers}
        source, sink = "latency.in", "latency.bundles"
        await ensure_topics(kw, [TopicSpec(name=t, partitions=partitions) for t in (source, sink)])
        levels = [
            latency.level(n, fraction, max_rate=max_rate, seconds=seconds, seed=SEED, order=order)
            for n, fraction in enumerate(fractions)
        ]
        config = latency.write_config(
            out / "latency-run.toml",
            kw,
            source=source,
            sink=sink,
            session_timeout_ms=session_timeout_ms,
        )
        await latency.run_levels(
            kw,
            config=config,
            log_path=out / "latency-run.log",
            source=source,
            sink=sink,
            partitions=partitions,
            warm=load.renamed(load.standard(1, SEED + 99), "warm-"),
            levels=levels,
            progress=lambda line: print(line, flush=True),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="p50/p99 finalize-to-bundle of `stream-ctx run`")
    parser.add_argument("--max-rate", type=float, required=True, help="events/s taken as max")
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.5])
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each level")
    parser.add_argument("--order", choices=("staggered", "random"), default="staggered")
    args = parser.parse_args()
    anyio.run(measure_alone, args.max_rate, args.fractions, args.seconds, args.order)


if __name__ == "__main__":
    main()
