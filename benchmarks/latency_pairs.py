"""Latency of `stream-ctx run` variants side by side: paired runs on one broker, same levels.

    python benchmarks/latency_pairs.py --max-rate 271 --variant before:rev=3f68e63 --variant now
    python benchmarks/latency_pairs.py --max-rate 271 --pairs 3 \\
        --variant wait10:kafka.fetch_max_wait_ms=10 --variant wait5:kafka.fetch_max_wait_ms=5

A variant is `label[:key=value,...]`: `rev=<commit>` runs that commit's `stream_ctx` package
(from `git archive`), `tree=<dir>` the package under a directory, `order=random|staggered` the
levels' order of events (default `--order`); other keys are config keys
("table.key", a JSON value or text). Each pair runs every variant once on the same seeded
levels, in alternating order, so a load that moves during the run moves both. Prints each run
and, per variant, the median of its p50s and p99s; with `--stages`, where each run's bundles
spent their time (benchmarks/latency_stages.py). Takes pairs x variants x levels x the level
length (`--seconds`), plus ~10 s per run to start: 10-20 minutes for a typical comparison.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import latency_stages
import suite_latency
import suite_load as load

from stream_ctx.shell.kafka.admin import ClientKwargs, TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import embedded_broker

ROOT = Path(__file__).resolve().parent.parent
# Its sitecustomize.py times a run's stages when LATENCY_PROBE_DIR is set.
PROBE = Path(__file__).resolve().parent / "latency_probe"


@dataclass(frozen=True)
class Variant:
    """One way of running `stream-ctx run`: a commit's package (or this tree's), and settings."""

    label: str
    rev: str | None = None
    tree: Path | None = None
    order: str | None = None
    settings: dict[str, object] = field(default_factory=dict)


def parse_variant(text: str) -> Variant:
    """`label[:key=value,...]`; `rev` names a commit, the other keys are config keys."""
    label, _, spec = text.partition(":")
    rev, tree, order, settings = None, None, None, {}
    for pair in filter(None, spec.split(",")):
        key, sep, raw = pair.partition("=")
        if not sep:
            raise SystemExit(f"--variant {text!r}: {pair!r} is not key=value")
        if key == "rev":
            rev = raw
            continue
        if key == "tree":
            tree = Path(raw)
            continue
        if key == "order":
            order = raw
            continue
        try:
            settings[key] = json.loads(raw)
        except json.JSONDecodeError:
            settings[key] = raw  # plain text, e.g. zstd
    return Variant(label, rev, tree, order, settings)


def export_tree(rev: str, into: Path) -> Path:
    """The `stream_ctx` package of commit `rev`, unpacked under `into`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "stream_ctx"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


async def run_pairs(
    variants: list[Variant],
    *,
    max_rate: float,
    fractions: list[float],
    seconds: float,
    pairs: int,
    order: str,
    out: Path,
    probe: bool,
) -> dict[str, list[dict[str, Any]]]:
    """Every variant once per pair, ABBA order, on fresh topics and group; levels by variant.
    With `probe`, each run writes its stage timestamps under `out`/stages."""
    from suite import SEED

    trees = {
        v.label: export_tree(v.rev, out / f"tree-{v.label}") if v.rev is not None else v.tree
        for v in variants
    }
    found: dict[str, list[dict[str, Any]]] = {v.label: [] for v in variants}
    async with embedded_broker() as broker:
        kw: ClientKwargs = {"bootstrap_servers": broker.bootstrap_servers}
        run = 0
        for pair in range(pairs):
            for variant in variants if pair % 2 == 0 else variants[::-1]:
                run += 1
                levels = [
                    suite_latency.level(
                        n,
                        f,
                        max_rate=max_rate,
                        seconds=seconds,
                        seed=SEED + 1000 * pair,
                        order=variant.order or order,
                    )
                    for n, f in enumerate(fractions)
                ]
                tree = trees.get(variant.label)
                python_path = [*([tree] if tree else []), *([PROBE] if probe else [])]
                os.environ["LATENCY_PROBE_LABEL"] = f"{run} {variant.label}"
                results = await _one_run(
                    kw, variant, run, levels, out=out, python_path=python_path, broker=broker.pid
                )
                found[variant.label].extend(results)
    return found


