"""StateDag: items point at shared nodes, attribute values, tags and content blocks, stored once.

Content is cut so that every stretch of text repeated across the included items (overlapping
neighbour chunks, a passage retrieved twice, a paragraph two documents share) becomes its own
block wherever it sits. Block ids hash the text, so the same text has the same id in every bundle.
"""

from __future__ import annotations

import hashlib
import re
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

import msgspec

from stream_ctx.core.accumulator import ContextItem
from stream_ctx.core.textmatch import common_run, common_run_back

# Repeats shorter than this cost more in reference framing (~20 tokens) than they save.
MIN_SHARED_CHARS = 96
# Repeats are found through windows of _ANCHOR chars at anchors: word starts whose first
# character is one of a set that begins about a third of English and code words. The rule is
# content-defined, so both copies of a repeat have the same anchors whatever their offsets. A
# repeat is found when an anchor lies inside it: almost surely from about 200 characters,
# usually from MIN_SHARED_CHARS; a repeat with no such word start (a hex blob) never.
_ANCHOR = 48
_ANCHOR_START = re.compile(r"\b[cdeimpruwyCDEIMPRUWY0-4_]")
# Anchor positions of recently seen texts: windows recur across a conversation's finalizes.
_ANCHOR_CACHE_LIMIT = 8192
_anchor_cache: dict[str, array[int]] = {}
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
    """The dedup graph of one bundle's items, in their given order."""

    blocks: dict[str, str]
    item_blocks: list[list[str]]
    block_uses: Counter[str]
    shared: list[SharedAttribute]
    hoisted: frozenset[tuple[str, str, str]]

    @classmethod
    def build(cls, items: Sequence[ContextItem]) -> StateDag:
        pieces = _cut([item.content for item in items])
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
        shared = _shared_attributes(items)
        hoisted = frozenset((s.field, s.name, s.value) for s in shared)
        return cls(blocks, item_blocks, uses, shared, hoisted)

    @classmethod
    def flat(cls, items: Sequence[ContextItem]) -> StateDag:
        """The graph of the naive form: each item's content one block, nothing hoisted."""
        item_blocks = [[block_id(item.content)] if item.content else [] for item in items]
        blocks = {ids[0]: item.content for item, ids in zip(items, item_blocks, strict=True) if ids}
        uses = Counter(bid for ids in item_blocks for bid in ids)
        return cls(blocks, item_blocks, uses, [], frozenset())

    def is_hoisted(self, field: str, name: str, value: str) -> bool:
        """Whether this attribute value or tag is rendered once in the shared header."""
        return (field, name, value) in self.hoisted


def _cut(texts: list[str]) -> list[list[str]]:
    """Split every text at the edges of its repeats, mirrored into every copy until stable."""
    matches = list(_find_matches(texts))
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


def _find_matches(texts: list[str]) -> Iterator[_Match]:
    """Greedy left-to-right maximal repeats of each text against the texts before it."""
    index: dict[str, tuple[int, int]] = {}
    for t, text in enumerate(texts):
        anchors = _anchors(text)
        floor = 0
        for pos in anchors:
            if pos < floor or not index:
                continue
            hit = index.get(text[pos : pos + _ANCHOR])
            if hit is None:
                continue
            src, src_pos = hit
            source = texts[src]
            back = common_run_back(text, pos, source, src_pos, limit=pos - floor)
            ahead = common_run(text, pos, source, src_pos)
            if back + ahead >= MIN_SHARED_CHARS:
                yield _Match(src, src_pos - back, t, pos - back, back + ahead)
                floor = pos + ahead
        for pos in anchors:
            index.setdefault(text[pos : pos + _ANCHOR], (t, pos))


def _anchors(text: str) -> array[int]:
    """Anchors with a full window after them; a pure function, memoised."""
    found = _anchor_cache.get(text)
    if found is None:
        if len(_anchor_cache) >= _ANCHOR_CACHE_LIMIT:
            del _anchor_cache[next(iter(_anchor_cache))]
        end = max(len(text) - _ANCHOR + 1, 0)
        found = array("q", [m.start() for m in _ANCHOR_START.finditer(text, 0, end)])
        _anchor_cache[text] = found
    return found


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
