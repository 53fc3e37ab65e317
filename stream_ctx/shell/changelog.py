"""Conversation state in a compacted changelog topic, co-partitioned with its input topic.

Records (msgpack keys, so any conversation or item id is safe):
  ["i", conversation, item, revision] -> ContextItem      one item version, written once
  ["p", conversation, seq]            -> packed context of bundle `seq` (for prefix reuse)
  ["s", conversation]                 -> ConversationState  counters, position, window keys
Write order per batch makes every state record self-consistent without transactions:
1. item versions and contexts the new states point at; 2. the states; 3. tombstones for
versions no state points at any more. A crash between any two steps leaves each state record
referring only to records already written, and restore drops the orphans.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import msgspec

from stream_ctx.core.accumulator import ContextItem
from stream_ctx.core.processor import ConversationChange, ConversationState, ItemKey

_encoder = msgspec.msgpack.Encoder()
_key_decoder = msgspec.msgpack.Decoder(tuple[str | int, ...])
_item_decoder = msgspec.msgpack.Decoder(ContextItem)
_state_decoder = msgspec.msgpack.Decoder(ConversationState)

Record = tuple[bytes, bytes | None]
"""A changelog record: key and value (None is a tombstone)."""


def item_key(conversation_id: str, key: ItemKey) -> bytes:
    return _encoder.encode(("i", conversation_id, key[0], key[1]))


def state_key(conversation_id: str) -> bytes:
    return _encoder.encode(("s", conversation_id))


def context_key(conversation_id: str, seq: int) -> bytes:
    return _encoder.encode(("p", conversation_id, seq))


@dataclass(slots=True)
class ChangelogWrites:
    """One batch's changelog records, grouped by the write step they belong to."""

    items: list[Record] = field(default_factory=list)
    states: list[Record] = field(default_factory=list)
    tombstones: list[Record] = field(default_factory=list)

    @classmethod
    def of(cls, changes: Iterable[ConversationChange]) -> ChangelogWrites:
        writes = cls()
        for change in changes:
            cid = change.conversation_id
            writes.items.extend(
                (item_key(cid, key), _encoder.encode(item)) for key, item in change.put.items()
            )
            writes.items.extend(
                (context_key(cid, seq), packed) for seq, packed in change.contexts_put.items()
            )
            writes.states.append((state_key(cid), _encoder.encode(change.state)))
            writes.tombstones.extend((item_key(cid, key), None) for key in sorted(change.dropped))
            writes.tombstones.extend(
                (context_key(cid, seq), None) for seq in sorted(change.contexts_dropped)
            )
        return writes


@dataclass(slots=True)
class RestoredPartition:
    """Latest value per key of one changelog partition, resolved into conversations."""

    states: dict[str, ConversationState] = field(default_factory=dict)
    items: dict[tuple[str, str, int], ContextItem] = field(default_factory=dict)
    contexts: dict[tuple[str, int], bytes] = field(default_factory=dict)
    records: int = 0
    # Keep only this conversation's records (reloading one released conversation).
    only: str | None = None

    def apply(self, key: bytes, value: bytes | None) -> None:
        """Fold one changelog record in (later records win, tombstones delete)."""
        self.records += 1
        decoded = _key_decoder.decode(key)
        if self.only is not None and decoded[1] != self.only:
            return
        if decoded[0] == "s":
            cid = str(decoded[1])
            if value is None:
                self.states.pop(cid, None)
            else:
                self.states[cid] = _state_decoder.decode(value)
            return
        if decoded[0] == "p":
            seq_key = (str(decoded[1]), int(decoded[2]))
            if value is None:
                self.contexts.pop(seq_key, None)
            else:
                self.contexts[seq_key] = value
            return
        ident = (str(decoded[1]), str(decoded[2]), int(decoded[3]))
        if value is None:
            self.items.pop(ident, None)
        else:
            self.items[ident] = _item_decoder.decode(value)

    def conversations(
        self,
    ) -> Iterator[tuple[str, ConversationState, list[ContextItem], bytes | None]]:
        """Each conversation's state, the item versions it points at (in window order) and the
        context of its last bundle."""
        for cid, state in self.states.items():
            held = [self.items[(cid, i, r)] for i, r in state.window if (cid, i, r) in self.items]
            yield cid, state, held, self.contexts.get((cid, state.counters.seq))

    def orphans(self) -> list[Record]:
        """Tombstones for records no state points at (left by a crash mid-write)."""
        live = {(cid, i, r) for cid, s in self.states.items() for i, r in s.window}
        stale: list[Record] = [
            (item_key(c, (i, r)), None) for (c, i, r) in self.items if (c, i, r) not in live
        ]
        for cid, seq in self.contexts:
            state = self.states.get(cid)
            if state is None or state.is_ended or state.counters.seq != seq:
                stale.append((context_key(cid, seq), None))
        return stale
