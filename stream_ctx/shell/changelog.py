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
from stream_ctx.core.processor import ConversationChange, ConversationState, ItemKey, Restored

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
class ConversationRecords:
    """One conversation's live changelog records, still encoded."""

    state: bytes = b""  # a state record is never empty
    items: dict[bytes, bytes] = field(default_factory=dict)
    contexts: dict[bytes, bytes] = field(default_factory=dict)


@dataclass(slots=True)
class RestoredPartition:
    """Latest value per key of one changelog partition, resolved into conversations.

    Folding keeps raw bytes (later records win, tombstones delete); records are decoded only
    when their conversation is loaded, so superseded versions are never decoded and a restore
    costs little more than consuming the records.
    """

    records: int = 0
    # Keep only this conversation's records (reloading one released conversation).
    only: str | None = None
    _latest: dict[bytes, bytes] = field(default_factory=dict)

    def apply(self, key: bytes, value: bytes | None) -> None:
        """Fold one changelog record in."""
        self.records += 1
        if self.only is not None and _key_decoder.decode(key)[1] != self.only:
            return
        if value is None:
            self._latest.pop(key, None)
        else:
            self._latest[key] = value

    def grouped(self) -> dict[str, ConversationRecords]:
        """The live records of each conversation that has a state."""
        groups: dict[str, ConversationRecords] = {}
        for key, value in self._latest.items():
            kind, cid = _key_decoder.decode(key)[:2]
            group = groups.get(str(cid))
            if group is None:  # not setdefault: that would build a spare group per record
                group = groups[str(cid)] = ConversationRecords()
            if kind == "s":
                group.state = value
            elif kind == "p":
                group.contexts[key] = value
            else:
                group.items[key] = value
        return {cid: group for cid, group in groups.items() if group.state}

    def conversations(
        self,
    ) -> Iterator[tuple[str, ConversationState, list[ContextItem], bytes | None]]:
        """Every conversation, decoded."""
        for cid, group in self.grouped().items():
            state, items, context = load(cid, group)
            yield cid, state, items, context

    def orphans(self) -> list[Record]:
        """Tombstones for records no state points at (left by a crash mid-write)."""
        return [record for cid, group in self.grouped().items() for record in orphans(cid, group)]


def load(cid: str, group: ConversationRecords) -> Restored:
    """Decode one conversation's state and the records it points at."""
    state = _state_decoder.decode(group.state)
    keys = [item_key(cid, ref) for ref in state.window]
    items = [_item_decoder.decode(group.items[k]) for k in keys if k in group.items]
    return state, items, group.contexts.get(context_key(cid, state.counters.seq))


def orphans(cid: str, group: ConversationRecords) -> list[Record]:
    """Tombstones for this conversation's records its state does not point at."""
    state = _state_decoder.decode(group.state)
    live = {item_key(cid, ref) for ref in state.window}
    if not state.is_ended:
        live.add(context_key(cid, state.counters.seq))
    return [(key, None) for key in [*group.items, *group.contexts] if key not in live]
