"""Core benchmark: adds/s, finalize time per bundle, and measured token savings. Asserts nothing.

python benchmarks/core_bench.py [--conversations 300]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from stream_ctx import (
    BundleAccumulator,
    BundleConfig,
    ContextProcessor,
    Finalize,
    Retrieval,
    RetrievedItem,
)
from stream_ctx.workload import WorkloadShape, generate

_DAY_MS = 86_400_000
_NOW_MS = 1_764_480_000_000


def _items(rng: random.Random, count: int, chars: int) -> list[RetrievedItem]:
    words = [f"w{n}" for n in range(2_000)]
    return [
        RetrievedItem(
            id=f"item-{n}",
            kind="chunk",
            salience=round(rng.uniform(0.2, 1.0), 3),
            content=" ".join(rng.choice(words) for _ in range(chars // 5))[:chars],
            created_at=_NOW_MS - rng.randint(0, 60 * _DAY_MS),
            attributes={"language": rng.choice(["rust", "go"]), "domain": "web-api"},
            tags=rng.sample(["a", "b", "c", "d"], 2),
        )
        for n in range(count)
    ]


def adds_per_second(max_items: int, adds: int = 20_000) -> float:
    """Offer `adds` distinct items to one window of `max_items` (full after the first N)."""
    rng = random.Random(1)
    window = BundleAccumulator(BundleConfig(max_items=max_items))
    offered = _items(rng, adds, 64)
    started = time.perf_counter()
    for n, item in enumerate(offered):
        window.add(item, now_ms=_NOW_MS + n)
    return adds / (time.perf_counter() - started)


def finalize_ms(items: int = 20, chars: int = 1_000, rounds: int = 30) -> tuple[float, float]:
    """Median and p95 time of a finalize (dedup + render + token count) of `items` ~1 KB items;
    each round holds fresh content, so token counts are not served from the cache."""
    times = []
    for r in range(rounds):
        rng = random.Random(100 + r)
        processor = ContextProcessor(BundleConfig(max_items=items))
        processor.apply(_retrieval(rng, items, chars), position=0)
        started = time.perf_counter()
        processor.apply(Finalize(conversation_id="c", event_id="f", ts=_NOW_MS), position=1)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def _retrieval(rng: random.Random, items: int, chars: int) -> Retrieval:
    return Retrieval(conversation_id="c", event_id="r", ts=_NOW_MS, items=_items(rng, items, chars))


def savings(conversations: int) -> tuple[int, int, int]:
    """Bundles, tokens_naive and tokens_bundle summed over the overlapping multi-turn workload."""
    events = generate(2026, WorkloadShape(conversations=conversations))
    processor = ContextProcessor(BundleConfig())
    bundles = naive = bundled = 0
    for position, event in enumerate(events):
        bundle = processor.apply(event, position=position)
        if bundle is not None:
            bundles += 1
            naive += bundle.stats.tokens_naive
            bundled += bundle.stats.tokens_bundle
    return bundles, naive, bundled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=300)
    args = parser.parse_args()
    for max_items in (20, 1_000):
        print(f"adds/s at max_items={max_items}: {adds_per_second(max_items):,.0f}", flush=True)
    median, p95 = finalize_ms()
    print(f"finalize of 20 items of ~1 KB: median {median:.2f} ms, p95 {p95:.2f} ms", flush=True)
    bundles, naive, bundled = savings(args.conversations)
    print(
        f"workload ({args.conversations} conversations, {bundles} bundles): tokens_naive {naive:,}"
        f" -> tokens_bundle {bundled:,}; ratio {bundled / naive:.3f} ({1 - bundled / naive:.1%} "
        f"fewer tokens, lossless, cl100k_base)"
    )


if __name__ == "__main__":
    main()
