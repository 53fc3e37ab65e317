"""What a conversation's last finalize learned, kept for its next one: bounded by the items the
kept conversations hold, in one table a group member's processors may share (a conversation
lives in one of them), so memory does not grow with the partitions a member owns."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cachetools import LRUCache

from stream_ctx.core.assembly.assembler import DagContextAssembler
from stream_ctx.core.assembly.delta import SentState, unpack_sent

__all__ = ("LEARNED_ITEMS", "Learned", "Learning")

LEARNED_ITEMS = 8192
"""Held items of the conversations whose learning is kept, by default: about 100 MB at ~12 KB an
item of ~1 KB (its lines indexed, its plan and entry); the conversations that finalized least
recently start afresh, as if restored."""


@dataclass(slots=True)
class Learned:
    """One conversation's learning: its assembler (the window's texts indexed, planned and
    written), and its sent state unpacked beside the packed bytes it stands for."""

    assembler: DagContextAssembler
    sent: tuple[bytes, SentState] | None = None

    def sent_state(self, packed: bytes | None) -> SentState | None:
        if packed is None:
            return None
        if self.sent is None or self.sent[0] is not packed:
            self.sent = packed, unpack_sent(packed)
        return self.sent[1]


def _items_held(learned: Learned) -> int:
    return learned.assembler.held


class Learning:
    """The learning of the conversations that finalized last, up to `max_items` held items in
    all (0 keeps none); the least recent go first. Nothing kept changes a byte."""

    __slots__ = ("_kept",)

    def __init__(self, max_items: int = LEARNED_ITEMS) -> None:
        self._kept: LRUCache[str, Learned] = LRUCache(maxsize=max_items, getsizeof=_items_held)

    def take(self, conversation_id: str) -> Learned | None:
        """A conversation's learning, out of the table until it is kept again."""
        return self._kept.pop(conversation_id, None)

    def keep(self, conversation_id: str, learned: Learned) -> None:
        """Keep a conversation's learning as the most recent, if it fits at all."""
        if _items_held(learned) <= self._kept.maxsize:
            self._kept[conversation_id] = learned

    def drop(self, conversation_ids: Iterable[str]) -> None:
        """Forget these conversations' learning (they ended, were released or moved away)."""
        for cid in conversation_ids:
            self._kept.pop(cid, None)

    @property
    def items(self) -> int:
        """Held items of the conversations kept."""
        return int(self._kept.currsize)
