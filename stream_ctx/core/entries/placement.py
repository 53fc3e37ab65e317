"""Placements: the entries of held items in one context order, made from what the last placement
of the same kind (a window's, or a budget trial's) learned.

A plan is kept while the texts it read stay, keep their order and are numbered as wide, and no
newcomer it may read (Planner.may_read) stands before its text. When texts change places, the
longest run of them that kept its order stays; the others move, as if they left and came anew. An
entry is kept while its item, the items before it that its header may name, and its plan are.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stream_ctx.core.counting.tokenizer import Tokenizer
from stream_ctx.core.entries.entry import Numbering, Template, lean_template
from stream_ctx.core.entries.render import BASE_WINDOW, HeaderParts
from stream_ctx.core.memo import Memos
from stream_ctx.core.text.plan import TextPlan, renamed
from stream_ctx.core.text.repeats import Planner
from stream_ctx.core.text.textindex import IndexedText, TextIndex
from stream_ctx.core.window.accumulator import ContextItem

__all__ = ("Held", "Placed", "Placements")


@dataclass(slots=True, eq=False)
class Held:
    """A held item: its text in the index, its header parts and its baseline entry's tokens.
    Replaced when anything it writes changes (hashed by identity: entries are kept by it)."""

    item: ContextItem
    text: IndexedText
    parts: HeaderParts
    naive: int


@dataclass(frozen=True, slots=True)
class Placed:
    """Held items in context order, their plans (naming texts by serial), their entries, and
    their numbers."""

    helds: list[Held]
    planner: Planner
    plans: list[TextPlan]
    templates: list[Template]
    numbering: Numbering


@dataclass(frozen=True, slots=True)
class _Kept:
    """A text's plan (naming texts by serial) and the texts it read."""

    plan: TextPlan
    read: frozenset[int]


class Placements:
    """Places held items, keeping what the last placement learned (keep one per kind of
    placement: a window's and a budget trial's differ)."""

    __slots__ = ("_index", "_memos", "_planner", "_plans", "_rank", "_templates", "_widths")

    def __init__(
        self,
        index: TextIndex,
        memos: Memos,
        planner: Callable[[TextIndex, Sequence[int], Memos], Planner] = Planner,
    ) -> None:
        self._index = index
        self._memos = memos
        self._planner = planner
        self._rank: dict[int, int] = {}
        self._widths: list[tuple[int, int]] = []
        self._plans: dict[int, _Kept] = {}
        self._templates: dict[Held, tuple[tuple[object, ...], Template]] = {}

    def place(self, helds: list[Held], tokenizer: Tokenizer) -> Placed:
        """The entries of `helds` in this order, numbered from 1."""
        serials = [held.text.serial for held in helds]
        planner = self._planner(self._index, serials, self._memos)
        moved, changed = self._changed(serials, planner.widths)
        fresh = {
            n for n, serial in enumerate(serials) if serial not in self._rank or serial in moved
        }
        fresh_units = set().union(*(helds[n].text.shared for n in fresh))
        items = [held.item for held in helds]
        parts = [held.parts for held in helds]
        plans: dict[int, _Kept] = {}
        templates: dict[Held, tuple[tuple[object, ...], Template]] = {}
        for n, held in enumerate(helds):
            serial = held.text.serial
            kept = self._plans.get(serial)
            if (
                kept is None
                or serial in changed
                or not kept.read.isdisjoint(changed)
                or planner.may_read(n, fresh, fresh_units)
            ):
                plan, read = planner.plan(n)
                kept = _Kept(renamed(plan, serials), frozenset(serials[k] for k in read))
            plans[serial] = kept
            first = max(n - BASE_WINDOW, 0)
            key = (*helds[first : n + 1], *_base_widths(first + 1, n), kept.plan)
            last = self._templates.get(held)
            if last is not None and last[0] == key:
                template = last[1]
            else:
                template = lean_template(items, parts, n, serials, kept.plan, self._memos)
            templates[held] = key, template
        self._rank = {serial: n for n, serial in enumerate(serials)}
        self._widths, self._plans, self._templates = planner.widths, plans, templates
        numbering = Numbering({s: n for n, s in enumerate(serials, start=1)}, tokenizer)
        kept_plans = [plans[serial].plan for serial in serials]
        return Placed(helds, planner, kept_plans, [t for _, t in templates.values()], numbering)

    def _changed(
        self, serials: list[int], widths: list[tuple[int, int]]
    ) -> tuple[set[int], set[int]]:
        """The texts kept from the last placement that moved (those off the longest run that
        kept its order), and the texts that left, moved or changed their number's width."""
        kept = [(n, rank) for n, s in enumerate(serials) if (rank := self._rank.get(s)) is not None]
        steady = _ascending([rank for _, rank in kept])
        moved = {serials[n] for i, (n, _) in enumerate(kept) if i not in steady}
        changed = (self._rank.keys() - set(serials)) | moved
        changed.update(serials[n] for n, rank in kept if self._widths[rank] != widths[n])
        return moved, changed


def _ascending(ranks: list[int]) -> set[int]:
    """The indices of a longest ascending subsequence of `ranks` (patience sorting)."""
    tails: list[int] = []  # per length, the index of the smallest rank ending such a run
    tail_ranks: list[int] = []
    before = [-1] * len(ranks)
    for i, rank in enumerate(ranks):
        length = bisect_left(tail_ranks, rank)
        if length:
            before[i] = tails[length - 1]
        if length == len(tails):
            tails.append(i)
            tail_ranks.append(rank)
        else:
            tails[length], tail_ranks[length] = i, rank
    steady: set[int] = set()
    i = tails[-1] if tails else -1
    while i >= 0:
        steady.add(i)
        i = before[i]
    return steady


def _base_widths(first: int, last: int) -> tuple[int, ...]:
    """What pricing the bases numbered `first` to `last` a header may name depends on: their
    numbers' width, or where the widths differ (` ^1000` costs a token more), the numbers."""
    width = len(str(first))
    return (width,) if width == len(str(last)) else (first, last)
