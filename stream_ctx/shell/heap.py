"""The process heap during a run: what exists before it starts lives as long as the process."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def startup_heap_frozen() -> Iterator[None]:
    """Leave the objects made before the run (imports, the tokenizer's tables: ~40k) out of
    every collection during it, and give them back to the collector after it.

    A full collection scans every tracked object; these never become garbage, yet scanning
    them took ~60 ms on the 2-core box, paid inside a 1,000-conversation restore that reads
    its records in ~25 ms (docs/benchmarks.md, Restore)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
