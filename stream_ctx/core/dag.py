"""StateDag: items point at shared nodes, attribute values, tags and content blocks, stored once.

Content is cut where the repeat parse (repeats.py) found a reference: a referenced stretch becomes
its own block in the item it comes from, and the item that refers to it uses those same blocks.
Block ids hash the text, so the same text has the same id in every bundle.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, pairwise

import msgspec

from stream_ctx.core.accumulator import ContextItem
from stream_ctx.core.memo import Memo, Memos
from stream_ctx.core.plan import Ref, TextPlan

__all__ = ("BLOCK_IDS", "DagBuilder", "SharedAttribute", "StateDag", "block_id")

# 48 bits: collision-free in practice for the few thousand blocks a bundle holds.
_BLOCK_ID_BYTES = 6
_NO_MARKS: frozenset[int] = frozenset()


def block_id(text: str) -> str:
    """Content address of a block: same text, same id, in every bundle."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=_BLOCK_ID_BYTES)
    return "b" + digest.hexdigest()


BLOCK_IDS = Memo("block_ids", block_id, 1 << 16)
"""block_id memoized: a held item's blocks are hashed once while they stay cached."""


class SharedAttribute(msgspec.Struct, frozen=True, kw_only=True):
    """An attribute value or tag held by two or more included items, stored once."""

    field: str
    name: str
    value: str
    count: int
    items: list[str]


@dataclass(frozen=True, slots=True)
class StateDag:
    """The dedup graph of one bundle's items, in their rendering order."""

    blocks: dict[str, str]
    item_blocks: list[list[str]]
    block_uses: Counter[str]
    shared: list[SharedAttribute]

    @classmethod
    def build(
        cls, items: Sequence[ContextItem], plans: Sequence[TextPlan], *, memos: Memos | None = None
    ) -> StateDag:
        """The graph of `items` whose contents are planned as `plans` (plan_texts)."""
        builder = DagBuilder(memos if memos is not None else Memos())
        return builder.build(items, plans, range(len(items)))


@dataclass(slots=True)
class _Cuts:
    """One text's block boundaries (from 0 to its length) and the pieces between them, under
    what they were made from; its blocks (pieces used once joined) under which pieces were."""

    made_from: tuple[object, ...]
    bounds: tuple[int, ...]
    pieces: tuple[str, ...]
    singles: tuple[bool, ...] = ()
    blocks: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()


class DagBuilder:
    """Builds the graphs of one window again and again: a text's cuts are kept while its plan,
    the cuts later references put in it and its sources' cuts are; its blocks while which of
    its pieces are used once is."""

    __slots__ = ("_ids", "_kept")

    def __init__(self, memos: Memos) -> None:
        self._ids = memos[BLOCK_IDS]
        self._kept: dict[int, _Cuts] = {}

    def build(
        self, items: Sequence[ContextItem], plans: Sequence[TextPlan], names: Sequence[int]
    ) -> StateDag:
        """The graph of `items`, named `names` (as the plans' references name them)."""
        marks: dict[int, set[int]] = {}
        for plan in plans:
            for piece in plan.pieces:
                if isinstance(piece, Ref):
                    ends = (piece.start, piece.start + piece.length)
                    marks.setdefault(piece.source, set()).update(ends)
        cuts: dict[int, _Cuts] = {}
        for item, plan, name in zip(items, plans, names, strict=True):
            sources = tuple(
                cuts[piece.source].bounds
                for piece in plan.pieces
                if not isinstance(piece, str) and piece.source != name
            )
            mark = marks.get(name)
            made_from = (plan, _NO_MARKS if mark is None else frozenset(mark), sources)
            kept = self._kept.get(name)
            if kept is None or kept.made_from != made_from:
                bounds = _bounds(plan, name, sorted(made_from[1]), cuts)
                content = item.content
                pieces = tuple(content[a:b] for a, b in pairwise(bounds))
                kept = _Cuts(made_from, bounds, pieces)
            cuts[name] = kept
        piece_uses = Counter(chain.from_iterable(kept.pieces for kept in cuts.values()))
        blocks: dict[str, str] = {}
        item_blocks: list[list[str]] = []
        for kept in cuts.values():
            singles = tuple(piece_uses[piece] == 1 for piece in kept.pieces)
            if singles != kept.singles or not kept.ids:
                kept.singles = singles
                kept.blocks = tuple(_merge_single_use(kept.pieces, singles))
                kept.ids = tuple(map(self._ids, kept.blocks))
            blocks.update(zip(kept.ids, kept.blocks, strict=True))  # an id is one text: first kept
            item_blocks.append(list(kept.ids))
        self._kept = cuts
        uses = Counter(chain.from_iterable(item_blocks))
        return StateDag(blocks, item_blocks, uses, _shared_attributes(items))


def _bounds(plan: TextPlan, name: int, edges: list[int], cuts: dict[int, _Cuts]) -> tuple[int, ...]:
    """A text's block boundaries, from 0 to its length: literal runs are cut where a later
    reference starts or ends in them (`edges`), and a reference takes its source's cuts over
    the copied range."""
    out = [0]
    pos = 0
    for piece in plan.pieces:
        if isinstance(piece, str):
            end = pos + len(piece)
            out += edges[bisect_right(edges, pos) : bisect_left(edges, end)]
        else:
            end = pos + piece.length
            if piece.source != name:  # a copy of this text's own earlier part is one block
                source, shift = cuts[piece.source].bounds, pos - piece.start
                inside = source[
                    bisect_right(source, piece.start) : bisect_left(source, end - shift)
                ]
                out += [cut + shift for cut in inside]
        out.append(end)
        pos = end
    return tuple(out)


def _merge_single_use(pieces: tuple[str, ...], singles: tuple[bool, ...]) -> list[str]:
    """Join neighbouring pieces that occur nowhere else: one block reads better than two."""
    merged: list[str] = []
    is_prev_single = False
    for piece, is_single in zip(pieces, singles, strict=True):
        if is_single and is_prev_single:
            merged[-1] += piece
        else:
            merged.append(piece)
        is_prev_single = is_single
    return merged


def _shared_attributes(items: Sequence[ContextItem]) -> list[SharedAttribute]:
    """Attribute values and tags held by two or more items, most widely held first."""
    holders: dict[tuple[str, str, str], list[str]] = {}
    for item in items:
        for name, value in item.attributes.items():
            holders.setdefault(("attributes", name, value), []).append(item.id)
        for tag in dict.fromkeys(item.tags):
            holders.setdefault(("tags", "tag", tag), []).append(item.id)
    shared = [
        SharedAttribute(field=f, name=n, value=v, count=len(ids), items=ids)
        for (f, n, v), ids in holders.items()
        if len(ids) >= 2
    ]
    shared.sort(key=lambda s: (-s.count, s.field, s.name, s.value))
    return shared
