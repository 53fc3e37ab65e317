"""DagContextAssembler: chooses the items that fit a token budget and renders them deduplicated,
and keeps what it learned for its next assembly of the same window.

What it keeps: the index of the held items' texts (textindex.py), and what the last placement of
the window and of a budget trial learned (placement.py): each plan with the texts it read, each
entry with what it depends on, each entry's counts. An assembly indexes only new and changed
items, plans again only texts whose reads changed, writes again only entries whose plan or
neighbours changed, and counts only new texts; the rest is filling in numbers. Nothing kept
changes a byte: a fresh assembler makes the same assembly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from stream_ctx.core.assembly.dag import StateDag
from stream_ctx.core.counting.segment import Counted
from stream_ctx.core.counting.tokenizer import Tokenizer
from stream_ctx.core.entries.entry import Numbering, is_sharing, lean_template, plain_plan
from stream_ctx.core.entries.placement import Held, Placements
from stream_ctx.core.entries.render import BASELINE_ENTRIES, parts_of
from stream_ctx.core.memo import Memos
from stream_ctx.core.text.engine import PYTHON_CORE, Core
from stream_ctx.core.text.plan import TextPlan, renamed
from stream_ctx.core.text.textindex import IndexedText
from stream_ctx.core.window.accumulator import ContextItem, RankedItem
from stream_ctx.core.wire.events import RenderOrder

__all__ = ("Assembly", "DagContextAssembler")


@dataclass(frozen=True, slots=True)
class Assembly:
    """Selected items (priority order), their dedup graph in context order, and the context;
    `plans` is how the context writes each placed item's content (plan_texts), `segments` the
    context cut where counts add up, each with its count."""

    selected: list[RankedItem]
    placed: list[RankedItem]
    plans: list[TextPlan]
    dag: StateDag
    segments: list[Counted]
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
    """Pure and deterministic: the same ranked items and budget give the same context, whatever
    this assembler assembled before."""

    def __init__(
        self, tokenizer: Tokenizer, *, memos: Memos | None = None, core: Core = PYTHON_CORE
    ) -> None:
        self.tokenizer = tokenizer
        self._memos = memos if memos is not None else Memos()
        self._index = core.text_index(self._memos)
        self._held: dict[str, Held] = {}
        self._window = Placements(self._index, self._memos, core.planner)
        self._trials = Placements(self._index, self._memos, core.planner)

    def assemble(
        self, ranked: Sequence[RankedItem], *, max_tokens: int | None, order: RenderOrder
    ) -> Assembly:
        """Take items best first; one that would push the context past the budget is skipped.

        The budget applies to the context as sent, in `order`: repeats are written out at their
        first place in that order, so a borderline item may fit in one order and not another.
        """
        self._hold(ranked)
        everything = self._assemble(list(ranked), order, self._window)
        if max_tokens is None or everything.tokens_bundle <= max_tokens:
            return everything
        chosen: list[RankedItem] = []
        for candidate in ranked:
            trial = [*chosen, candidate]
            placed = self._trials.place(self._helds(_arranged(trial, order)), self.tokenizer)
            tokens = sum(t.tokens(placed.numbering, self.tokenizer) for t in placed.templates)
            if tokens <= max_tokens:
                chosen = trial
        best = self._assemble(chosen, order, self._trials)
        return replace(best, skipped_for_budget=len(ranked) - len(chosen))

    @property
    def held(self) -> int:
        """Items the last assembly held (what it keeps grows with them)."""
        return len(self._held)

    def serials(self, items: Sequence[ContextItem]) -> list[int]:
        """The serials that name the texts of held `items` in plans."""
        return [self._held[item.id].text.serial for item in items]

    def counted(
        self,
        items: Sequence[ContextItem],
        plans: Sequence[TextPlan],
        numbers: Sequence[int],
        *,
        sent: int,
    ) -> list[Counted]:
        """The entries of held `items` in this order from the `sent`-th on, each item numbered
        `numbers`, its content planned as `plans` (naming texts by serial), counted."""
        helds = [self._held[item.id] for item in items]
        parts = [held.parts for held in helds]
        slots = [held.text.serial for held in helds]
        numbering = Numbering(dict(zip(slots, numbers, strict=True)), self.tokenizer)
        counted: list[Counted] = []
        for n in range(sent, len(helds)):
            template = lean_template(items, parts, n, slots, plans[n], self._memos)
            counted += template.counted(numbering, self.tokenizer)
        return counted

    def _hold(self, ranked: Sequence[RankedItem]) -> None:
        """Bring the held items up to `ranked`: gone ones dropped, changed ones written anew,
        new texts indexed."""
        for gone in self._held.keys() - {r.item.id for r in ranked}:
            self._index.remove(self._held.pop(gone).text.serial)
        unindexed: list[ContextItem] = []
        for r in ranked:
            item, held = r.item, self._held.get(r.item.id)
            if held is None or held.item is item:
                if held is None:
                    unindexed.append(item)
            elif _writes_alike(held.item, item):
                held.item = item  # a merge that changed only what is not written
            elif held.text.text == item.content:
                self._held[item.id] = self._held_of(item, held.text)
            else:
                self._index.remove(self._held.pop(item.id).text.serial)
                unindexed.append(item)
        texts = self._index.add([item.content for item in unindexed])
        for item, text in zip(unindexed, texts, strict=True):
            self._held[item.id] = self._held_of(item, text)

    def _held_of(self, item: ContextItem, text: IndexedText) -> Held:
        entry = self._memos[BASELINE_ENTRIES](
            item.id, item.kind, tuple(item.attributes.items()), tuple(item.tags), item.content
        )
        count, naive = self.tokenizer.count_segment, 0
        for key, segment in entry:
            naive += count(key, segment)
        return Held(item, text, parts_of(item, self._memos), naive)

    def _helds(self, ranked: list[RankedItem]) -> list[Held]:
        return [self._held[r.item.id] for r in ranked]

    def _assemble(
        self, selected: list[RankedItem], order: RenderOrder, placements: Placements
    ) -> Assembly:
        placed_items = _arranged(selected, order)
        placed = placements.place(self._helds(placed_items), self.tokenizer)
        segments = [
            c for t in placed.templates for c in t.counted(placed.numbering, self.tokenizer)
        ]
        plans = [renamed(plan, placed.planner.at) for plan in placed.plans]
        items = [r.item for r in placed_items]
        count = self.tokenizer.count_segment
        leads = (f"[{n}]" for n in range(1, len(items) + 1))
        naive = sum(held.naive for held in placed.helds) + sum(count(lead, lead) for lead in leads)
        tokens = sum(tokens for _, tokens in segments)
        is_shared = is_sharing(placed.templates, plans)
        if tokens > naive:  # priced roughly, the sharing cost more than it saved
            plain_plans, plain = self._plain(placed.helds)
            plain_tokens = sum(tokens for _, tokens in plain)
            if plain_tokens < tokens:
                plans, segments, tokens, is_shared = plain_plans, plain, plain_tokens, False
        return Assembly(
            selected,
            placed_items,
            plans,
            StateDag.build(items, plans, memos=self._memos),
            segments,
            "".join(text for text, _ in segments),
            tokens,
            naive,
            is_shared,
        )

    def _plain(self, helds: list[Held]) -> tuple[list[TextPlan], list[Counted]]:
        """The plain rendering of `helds`: every entry written out, sharing nothing."""
        items = [held.item for held in helds]
        parts = [held.parts for held in helds]
        plans = [plain_plan(item.content) for item in items]
        slots = range(len(items))
        numbering = Numbering({n: n + 1 for n in slots}, self.tokenizer)
        counted: list[Counted] = []
        for n, plan in enumerate(plans):
            template = lean_template(items, parts, n, slots, plan, self._memos, is_plain=True)
            counted += template.counted(numbering, self.tokenizer)
        return plans, counted


def _writes_alike(held: ContextItem, item: ContextItem) -> bool:
    """Whether two versions of an item write the same entry (salience and times aside)."""
    return (
        held.content == item.content
        and held.kind == item.kind
        and held.attributes == item.attributes
        and held.tags == item.tags
    )


def _arranged(ranked: list[RankedItem], order: RenderOrder) -> list[RankedItem]:
    """Context order: best first; by arrival (what was sent keeps its place); or best at both
    ends, the next best just inside them, the weakest in the middle."""
    if order == "stable":
        return sorted(ranked, key=lambda r: r.item.entered)
    if order == "edges":
        return ranked[0::2] + ranked[1::2][::-1]
    return ranked
