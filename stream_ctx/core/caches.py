"""The core's caches, as hit and size figures for the metrics.

Each tokenizer's segment-count cache is shared by every bundle of a process: a chunk many
conversations retrieve is counted once while it stays cached. The memo tables belong to whoever
made them (core/memo.py: a group member, or a processor); the figures sum the tables given.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from stream_ctx.core.assembly.dag import BLOCK_IDS
from stream_ctx.core.counting.tokenizer import shared_tokenizers
from stream_ctx.core.entries.render import (
    ATTRIBUTE_DIFFERENCES,
    BASELINE_ENTRIES,
    HEADER_PARTS,
    TAG_DIFFERENCES,
)
from stream_ctx.core.memo import Memo, Memos
from stream_ctx.core.text.quotes import QUOTES
from stream_ctx.core.text.rerun import RERUNS
from stream_ctx.core.text.textindex import UNITS

__all__ = ("MEMOS", "CacheFigures", "cache_figures")


@dataclass(frozen=True, slots=True)
class CacheFigures:
    """One cache's lookups that hit and missed since it was made, and its size and bound."""

    name: str
    hits: int
    misses: int
    entries: int
    limit: int


MEMOS: tuple[Memo[..., object], ...] = (
    BLOCK_IDS,
    BASELINE_ENTRIES,
    HEADER_PARTS,
    ATTRIBUTE_DIFFERENCES,
    TAG_DIFFERENCES,
    UNITS,
    QUOTES,
    RERUNS,
)
"""The core's memo tables, each named as the metrics name it."""


def cache_figures(memos: Iterable[Memos] = ()) -> list[CacheFigures]:
    """Figures of the segment-count cache of each tokenizer in use, and of the memo tables of
    `memos` (each table summed over them)."""
    figures = [
        CacheFigures(
            f"token_counts_{name}",
            tokenizer.lookups - tokenizer.misses,
            tokenizer.misses,
            tokenizer.cached,
            tokenizer.cache_limit,
        )
        for name, tokenizer in sorted(shared_tokenizers().items())
    ]
    owners = list(memos)
    for memo in MEMOS:
        hits = misses = entries = 0
        for owner in owners:
            owner_hits, owner_misses, owner_entries = owner.lookups(memo)
            hits, misses, entries = (
                hits + owner_hits,
                misses + owner_misses,
                entries + owner_entries,
            )
        figures.append(CacheFigures(memo.name, hits, misses, entries, memo.limit * len(owners)))
    return figures
