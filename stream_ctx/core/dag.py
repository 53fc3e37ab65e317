"""StateDag: items point at shared nodes, attribute values, tags and content blocks, stored once.

Content is cut at the edges of every reference the repeat parse found (repeats.py), mirrored into
every copy, so each repeated stretch is one block wherever it sits. Block ids hash the text, so
the same text has the same id in every bundle.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import msgspec

from stream_ctx.core.accumulator import ContextItem
from stream_ctx.core.repeats import Piece, Ref

# 48 bits: collision-free in practice for the few thousand blocks a bundle holds.
_BLOCK_ID_BYTES = 6


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
class _Match:
    """Equal text at `[a_pos, a_pos + length)` of text `a` and `[b_pos, ...)` of text `b`."""

    a: int
    a_pos: int
    b: int
    b_pos: int
    length: int


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
        pieces = _cut([item.content for item in items], _matches(parsed))
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


def _matches(parsed: Sequence[Sequence[Piece]]) -> list[_Match]:
    """Every reference as a pair of equal stretches: its source and where it is used."""
    matches = []
    for n, pieces in enumerate(parsed):
        pos = 0
        for piece in pieces:
            if isinstance(piece, Ref):
                matches.append(_Match(piece.source, piece.start, n, pos, piece.length))
                pos += piece.length
            else:
                pos += len(piece)
    return matches


def _cut(texts: list[str], matches: list[_Match]) -> list[list[str]]:
    """Split every text at the edges of its repeats, mirrored into every copy until stable."""
    cuts = [{0, len(text)} for text in texts]
    for m in matches:
        cuts[m.a].update((m.a_pos, m.a_pos + m.length))
        cuts[m.b].update((m.b_pos, m.b_pos + m.length))
    # Each pass only adds cuts and there are at most sum(len) of them, so this terminates.
    is_changed = True
    while is_changed:
        is_changed = False
        for m in matches:
            is_changed |= _mirror(cuts[m.a], m.a_pos, cuts[m.b], m.b_pos, m.length)
            is_changed |= _mirror(cuts[m.b], m.b_pos, cuts[m.a], m.a_pos, m.length)
    pieces = []
    for text, text_cuts in zip(texts, cuts, strict=True):
        edges = sorted(text_cuts)
        pieces.append([text[i:j] for i, j in pairwise(edges) if j > i])
    return pieces


def _mirror(src: set[int], src_pos: int, dst: set[int], dst_pos: int, length: int) -> bool:
    """Copy the cuts inside one copy of a repeat to the same offsets in the other copy."""
    missing = {dst_pos + c - src_pos for c in src if src_pos < c < src_pos + length} - dst
    dst |= missing
    return bool(missing)


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
