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
    """Latest value per key of one changelog partition, resolved into conversations.

    Folding keeps raw bytes (later records win, tombstones delete) and decodes only the records
    still live at the end: superseded states and item versions, most of an uncompacted log,
    are never decoded. That keeps a restore close to the cost of merely consuming the records.
    """

    records: int = 0
    # Keep only this conversation's records (reloading one released conversation).
    only: str | None = None
    _latest: dict[bytes, bytes] = field(default_factory=dict)
    _resolution: _Resolution | None = None

    def apply(self, key: bytes, value: bytes | None) -> None:
        """Fold one changelog record in."""
        self.records += 1
        self._resolution = None
        if self.only is not None and _key_decoder.decode(key)[1] != self.only:
            return
        if value is None:
            self._latest.pop(key, None)
        else:
            self._latest[key] = value

    def conversations(
        self,
    ) -> Iterator[tuple[str, ConversationState, list[ContextItem], bytes | None]]:
        """Each conversation's state, the item versions it points at (in window order) and the
        context of its last bundle."""
        states, items, contexts = self._resolved()
        for cid, state in states.items():
            keys = [item_key(cid, ref) for ref in state.window]
            held = [_item_decoder.decode(items[k]) for k in keys if k in items]
            yield cid, state, held, contexts.get(context_key(cid, state.counters.seq))

    def orphans(self) -> list[Record]:
        """Tombstones for records no state points at (left by a crash mid-write)."""
        states, items, contexts = self._resolved()
        live = {item_key(cid, ref) for cid, state in states.items() for ref in state.window}
        live |= {
            context_key(cid, state.counters.seq)
            for cid, state in states.items()
            if not state.is_ended
        }
        return [(key, None) for key in [*items, *contexts] if key not in live]

    def _resolved(
        self,
    ) -> tuple[dict[str, ConversationState], dict[bytes, bytes], dict[bytes, bytes]]:
        """States decoded; item and context records still raw, keyed by their record key."""
        states: dict[str, ConversationState] = {}
        items: dict[bytes, bytes] = {}
        contexts: dict[bytes, bytes] = {}
        for key, value in self._latest.items():
            kind, cid = _key_decoder.decode(key)[:2]
            if kind == "s":
                states[str(cid)] = _state_decoder.decode(value)
            elif kind == "p":
                contexts[key] = value
            else:
                items[key] = value
        self._resolution = (states, items, contexts)
        return self._resolution


_Resolution = tuple[dict[str, ConversationState], dict[bytes, bytes], dict[bytes, bytes]]
