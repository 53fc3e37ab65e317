"""One digest over every bundle the core makes of fixed workloads, in every order, mode and budget:
a refactoring of the core must leave it unchanged. About 40 seconds.

    python benchmarks/bundle_digest.py [--core python|compiled]

Both cores must print the same digest (the compiled one is the Python one's twin).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools

from stream_ctx import BundleConfig, ContextProcessor
from stream_ctx.core.text.engine import load_core
from stream_ctx.core.wire.codec import encode_bundle
from stream_ctx.core.wire.events import BundleMode, Event, RenderOrder
from stream_ctx.corpora import codetext
from stream_ctx.corpora.realtext import workload
from stream_ctx.corpora.workload import WorkloadShape, generate

ORDERS: tuple[RenderOrder, ...] = ("priority", "stable", "edges")
MODES: tuple[BundleMode, ...] = ("full", "delta")
BUDGETS = (None, 1_500)


def workloads() -> dict[str, list[Event]]:
    """Synthetic, documentation and code workloads, small enough to replay in seconds."""
    return {
        "synthetic": generate(3, WorkloadShape(conversations=12)),
        "numpy": workload("numpy", conversations=25),
        "code": codetext.workload("code", conversations=12),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--core", choices=("auto", "python", "compiled"), default="auto")
    core = load_core(parser.parse_args().core)
    digest = hashlib.blake2b(digest_size=16)
    bundles = 0
    for (name, events), order, mode, budget in itertools.product(
        workloads().items(), ORDERS, MODES, BUDGETS
    ):
        config = BundleConfig(max_items=10, order=order, mode=mode, max_tokens=budget)
        processor = ContextProcessor(config, core=core)
        for event in events:
            bundle = processor.apply(event)
            if bundle is not None:
                digest.update(encode_bundle(bundle))
                bundles += 1
        print(f"{name:>9} {order:>8} {mode:>5} budget {budget}: {bundles:,} bundles so far")
    print(f"{bundles:,} bundles, digest {digest.hexdigest()} ({core.name} core)")


if __name__ == "__main__":
    main()
