"""The core's process-wide caches, as hit and size figures for the metrics.

Every cache is bounded and shared by all conversations of a process: a chunk many conversations
retrieve is counted, cut and headed once while it stays cached.
"""

from __future__ import annotations

from dataclasses import dataclass

from stream_ctx.core import dag, render
from stream_ctx.core.tokenizer import shared_tokenizers

__all__ = ("MEMOS", "CacheFigures", "cache_figures")


@dataclass(frozen=True, slots=True)
class CacheFigures:
    """One cache's lookups that hit and missed since the process started, and its size."""

    name: str
    hits: int
    misses: int
    entries: int
    limit: int


MEMOS = {
    "block_ids": dag.block_id,
    "baseline_entries": render.naive_entry,
    "header_parts": render.header_parts,
    "header_attribute_differences": render.attribute_difference,
    "header_tag_differences": render.tag_difference,
}
"""The core's memo tables (functools.lru_cache), by the name the metrics give them."""


def cache_figures() -> list[CacheFigures]:
    """Figures of the segment-count cache of each tokenizer in use, and of the memo tables."""
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
    for name, memo in MEMOS.items():
        info = memo.cache_info()
        figures.append(CacheFigures(name, info.hits, info.misses, info.currsize, info.maxsize or 0))
    return figures
