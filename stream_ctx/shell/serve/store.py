"""The latest bundles per conversation in memory: least recently used conversations out first,
and a few newest bundles kept for each."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
from cachetools import Cache, LRUCache

from stream_ctx.core.wire.bundle import Bundle

__all__ = ("BundleHead", "BundleStore", "Kept")

_bundle_decoder = msgspec.json.Decoder(Bundle)


class BundleHead(msgspec.Struct, frozen=True):
    """The fields a bundle is filed by; the rest stays encoded until someone asks for it."""

    bundle_id: str
    conversation_id: str
    seq: int
    request_id: str | None = None


_head_decoder = msgspec.json.Decoder(BundleHead)


@dataclass(frozen=True, slots=True)
class Kept:
    """One bundle as it came off the topic: its head and its bytes, sent as they are."""

    head: BundleHead
    raw: bytes

    @classmethod
    def from_record(cls, raw: bytes) -> Kept:
        """Raises msgspec.DecodeError when `raw` is not a bundle."""
        return cls(_head_decoder.decode(raw), raw)

    def bundle(self) -> Bundle:
        """The whole bundle, decoded on demand (the context text, the stats)."""
        return _bundle_decoder.decode(self.raw)


class BundleStore:
    """Bounded twice: `max_conversations` by recency of use, `max_bundles` per conversation."""

    def __init__(self, *, max_conversations: int, max_bundles: int) -> None:
        self._held: LRUCache[str, tuple[Kept, ...]] = LRUCache(maxsize=max_conversations)
        self._max_bundles = max_bundles

    def __len__(self) -> int:
        return len(self._held)

    def add(self, kept: Kept) -> bool:
        """File a bundle; False for a copy of one already kept (publishing is at-least-once, and
        a repeat is byte-identical).

        The newest is the last to arrive: one conversation's bundles share a partition, so
        arrival order is the processor's order. An id with other bytes is a new bundle (a
        topic written before restarted conversations numbered on holds such repeats).
        """
        cid = kept.head.conversation_id
        bundles = self._held.get(cid, ())
        if any(k.raw == kept.raw for k in bundles if k.head.bundle_id == kept.head.bundle_id):
            return False
        others = tuple(k for k in bundles if k.head.seq != kept.head.seq)
        self._held[cid] = (*others, kept)[-self._max_bundles :]
        return True

    def latest(self, conversation_id: str) -> Kept | None:
        """The newest bundle of a conversation, which becomes the most recently used."""
        bundles = self._held.get(conversation_id)
        return bundles[-1] if bundles else None

    def heads(self) -> list[BundleHead]:
        """The latest bundle's head of every held conversation, leaving recency as it was."""
        return [Cache.__getitem__(self._held, cid)[-1].head for cid in list(self._held)]

    def by_seq(self, conversation_id: str, seq: int) -> Kept | None:
        """One kept bundle by its sequence number, if still held."""
        for kept in self._held.get(conversation_id, ()):
            if kept.head.seq == seq:
                return kept
        return None
