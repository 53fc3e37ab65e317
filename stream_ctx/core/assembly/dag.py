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

from stream_ctx.core.memo import Memo, Memos
from stream_ctx.core.text.plan import Ref, TextPlan
from stream_ctx.core.window.accumulator import ContextItem
from stream_ctx.core.wire.bundle import SharedAttribute

__all__ = ("BLOCK_IDS", "StateDag", "block_id")

# 48 bits: collision-free in practice for the few thousand blocks a bundle holds.
_BLOCK_ID_BYTES = 6


def block_id(text: str) -> str:
    """Content address of a block: same text, same id, in every bundle."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=_BLOCK_ID_BYTES)
    return "b" + digest.hexdigest()


BLOCK_IDS = Memo("block_ids", block_id, 1 << 16)
"""block_id memoized: a held item's blocks are hashed once while they stay cached."""


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
        ids_of = (memos if memos is not None else Memos())[BLOCK_IDS]
        contents = [item.content for item in items]
        pieces = [
            [content[a:b] for a, b in pairwise(bounds)]
            for content, bounds in zip(contents, _bounds(contents, plans), strict=True)
        ]
        piece_uses = Counter(chain.from_iterable(pieces))
        singles = {piece for piece, uses in piece_uses.items() if uses == 1}
        blocks: dict[str, str] = {}
        item_blocks: list[list[str]] = []
        for item_pieces in pieces:
            texts = _merge_single_use(item_pieces, singles)
            ids = list(map(ids_of, texts))
            blocks.update(zip(ids, texts, strict=True))  # an id is one text: first place kept
            item_blocks.append(ids)
        uses = Counter(chain.from_iterable(item_blocks))
        return cls(blocks, item_blocks, uses, _shared_attributes(items))


def _bounds(contents: list[str], plans: Sequence[TextPlan]) -> list[list[int]]:
    """Each content's block boundaries, from 0 to its length: literal runs are cut where a later
    reference starts or ends in them, and a reference takes its source's cuts over the copied
    range."""
    marks: list[set[int]] = [set() for _ in contents]
    for plan in plans:
        for piece in plan.pieces:
            if isinstance(piece, Ref):
                marks[piece.source].update((piece.start, piece.start + piece.length))
    bounds: list[list[int]] = []
    for n, plan in enumerate(plans):
        edges = sorted(marks[n])
        out = [0]
        pos = 0
        for piece in plan.pieces:
            if isinstance(piece, str):
                end = pos + len(piece)
                out += edges[bisect_right(edges, pos) : bisect_left(edges, end)]
            else:
                end = pos + piece.length
                if piece.source != n:  # a copy of this text's own earlier part is one block
                    source, shift = bounds[piece.source], pos - piece.start
                    inside = source[
                        bisect_right(source, piece.start) : bisect_left(source, end - shift)
                    ]
                    out += [cut + shift for cut in inside]
            out.append(end)
            pos = end
        bounds.append(out)
    return bounds


def _merge_single_use(pieces: list[str], singles: set[str]) -> list[str]:
    """Join neighbouring pieces that occur nowhere else (`singles`): one block reads better than
    two."""
    merged: list[str] = []
    is_prev_single = False
    for piece in pieces:
        is_single = piece in singles
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
