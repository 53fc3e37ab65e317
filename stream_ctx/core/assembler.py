"""DagContextAssembler: chooses the items that fit a token budget and renders them deduplicated,
and keeps what it learned for its next assembly of the same window.

What it keeps: the index of the held items' texts (textindex.py), each plan under what it read
(Planner.reads), each entry under what it depends on (its item, the items before it that a
header may name, its plan), and each entry's counts. An assembly looks up only new and changed
items, plans again only texts whose reads changed, writes again only entries whose plan or
neighbours changed, and counts only new texts; the rest is filling in numbers. Nothing kept
changes a byte: a fresh assembler makes the same assembly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import count

from cachetools import LRUCache

from stream_ctx.core.accumulator import ContextItem, RankedItem
from stream_ctx.core.dag import StateDag
from stream_ctx.core.entry import Numbering, Template, is_sharing, lean_template
from stream_ctx.core.events import RenderOrder
from stream_ctx.core.memo import Memos
from stream_ctx.core.plan import TextPlan, renamed
from stream_ctx.core.render import BASE_WINDOW, BASELINE_ENTRIES, HeaderParts, parts_of
from stream_ctx.core.repeats import Planner, Reads
from stream_ctx.core.segment import Counted
from stream_ctx.core.textindex import IndexedText, TextIndex
from stream_ctx.core.tokenizer import Tokenizer

__all__ = ("Assembly", "DagContextAssembler")

# Plans and entries kept per item a window holds: the window's own, a budget's trial's, and
# those of items that left or moved, until they age out.
_KEPT_PER_ITEM = 4


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


@dataclass(slots=True, eq=False)
class _Held:
    """A held item: its text in the index, its header parts and its baseline entry's tokens.
    Replaced when anything it writes changes (hashed by identity: entries are kept by it)."""

    item: ContextItem
    text: IndexedText
    parts: HeaderParts
    naive: int


@dataclass(frozen=True, slots=True)
class _Plan:
    """A plan (naming texts by serial), a token naming it in entry keys, and what it read."""

    plan: TextPlan
    token: int
    reads: Reads


@dataclass(frozen=True, slots=True)
class _Known:
    """A text's plan at the window's last assembly, and the version of its text it read."""

    planned: _Plan
    version: int
    read: frozenset[int]


@dataclass(frozen=True, slots=True)
class _Placed:
    """The held items of one context in its order, their plans (naming texts by serial) and
    entries."""

    helds: list[_Held]
    planner: Planner
    plans: list[TextPlan]
    templates: list[Template]
    numbering: Numbering


class DagContextAssembler:
    """Pure and deterministic: the same ranked items and budget give the same context, whatever
    this assembler assembled before. `window` sizes what it keeps (a window's max_items)."""

    def __init__(
        self, tokenizer: Tokenizer, *, memos: Memos | None = None, window: int = 20
    ) -> None:
        self.tokenizer = tokenizer
        self._memos = memos if memos is not None else Memos()
        self._index = TextIndex(self._memos)
        self._held: dict[str, _Held] = {}
        kept = _KEPT_PER_ITEM * window
        self._plans: LRUCache[tuple[int, Reads], _Plan] = LRUCache(maxsize=kept)
        self._templates: LRUCache[tuple[object, ...], Template] = LRUCache(maxsize=kept)
        self._tokens = count()
        # The window's last assembly: each text's plan, place and number widths.
        self._known: dict[int, _Known] = {}
        self._rank: dict[int, int] = {}
        self._widths: list[tuple[int, int]] = []

    def assemble(
        self, ranked: Sequence[RankedItem], *, max_tokens: int | None, order: RenderOrder
    ) -> Assembly:
        """Take items best first; one that would push the context past the budget is skipped.

        The budget applies to the context as sent, in `order`: repeats are written out at their
        first place in that order, so a borderline item may fit in one order and not another.
        """
        self._hold(ranked)
        everything = self._assemble(list(ranked), order, is_window=True)
        if max_tokens is None or everything.tokens_bundle <= max_tokens:
            return everything
        chosen: list[RankedItem] = []
        for candidate in ranked:
            trial = [*chosen, candidate]
            placed = self._place(_arranged(trial, order), is_window=False)
            tokens = sum(t.tokens(placed.numbering, self.tokenizer) for t in placed.templates)
            if tokens <= max_tokens:
                chosen = trial
        best = self._assemble(chosen, order, is_window=False)
        return replace(best, skipped_for_budget=len(ranked) - len(chosen))

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
        """Bring the held items up to `ranked`: new and changed ones indexed, gone ones dropped."""
        for r in ranked:
            held = self._held.get(r.item.id)
            if held is None or held.item is not r.item:
                self._held[r.item.id] = self._refreshed(held, r.item)
        if len(self._held) > len(ranked):
            for gone in self._held.keys() - {r.item.id for r in ranked}:
                self._forget(self._held.pop(gone).text.serial)

    def _refreshed(self, held: _Held | None, item: ContextItem) -> _Held:
        if held is not None and _writes_alike(held.item, item):
            held.item = item  # a merge that changed only what is not written
            return held
        text = None
        if held is not None:
            if held.text.text == item.content:
                text = held.text
            else:
                self._forget(held.text.serial)
        if text is None:
            text = self._index.add(item.content)
        entry = self._memos[BASELINE_ENTRIES](
            item.id, item.kind, tuple(item.attributes.items()), tuple(item.tags), item.content
        )
        naive = sum(self.tokenizer.count_segment(key, text) for key, text in entry)
        return _Held(item, text, parts_of(item, self._memos), naive)

    def _forget(self, serial: int) -> None:
        self._index.remove(serial)
        self._known.pop(serial, None)

    def _assemble(
        self, selected: list[RankedItem], order: RenderOrder, *, is_window: bool
    ) -> Assembly:
        placed_items = _arranged(selected, order)
        placed = self._place(placed_items, is_window=is_window)
        segments = [
            c for t in placed.templates for c in t.counted(placed.numbering, self.tokenizer)
        ]
        plans = [renamed(plan, placed.planner.at) for plan in placed.plans]
        items = [r.item for r in placed_items]
        count = self.tokenizer.count_segment
        leads = (f"[{n}]" for n in range(1, len(items) + 1))
        naive = sum(held.naive for held in placed.helds) + sum(count(lead, lead) for lead in leads)
        return Assembly(
            selected,
            placed_items,
            plans,
            StateDag.build(items, plans, memos=self._memos),
            segments,
            "".join(text for text, _ in segments),
            sum(tokens for _, tokens in segments),
            naive,
            is_sharing(placed.templates, plans),
        )

    def _place(self, placed: list[RankedItem], *, is_window: bool) -> _Placed:
        """The entries of items in context order (the whole window's, or a trial's): plans
        and entries whose reads and neighbours are unchanged come from what is kept."""
        helds = [self._held[r.item.id] for r in placed]
        serials = [held.text.serial for held in helds]
        planner = Planner(self._index, serials, self._memos)
        moved = self._moved(serials, planner.widths) if is_window else None
        known = self._known if is_window else None
        plans: list[TextPlan] = []
        templates: list[Template] = []
        items = [held.item for held in helds]
        parts = [held.parts for held in helds]
        for n, held in enumerate(helds):
            planned = self._planned(planner, n, held.text, known, moved)
            plans.append(planned.plan)
            first = max(n - BASE_WINDOW, 0)
            # A header may name any of the BASE_WINDOW before it, priced by their numbers' width.
            key = (*helds[first : n + 1], len(str(first + 1)), len(str(n)), planned.token)
            template = self._templates.get(key)
            if template is None:
                template = lean_template(items, parts, n, serials, planned.plan, self._memos)
                self._templates[key] = template
            templates.append(template)
        if is_window:
            self._rank = {serial: n for n, serial in enumerate(serials)}
            self._widths = planner.widths
        numbering = Numbering({s: n for n, s in enumerate(serials, start=1)}, self.tokenizer)
        return _Placed(helds, planner, plans, templates, numbering)

    def _planned(
        self,
        planner: Planner,
        n: int,
        text: IndexedText,
        known: dict[int, _Known] | None,
        moved: set[int] | None,
    ) -> _Plan:
        """Text `n`'s plan: as at the window's last assembly (`known`, when this is the window)
        if nothing it read changed (`moved` None: the texts changed order), else as kept under
        what it reads now, else planned."""
        last = known.get(text.serial) if known is not None and moved is not None else None
        if (
            last is not None
            and moved is not None
            and last.version == text.version
            and text.serial not in moved
            and last.read.isdisjoint(moved)
        ):
            return last.planned
        reads = planner.reads(n)
        planned = self._plans.get((text.serial, reads))
        if planned is None:
            plan = renamed(planner.plan(n), planner.order)
            planned = self._plans[text.serial, reads] = _Plan(plan, next(self._tokens), reads)
        if known is not None:
            read = frozenset(serial for serial, _ in reads[1])
            known[text.serial] = _Known(planned, text.version, read)
        return planned

    def _moved(self, serials: list[int], widths: list[tuple[int, int]]) -> set[int] | None:
        """The texts whose number changed width since the window's last assembly, if the
        texts it held keep their order (newcomers aside); None if some moved past another."""
        last, moved = -1, set()
        for n, serial in enumerate(serials):
            rank = self._rank.get(serial)
            if rank is None:
                continue
            if rank < last:
                return None
            last = rank
            if self._widths[rank] != widths[n]:
                moved.add(serial)
        return moved


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
