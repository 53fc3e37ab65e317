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
from functools import lru_cache
from itertools import pairwise

import msgspec

from stream_ctx.core.accumulator import ContextItem
from stream_ctx.core.repeats import Piece, Ref

# 48 bits: collision-free in practice for the few thousand blocks a bundle holds.
_BLOCK_ID_BYTES = 6


@lru_cache(maxsize=1 << 16)
def block_id(text: str) -> str:
    """Content address of a block: same text, same id, in every bundle."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=_BLOCK_ID_BYTES)
    return "b" + digest.hexdigest()


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
    def build(cls, items: Sequence[ContextItem], parsed: Sequence[Sequence[Piece]]) -> StateDag:
        """The graph of `items` whose contents parse into `parsed` (parse_repeats)."""
        contents = [item.content for item in items]
        spans = _spans(contents, parsed)
        pieces = [[contents[n][a:b] for a, b in item_spans] for n, item_spans in enumerate(spans)]
        piece_uses = Counter(piece for item_pieces in pieces for piece in item_pieces)
        pieces = [_merge_single_use(item_pieces, piece_uses) for item_pieces in pieces]
        blocks: dict[str, str] = {}
        item_blocks: list[list[str]] = []
        for item_pieces in pieces:
            ids = []
            for text in item_pieces:
                bid = block_id(text)
                blocks.setdefault(bid, text)
                ids.append(bid)
            item_blocks.append(ids)
        uses = Counter(bid for ids in item_blocks for bid in ids)
        return cls(blocks, item_blocks, uses, _shared_attributes(items))


Span = tuple[int, int]


def _spans(contents: list[str], parsed: Sequence[Sequence[Piece]]) -> list[list[Span]]:
    """Each content as block spans: literal runs cut where a later reference starts or ends in
    them, and each reference as the spans of its source over the copied range."""
    cuts: list[set[int]] = [set() for _ in contents]
    for pieces in parsed:
        for piece in pieces:
            if isinstance(piece, Ref):
                cuts[piece.source].update((piece.start, piece.start + piece.length))
    spans: list[list[Span]] = []
    ends: dict[int, list[int]] = {}
    for n, pieces in enumerate(parsed):
        edges = sorted(cuts[n])
        out: list[Span] = []
        pos = 0
        for piece in pieces:
            if isinstance(piece, str):
                end = pos + len(piece)
                inside = edges[bisect_right(edges, pos) : bisect_left(edges, end)]
                out += pairwise([pos, *inside, end])
            elif piece.source == n:
                end = pos + piece.length  # a copy of this text's own earlier part: one block
                out.append((pos, end))
            else:
                end = pos + piece.length
                source = spans[piece.source]
                if piece.source not in ends:
                    ends[piece.source] = [b for _, b in source]
                out += _copied(source, ends[piece.source], piece.start, piece.length, pos)
            pos = end
        spans.append(out)
    return spans


def _copied(source: list[Span], ends: list[int], start: int, length: int, at: int) -> list[Span]:
    """The source's spans (which tile it; `ends` their ends) over [start, start + length),
    clipped, moved to begin at `at`."""
    stop, shift = start + length, at - start
    first, last = bisect_right(ends, start), bisect_left(ends, stop)
    if first == last:
        return [(at, at + length)]
    inner = [(a + shift, b + shift) for a, b in source[first + 1 : last]]
    return [(at, ends[first] + shift), *inner, (source[last][0] + shift, stop + shift)]


def _merge_single_use(pieces: list[str], uses: Counter[str]) -> list[str]:
    """Join neighbouring pieces that occur nowhere else: one block reads better than two."""
    merged: list[str] = []
    is_prev_single = False
    for piece in pieces:
        is_single = uses[piece] == 1
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
