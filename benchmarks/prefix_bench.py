"""Prompt-cache benchmark: prefix reuse and prompt cost per rendering order, side by side.

Price model: an input token costs 1 unit; a token served from the provider's prompt cache (the
prefix identical to the previous request's) costs 0.1. Asserts nothing.

    python benchmarks/prefix_bench.py [--conversations 150]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from stream_ctx import BundleConfig, ContextProcessor
from stream_ctx.core.events import RenderOrder
from stream_ctx.workload import WorkloadShape, generate

CACHED_PRICE = 0.1
ORDERS: tuple[RenderOrder, ...] = ("priority", "stable", "edges")


@dataclass
class OrderResult:
    order: str
    bundles: int = 0
    tokens: int = 0
    naive: int = 0
    reused: int = 0
    share_sum: float = 0.0

    @property
    def cost(self) -> float:
        return (self.tokens - self.reused) + CACHED_PRICE * self.reused


def measure(order: RenderOrder, conversations: int) -> OrderResult:
    shape = WorkloadShape(
        conversations=conversations,
        retrievals_per_conversation=16,
        finalize_every=1,
        items_per_retrieval=(2, 5),
    )
    processor = ContextProcessor(BundleConfig(order=order))
    result = OrderResult(order)
    for position, event in enumerate(generate(606, shape)):
        bundle = processor.apply(event, position=position)
        if bundle is None:
            continue
        stats = bundle.stats
        result.bundles += 1
        result.tokens += stats.tokens_bundle
        result.naive += stats.tokens_naive
        result.reused += stats.tokens_prefix_reused
        result.share_sum += stats.tokens_prefix_reused / max(stats.tokens_bundle, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=150)
    args = parser.parse_args()
    results = [measure(order, args.conversations) for order in ORDERS]
    naive_cost = results[0].naive
    print(
        f"{args.conversations} conversations x 16 turns, a bundle per turn; cost units: input "
        f"token = 1, cached token = {CACHED_PRICE}"
    )
    print(
        f"{'order':<10}{'bundles':>9}{'tokens':>12}{'mean prefix share':>19}{'cost':>14}"
        f"{'vs naive':>10}"
    )
    for r in results:
        print(
            f"{r.order:<10}{r.bundles:>9}{r.tokens:>12,}{r.share_sum / r.bundles:>19.1%}"
            f"{r.cost:>14,.0f}{r.cost / naive_cost:>10.3f}"
        )
    print(
        f"{'naive':<10}{results[0].bundles:>9}{naive_cost:>12,}{'-':>19}{naive_cost:>14,}"
        f"{1:>10.3f}   (no dedup, no caching)"
    )


if __name__ == "__main__":
    main()
