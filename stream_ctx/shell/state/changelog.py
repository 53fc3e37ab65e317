"""Conversation state in a compacted changelog topic, co-partitioned with its input topic.

Records (msgpack keys, so any conversation or item id is safe):
  ["i", conversation, item, revision] -> ContextItem      one item version, written once
  ["p", conversation, seq]            -> packed context of bundle `seq` (for prefix reuse)
  ["s", conversation]                 -> ConversationState  counters, position, window keys
They are written in the order the commit protocol numbers (state/checkpoint.py), so every state
record refers only to records already written, and restore drops the orphans a crash leaves.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from stream_ctx.core.conversation.changes import (
    ConversationChange,
    ConversationState,
    ItemKey,
    Restored,
)
from stream_ctx.core.window.accumulator import ContextItem

__all__ = (
    "ChangelogRecord",
    "ChangelogWrites",
    "Record",
    "RestoredPartition",
    "context_key",
    "item_key",
    "state_key",
)


class _KeyHead(msgspec.Struct, array_like=True, gc=False):
    """A changelog key's kind and conversation; the rest of the key is skipped, not decoded."""

    kind: str
    conversation: str


_encoder = msgspec.msgpack.Encoder()
_head_decoder = msgspec.msgpack.Decoder(_KeyHead)
_item_decoder = msgspec.msgpack.Decoder(ContextItem)
_state_decoder = msgspec.msgpack.Decoder(ConversationState)


class _Position(msgspec.Struct, gc=False):
    """A state's input position alone; its other fields are skipped, not decoded."""

    position: int


_position_decoder = msgspec.msgpack.Decoder(_Position)


class ChangelogRecord(Protocol):
    """A changelog record as read back (aiokafka's ConsumerRecord is one): key and value, None
    for a tombstone."""

    @property
    def key(self) -> bytes: ...

    @property
    def value(self) -> bytes | None: ...


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

    Folding keeps raw bytes (later records win, tombstones delete). Only state keys are decoded
    up front; the rest of a conversation is decoded when it is loaded, found by bisection in the
    sorted keys (one sort, in C), so a restore costs little more than consuming the records.
    """

    records: int = 0
    # Keep only this conversation's records (reloading one released conversation).
    only: str | None = None
    _latest: dict[bytes, bytes] = field(default_factory=dict)
    _sorted: list[bytes] | None = None

    def fold(self, records: Sequence[ChangelogRecord]) -> None:
        """Fold records in, in offset order: later records win, tombstones delete. One loop
        over a fetch's records, not a call per record."""
        self.records += len(records)
        self._sorted = None
        latest, only, head = self._latest, self.only, _head_decoder.decode
        for record in records:
            if only is not None and head(record.key).conversation != only:
                continue
            value = record.value
            if value is None:
                latest.pop(record.key, None)
            else:
                latest[record.key] = value

    def conversation_ids(self) -> list[str]:
        """Every conversation that has a state, in key order."""
        return [_head_decoder.decode(key).conversation for key in self._run(_key_prefix(2, "s"))]

    def end_offset(self) -> int | None:
        """One past the highest input offset a state here has applied (None: no state). The
        input log reaches it, unless the log was emptied after the states were written."""
        latest, decode = self._latest, _position_decoder.decode
        positions = [decode(latest[key]).position for key in self._run(_key_prefix(2, "s"))]
        return max(positions) + 1 if positions else None

    def conversations(
        self,
    ) -> Iterator[tuple[str, ConversationState, list[ContextItem], bytes | None]]:
        """Every conversation, decoded."""
        for cid in self.conversation_ids():
            state, items, context = self.load(cid)
            yield cid, state, items, context

    def load(self, cid: str) -> Restored:
        """Decode one conversation's state and the records it points at."""
        latest = self._latest
        state = _state_decoder.decode(latest[state_key(cid)])
        keys = [item_key(cid, ref) for ref in state.window]
        items = [_item_decoder.decode(latest[k]) for k in keys if k in latest]
        return state, items, latest.get(context_key(cid, state.counters.seq))

    def orphans(self, cid: str) -> list[Record]:
        """Tombstones for this conversation's records its state does not point at (left by a
        crash mid-write)."""
        state = _state_decoder.decode(self._latest[state_key(cid)])
        live = {item_key(cid, ref) for ref in state.window}
        if not state.is_ended:
            live.add(context_key(cid, state.counters.seq))
        kept = [*self._run(_key_prefix(4, "i", cid)), *self._run(_key_prefix(3, "p", cid))]
        return [(key, None) for key in kept if key not in live]

    def _run(self, prefix: bytes) -> list[bytes]:
        """The keys that start with `prefix`: adjacent once sorted."""
        if self._sorted is None:
            self._sorted = sorted(self._latest)
        keys = self._sorted
        start = end = bisect_left(keys, prefix)
        while end < len(keys) and keys[end].startswith(prefix):
            end += 1
        return keys[start:end]


def _key_prefix(arity: int, *head: str) -> bytes:
    """How every key that is an array of `arity` elements starting with `head` begins: the
    msgpack header of a short array (0x90 + arity), then each element of `head` encoded. A str's
    encoding never starts another's, so a prefix naming a conversation matches only its keys."""
    return bytes((0x90 + arity,)) + b"".join(_encoder.encode(x) for x in head)
