"""DagContextAssembler: chooses the items that fit a token budget and renders them deduplicated."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from stream_ctx.core.accumulator import RankedItem
from stream_ctx.core.config import ContextFormat
from stream_ctx.core.dag import StateDag
from stream_ctx.core.events import RenderOrder
from stream_ctx.core.render import Placed, Segment, fence_for, render
from stream_ctx.core.tokenizer import Tokenizer


@dataclass(frozen=True, slots=True)
class Assembly:
    """Selected items (priority order), their dedup graph, and the context with its counts."""

    selected: list[RankedItem]
    dag: StateDag
    segments: list[Segment]
    context: str
    tokens_bundle: int
    tokens_naive: int
    is_deduplicated: bool
    skipped_for_budget: int = 0


class DagContextAssembler:
    """Pure and deterministic: the same ranked items and budget give the same context."""

    def __init__(self, tokenizer: Tokenizer, *, fmt: ContextFormat) -> None:
        self.tokenizer = tokenizer
        self.fmt = fmt

    def assemble(
        self, ranked: Sequence[RankedItem], *, max_tokens: int | None, order: RenderOrder
    ) -> Assembly:
        """Take items best first; one that would push the context past the budget is skipped.

        `order` only moves items within the context. Token counts do not depend on it (for
        windows under 1,000 items), so every order selects the same items.
        """
        everything = self._assemble(list(ranked), order)
        if max_tokens is None or everything.tokens_bundle <= max_tokens:
            return everything
        chosen: list[RankedItem] = []
        best = self._assemble([], order)
        for candidate in ranked:
            trial = self._assemble([*chosen, candidate], order)
            if trial.tokens_bundle <= max_tokens:
                chosen, best = [*chosen, candidate], trial
        return replace(best, skipped_for_budget=len(ranked) - len(chosen))

    def _assemble(self, selected: list[RankedItem], order: RenderOrder) -> Assembly:
        """Render deduplicated and naive; keep the naive form where sharing would not pay."""
        dag = StateDag.build([r.item for r in selected])
        pairs = _arranged(list(zip(selected, dag.item_blocks, strict=True)), order)
        placed = [Placed(n, r.item, r.priority, ids) for n, (r, ids) in enumerate(pairs, start=1)]
        fence = fence_for([r.item for r in selected])
        is_shared_last = order == "stable"
        shared = render(placed, dag, fmt=self.fmt, fence=fence, is_shared_last=is_shared_last)
        naive = render(placed, None, fmt=self.fmt, fence=fence)
        tokens_shared, tokens_naive = self._count(shared), self._count(naive)
        is_deduplicated = tokens_shared <= tokens_naive
        chosen = shared if is_deduplicated else naive
        if not is_deduplicated:
            dag = StateDag.flat([r.item for r in selected])  # the bundle describes what it holds
        return Assembly(
            selected,
            dag,
            chosen,
            "".join(text for _, text in chosen),
            min(tokens_shared, tokens_naive),
            tokens_naive,
            is_deduplicated,
        )

    def _count(self, segments: list[Segment]) -> int:
        return sum(self.tokenizer.count_segment(key, text) for key, text in segments)


_Pair = tuple[RankedItem, list[str]]


def _arranged(pairs: list[_Pair], order: RenderOrder) -> list[_Pair]:
    """Context order: best first; by arrival (what was sent keeps its place); or best at both
    ends, the next best just inside them, the weakest in the middle."""
    if order == "stable":
        return sorted(pairs, key=lambda pair: pair[0].item.entered)
    if order == "edges":
        return pairs[0::2] + pairs[1::2][::-1]
    return pairs
