"""How a text is written in a context: literal runs and references to earlier texts, or a diff
against one of them. The planner (repeats.py) makes plans; the renderer, the dedup graph and
delta bundles read them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ("DIFF_LEAD", "Piece", "Ref", "TextPlan", "renamed", "resolve")

DIFF_LEAD = "[§{} with changes:]\n"


@dataclass(frozen=True, slots=True)
class Ref:
    """`length` characters of text `source` from character `start`, quoted by the first words
    `head` and last words `tail` (both empty: the source's whole text). `source` may be the text
    being planned, for a passage earlier in it."""

    source: int
    start: int
    length: int
    head: str = ""
    tail: str = ""


Piece = str | Ref


@dataclass(frozen=True, slots=True)
class TextPlan:
    """How a text is written: its pieces, or (`diff_of` set) `hunks` against that text; a diff's
    pieces are its unchanged runs and its new lines, for the dedup graph."""

    pieces: list[Piece]
    diff_of: int | None = None
    hunks: str = ""


def resolve(pieces: Sequence[Piece], earlier: Sequence[str]) -> str:
    """Rebuild a text from its pieces and the texts before it (the inverse of planning)."""
    text = ""
    for piece in pieces:
        if isinstance(piece, str):
            text += piece
        else:
            source = earlier[piece.source] if piece.source < len(earlier) else text
            text += source[piece.start : piece.start + piece.length]
    return text


def renamed(plan: TextPlan, names: Mapping[int, int] | Sequence[int]) -> TextPlan:
    """The plan with each text it names (references, a diff's base) named `names[k]` instead of
    k: by place in another order, or by serial."""
    if plan.diff_of is None and not any(isinstance(piece, Ref) for piece in plan.pieces):
        return plan
    pieces = [
        Ref(names[piece.source], piece.start, piece.length, piece.head, piece.tail)
        if isinstance(piece, Ref)
        else piece
        for piece in plan.pieces
    ]
    return TextPlan(pieces, None if plan.diff_of is None else names[plan.diff_of], plan.hunks)
