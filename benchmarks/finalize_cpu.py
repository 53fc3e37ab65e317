"""The core's finalize CPU alone (no broker): CPU per event on the real-text workload, and CPU per
finalize of long conversations as max_items grows. Prints figures, asserts nothing; a minute or so.

    python benchmarks/finalize_cpu.py [--rounds 3]

The workloads are the suite's (suite_load: the standard shape on numpy's docstrings, and 16 long
conversations of 8 merged each). Each figure is the best of `--rounds` replays into a fresh
processor, in process CPU time. It uses only the public API, so the same script measures an older
checkout (PYTHONPATH=that/checkout) for a side-by-side figure.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import suite_load as load

from stream_ctx import BundleConfig, ContextProcessor
from stream_ctx.core.events import Event, Finalize

SEED = 2026
MAX_ITEMS = (20, 50, 200)


def replay_cpu(events: Sequence[Event], config: BundleConfig, rounds: int) -> float:
    """The least process CPU seconds a fresh processor takes over `events`."""
    best = float("inf")
    for _ in range(rounds):
        processor = ContextProcessor(config)
        started = time.process_time()
        for position, event in enumerate(events):
            processor.apply(event, position=position)
        best = min(best, time.process_time() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    standard = load.standard(300, SEED)
    seconds = replay_cpu(standard, BundleConfig(), rounds)
    print(f"real text, max_items 20: {seconds / len(standard) * 1000:.3f} ms CPU per event")
    merged = load.merged(16, 8, SEED + 11)
    finalizes = sum(isinstance(event, Finalize) for event in merged)
    per_finalize = {}
    for max_items in MAX_ITEMS:
        seconds = replay_cpu(merged, BundleConfig(max_items=max_items), rounds)
        per_finalize[max_items] = seconds / finalizes * 1000
        print(
            f"long conversations, max_items {max_items}: {per_finalize[max_items]:.2f} ms CPU per"
            f" finalize ({per_finalize[max_items] / per_finalize[MAX_ITEMS[0]]:.1f}x max_items"
            f" {MAX_ITEMS[0]})"
        )


if __name__ == "__main__":
    main()
