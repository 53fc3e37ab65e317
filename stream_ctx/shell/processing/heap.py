"""The collector during a run: what exists before it starts lives as long as the process, and a
finalize makes tens of thousands of short-lived containers."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ("run_heap",)

# Container objects made between two young collections (CPython's default is 700). A finalize
# makes tens of thousands, nearly none in cycles: at 700 the Runner collected ~70 times as often
# and spent 0.42 s instead of 0.26 s of its 9 s of CPU collecting over the suite's 3,300 events.
_YOUNG_OBJECTS = 50_000
# The collector's thresholds as each run in progress found them: the first is restored when the
# last run ends (runs may overlap, as several Runners in one process do).
_found: list[tuple[int, int, int]] = []


@contextmanager
def run_heap() -> Iterator[None]:
    """Leave the objects made before the run (imports, the tokenizer's tables: ~40k) out of
    every collection during it, collect the young generation less often, and restore both once
    no run is left.

    A full collection scans every tracked object; the startup heap never becomes garbage, yet
    scanning it took ~60 ms on the 2-core box, paid inside a 1,000-conversation restore that
    reads its records in ~25 ms (docs/benchmarks/suite.md, Restore)."""
    if not _found:
        gc.collect()
        gc.freeze()
    _found.append(gc.get_threshold())
    gc.set_threshold(_YOUNG_OBJECTS, *_found[0][1:])
    try:
        yield
    finally:
        first = _found[0]
        _found.pop()
        if not _found:
            gc.set_threshold(*first)
            gc.unfreeze()