async def _one_run(
    kw: ClientKwargs,
    variant: Variant,
    run: int,
    levels: list[suite_latency.Level],
    *,
    out: Path,
    python_path: list[Path],
    broker: int,
) -> list[dict[str, Any]]:
    from suite import SEED, Sizes

    source, sink = f"pairs.{run}.in", f"pairs.{run}.bundles"
    await ensure_topics(
        kw, [TopicSpec(name=t, partitions=Sizes.partitions) for t in (source, sink)]
    )
    config = suite_latency.write_config(
        out / f"run-{run}.toml",
        kw,
        source=source,
        sink=sink,
        session_timeout_ms=Sizes.session_timeout_ms,
        group_id=f"pairs.{run}",
        dlq_topic=f"pairs.{run}.dlq",
        settings=variant.settings,
    )
    results, exit_code = await suite_latency.run_levels(
        kw,
        config=config,
        log_path=out / f"run-{run}.log",
        source=source,
        sink=sink,
        partitions=Sizes.partitions,
        warm=load.renamed(load.standard(1, SEED + 99), "warm-"),
        levels=levels,
        progress=lambda line: print(f"run {run} {variant.label}:{line}", flush=True),
        python_path=python_path,
        broker_pid=broker,
    )
    if exit_code != 0:
        print(f"run {run} {variant.label}: exit code {exit_code}, see {out}/run-{run}.log")
    return results


def summary(found: dict[str, list[dict[str, Any]]]) -> str:
    """Per variant and level: the median over its runs of p50, p99 and max."""
    rows = [
        "| variant | load | runs | p50 ms | p99 ms | max ms | runner CPU | broker CPU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, levels in found.items():
        for fraction in sorted({lv["fraction_of_max"] for lv in levels}):
            at = [lv for lv in levels if lv["fraction_of_max"] == fraction]
            med = {k: statistics.median(lv[k] for lv in at) for k in _FIGURES}
            rows.append(
                f"| {label} | {fraction:.0%} | {len(at)} | {med['latency_ms_p50']:.1f} | "
                f"{med['latency_ms_p99']:.1f} | {med['latency_ms_max']:.1f} | "
                f"{med['runner_cpu_share']:.0%} | {med['broker_cpu_share']:.0%} |"
            )
    return "\n".join(rows)


_FIGURES = (
    "latency_ms_p50",
    "latency_ms_p99",
    "latency_ms_max",
    "runner_cpu_share",
    "broker_cpu_share",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-rate", type=float, required=True, help="events/s taken as max")
    parser.add_argument("--variant", type=parse_variant, action="append", required=True)
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.5])
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each level")
    parser.add_argument("--pairs", type=int, default=2, help="runs of each variant")
    parser.add_argument("--order", choices=("staggered", "random"), default="staggered")
    parser.add_argument(
        "--stages", action="store_true", help="time each run's stages (benchmarks/latency_probe)"
    )
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="latency-pairs-"))
    if args.stages:
        (out / "stages").mkdir()
        os.environ["LATENCY_PROBE_DIR"] = str(out / "stages")
    found = anyio.run(
        lambda: run_pairs(
            args.variant,
            max_rate=args.max_rate,
            fractions=args.fractions,
            seconds=args.seconds,
            pairs=args.pairs,
            order=args.order,
            out=out,
            probe=args.stages,
        )
    )
    print(summary(found))
    if args.stages:
        print(latency_stages.table(sorted((out / "stages").glob("*.jsonl"))))


if __name__ == "__main__":
    main()
