"""Phase 3 of benchmarks/suite.py: `stream-ctx run` as its own process under paced load.

Alone: benchmarks/latency_alone.py; variants side by side (commits, settings, orders) in paired
runs: benchmarks/latency_pairs.py.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import suite_load as load
from anyio.abc import Process

from stream_ctx.core.wire.events import Event
from stream_ctx.shell.kafka.admin import ClientKwargs

# SIGTERM gives `stream-ctx run` 30 s to drain; past 40 s it is hung.
CLI_STOP_TIMEOUT_S = 40.0
# The first bundle needs the group join (~3 s here) and the tokenizer load; a minute is a hang.
WARM_TIMEOUT_S = 60.0
# A level's last bundles come within seconds of its last event unless the runner fell far behind.
LEVEL_TIMEOUT_S = 120.0

Level = tuple[float, float, Sequence[Event]]
"""(fraction of max, offered events/s, events)."""


def write_config(
    path: Path,
    kw: ClientKwargs,
    *,
    source: str,
    sink: str,
    session_timeout_ms: int,
    group_id: str = "latency.group",
    dlq_topic: str = "latency.dlq",
    settings: Mapping[str, object] | None = None,
) -> Path:
    """A `stream-ctx run` config: the [kafka] keys that place it, then `settings` ("table.key":
    value, for comparisons); everything else at its default."""
    tables: dict[str, dict[str, object]] = {
        "kafka": {
            "bootstrap_servers": kw["bootstrap_servers"],
            "group_id": group_id,
            "input_topics": [source],
            "output_topic": sink,
            "dlq_topic": dlq_topic,
            "session_timeout_ms": session_timeout_ms,
        }
    }
    for dotted, value in (settings or {}).items():
        table, _, key = dotted.partition(".")
        tables.setdefault(table, {})[key] = value
    # JSON's strings, numbers, booleans and lists of them are TOML values too.
    path.write_text(
        "".join(
            f"[{table}]\n"
            + "".join(f"{key} = {json.dumps(value)}\n" for key, value in keys.items())
            for table, keys in tables.items()
        ),
        encoding="utf-8",
    )
    return path


async def open_run(config: Path, log: BinaryIO, env: Mapping[str, str]) -> Process:
    """`stream-ctx run --config CONFIG` as a process of its own, its output into `log`."""
    return await anyio.open_process(
        [sys.executable, "-m", "stream_ctx.shell.commands.cli", "run", "--config", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )


async def run_levels(
    kw: ClientKwargs,
    *,
    config: Path,
    log_path: Path,
    source: str,
    sink: str,
    partitions: int,
    warm: Sequence[Event],
    levels: Sequence[Level],
    progress: Callable[[str], None],
    python_path: Sequence[Path] = (),
    broker_pid: int | None = None,
) -> tuple[list[dict[str, Any]], int | None]:
    """Start `stream-ctx run` (with `python_path` first on its PYTHONPATH: another commit's
    `stream_ctx`, a probe), offer each level's events paced, stop it; (levels, exit code)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_CTX_")}
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join(map(str, python_path))
    collector, stop = load.Collector(), anyio.Event()
    results: list[dict[str, Any]] = []
    with log_path.open("wb") as log:
        process = await open_run(config, log, env)
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(collector.run, kw, sink, partitions, stop)
            # Joined, restored and tokenizer loaded once a first bundle comes back.
            await load.offered_load(
                kw, source, warm, collector, rate=1000, timeout_s=WARM_TIMEOUT_S
            )
            for fraction, rate, events in levels:
                cpu, own_cpu = process_cpu(process.pid), time.process_time()
                broker_cpu = process_cpu(broker_pid) if broker_pid is not None else 0.0
                level = await load.offered_load(
                    kw, source, events, collector, rate=rate, timeout_s=LEVEL_TIMEOUT_S
                )
                level["fraction_of_max"] = fraction
                level["runner_cpu_s"] = process_cpu(process.pid) - cpu
                level["runner_cpu_share"] = level["runner_cpu_s"] / level["send_seconds"]
                if broker_pid is not None:  # the broker's work for this runner's requests
                    level["broker_cpu_share"] = (process_cpu(broker_pid) - broker_cpu) / level[
                        "send_seconds"
                    ]
                # The load generator and bundle consumer share the machine with the runner.
                level["generator_cpu_share"] = (time.process_time() - own_cpu) / level[
                    "send_seconds"
                ]
                results.append(level)
                progress(
                    f"  {fraction:.0%} of max ({rate:,.0f} events/s): p50 "
                    f"{level['latency_ms_p50']:.1f} ms, p99 {level['latency_ms_p99']:.1f} ms, "
                    f"max {level['latency_ms_max']:.1f} ms over {level['finalizes']} bundles"
                )
            stop.set()
    finally:
        with anyio.CancelScope(shield=True):
            process.send_signal(signal.SIGTERM)
            with anyio.move_on_after(CLI_STOP_TIMEOUT_S):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
    return results, process.returncode


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process we started, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def level(
    n: int,
    fraction: float,
    *,
    max_rate: float,
    seconds: float,
    seed: int,
    order: str = "staggered",
) -> Level:
    """Level `n`: `fraction` of `max_rate` for about `seconds`, its own conversations, mixed
    in `order` (`staggered` or `random`, see those functions)."""
    rate = max(1.0, fraction * max_rate)
    # The standard workload has 11 events per conversation.
    conversations = max(3, math.ceil(rate * seconds / 11))
    events = load.renamed(load.standard(conversations, seed + 100 + n), f"L{n}-")
    if order == "random":
        return fraction, rate, load.interleaved(events, n)
    # A conversation stays under way for about a second at this rate.
    open_conversations = max(1, math.ceil(rate / 11))
    return fraction, rate, staggered(events, n, open_conversations=open_conversations)


def staggered(events: Sequence[Event], seed: int, *, open_conversations: int) -> list[Event]:
    """Conversations that start one after another, `open_conversations` under way at a time.

    Each step takes the next event of one open conversation, drawn at random; one that ends is
    replaced by the next. `load.interleaved` keeps every conversation open from the first event
    to the last, so the finalizes and ends crowd the last third of the stream; here the mix of
    kinds stays that of a steady stream (conversations starting at a steady rate), except over
    the last `open_conversations`.
    """
    streams: dict[str, list[Event]] = {}
    for event in events:
        streams.setdefault(event.conversation_id, []).append(event)
    waiting = [stream[::-1] for stream in reversed(streams.values())]  # both popped from the end
    rng = random.Random(seed)
    under_way = [waiting.pop() for _ in range(min(open_conversations, len(waiting)))]
    mixed: list[Event] = []
    while under_way:
        n = rng.randrange(len(under_way))
        mixed.append(under_way[n].pop())
        if under_way[n]:
            continue
        if waiting:  # ended: the next conversation starts
            under_way[n] = waiting.pop()
        else:
            under_way[n] = under_way[-1]
            under_way.pop()
    return mixed
