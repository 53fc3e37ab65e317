"""The core's finalize CPU alone (no broker): CPU per event on the real-text workload, and CPU per
finalize of long conversations as max_items grows. Prints figures, asserts nothing; a minute or so.

    python benchmarks/finalize_cpu.py [--rounds 3] [--core python --core compiled]

The workloads are the suite's (suite_load: the standard shape on numpy's docstrings, and 16 long
conversations of 8 merged each). Each replay runs in a process of its own, so no memo table is
warm from another (older checkouts keep theirs process-wide); a figure is the least process CPU of
`--rounds` replays. It uses only the public API, so the same script measures an older checkout
(PYTHONPATH=that/checkout) for a side-by-side figure.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import suite_load as load

from stream_ctx import BundleConfig, ContextProcessor
from stream_ctx.core.text.engine import load_core
from stream_ctx.core.window.config import CoreChoice
from stream_ctx.core.wire.events import Event, Finalize

SEED = 2026
MAX_ITEMS = (20, 50, 200)
# The cores compared, by the name `--core` takes.
CORES: dict[str, CoreChoice] = {"python": "python", "compiled": "compiled"}


def replay_cpu(workload: str, max_items: int, core: CoreChoice) -> float:
    """Process CPU milliseconds per event (`real`) or per finalize (`long`) of one replay."""
    events: list[Event]
    if workload == "real":
        events = load.standard(300, SEED)
        per = len(events)
    else:
        events = load.merged(16, 8, SEED + 11)
        per = sum(isinstance(event, Finalize) for event in events)
    processor = ContextProcessor(BundleConfig(max_items=max_items), core=load_core(core))
    started = time.process_time()
    for position, event in enumerate(events):
        processor.apply(event, position=position)
    return (time.process_time() - started) / per * 1000


def best_of(workload: str, max_items: int, rounds: int, core: CoreChoice) -> float:
    """The least of `rounds` replays, each in a fresh process."""
    command = [sys.executable, __file__, "--one", workload, str(max_items), core]
    runs = [
        subprocess.run(command, check=True, capture_output=True, text=True) for _ in range(rounds)
    ]
    return min(float(run.stdout) for run in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--core", choices=CORES, action="append")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(replay_cpu(args.one[0], int(args.one[1]), CORES[args.one[2]]))
        return
    for name in args.core or CORES:
        core = CORES[name]
        ms = best_of("real", 20, args.rounds, core)
        print(f"{core} core, real text, max_items 20: {ms:.3f} ms CPU per event")
        first = None
        for max_items in MAX_ITEMS:
            ms = best_of("long", max_items, args.rounds, core)
            first = first or ms
            print(
                f"{core} core, long conversations, max_items {max_items}: {ms:.2f} ms CPU per"
                f" finalize ({ms / first:.1f}x max_items {MAX_ITEMS[0]})"
            )


if __name__ == "__main__":
    main()
