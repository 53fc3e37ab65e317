"""DagContextAssembler: chooses the items that fit a token budget and renders them deduplicated."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from stream_ctx.core.accumulator import RankedItem
from stream_ctx.core.dag import StateDag
from stream_ctx.core.events import RenderOrder
from stream_ctx.core.plan import TextPlan
from stream_ctx.core.render import Segment, is_sharing, render_lean, render_naive
from stream_ctx.core.repeats import plan_texts
from stream_ctx.core.tokenizer import Tokenizer

__all__ = ("Assembly", "DagContextAssembler")


@dataclass(frozen=True, slots=True)
class Assembly:
    """Selected items (priority order), their dedup graph in context order, and the context;
    `plans` is how the context writes each placed item's content (plan_texts)."""

    selected: list[RankedItem]
    placed: list[RankedItem]
    plans: list[TextPlan]
    dag: StateDag
    segments: list[Segment]
    context: str
    tokens_bundle: int
    tokens_naive: int
    is_deduplicated: bool
    skipped_for_budget: int = 0

    def blocks_by_id(self) -> dict[str, list[str]]:
        """Each included item's content as block ids, in order."""
        pairs = zip(self.placed, self.dag.item_blocks, strict=True)
        return {r.item.id: ids for r, ids in pairs}


class DagContextAssembler:
    """Pure and deterministic: the same ranked items and budget give the same context."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def assemble(
        self, ranked: Sequence[RankedItem], *, max_tokens: int | None, order: RenderOrder
    ) -> Assembly:
        """Take items best first; one that would push the context past the budget is skipped.

        The budget applies to the context as sent, in `order`: repeats are written out at their
        first place in that order, so a borderline item may fit in one order and not another.
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
        placed = _arranged(selected, order)
        items = [r.item for r in placed]
        plans = plan_texts([item.content for item in items])
        lean = render_lean(items, plans)
        return Assembly(
            selected,
            placed,
            plans,
            StateDag.build(items, plans),
            lean,
            "".join(text for _, text in lean),
            self._count(lean),
            self._count(render_naive(items)),
            is_sharing(items, plans),
        )

    def _count(self, segments: list[Segment]) -> int:
        return sum(self.tokenizer.count_segment(key, text) for key, text in segments)


def _arranged(ranked: list[RankedItem], order: RenderOrder) -> list[RankedItem]:
    """Context order: best first; by arrival (what was sent keeps its place); or best at both
    ends, the next best just inside them, the weakest in the middle."""
    if order == "stable":
        return sorted(ranked, key=lambda r: r.item.entered)
    if order == "edges":
        return ranked[0::2] + ranked[1::2][::-1]
    return ranked
