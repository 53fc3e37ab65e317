"""ContextProcessor: applies events to per-conversation windows and builds bundles.

Deterministic: the same events in the same order give byte-identical bundles, whether they come
from a file (`stream-ctx replay`) or from Kafka. `position` is where an event sits in its input
(a Kafka offset, or a line number); an event at or below a conversation's last applied position
is skipped, which is how restored state never applies an event twice.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from stream_ctx.core.assembly.assembler import DagContextAssembler
from stream_ctx.core.assembly.delta import SentState, pack_sent, unpack_sent
from stream_ctx.core.assembly.finalize import Conversation, finalize
from stream_ctx.core.assembly.learning import Learned, Learning
from stream_ctx.core.assembly.prefix import pack_context, unpack_context
from stream_ctx.core.conversation.changes import (
    ConversationChange,
    ConversationState,
    ItemKey,
    Restored,
)
from stream_ctx.core.counting.tokenizer import Tokenizer, get_tokenizer
from stream_ctx.core.memo import Memos
from stream_ctx.core.text.engine import Core, load_core
from stream_ctx.core.window.accumulator import (
    AddResult,
    BundleAccumulator,
    ContextItem,
    RankedItem,
    WindowCounters,
)
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.events import End, Event, Finalize, Retrieval
from stream_ctx.errors import ConversationReleasedError, FinalizeRefusedError

__all__ = ("ContextProcessor", "ItemEvent", "ItemOutcomes")

# How many restored, untouched conversations one idle sweep loads to check them.
_DORMANT_LOADS_PER_SWEEP = 10_000


@dataclass(slots=True)
class ItemOutcomes:
    """How many offered items were accepted (merges included), rejected, and evicted."""

    accepted: int = 0
    rejected: int = 0
    evicted: int = 0

    def count(self, result: AddResult) -> None:
        if result.is_accepted:
            self.accepted += 1
        else:
            self.rejected += 1
        if result.evicted is not None:
            self.evicted += 1


@dataclass(frozen=True, slots=True)
class ItemEvent:
    """One offered item's outcome and the event that offered it (for an inspector's timeline)."""

    conversation_id: str
    ts: int
    position: int
    result: AddResult


@dataclass(slots=True)
class _Conversation:
    window: BundleAccumulator
    last_ts: int
    position: int
    previous_context: bytes | None = None
    # The SentState, packed (pack_sent): held by every conversation, read only at a finalize.
    sent: bytes | None = None

    def sent_state(self) -> SentState | None:
        """What the model's history holds after the last bundle, unpacked."""
        return unpack_sent(self.sent) if self.sent is not None else None


@dataclass(frozen=True, slots=True)
class _Gone:
    """An ended or expired conversation: where it closed, its last bundle's seq (a restart
    numbers on from it) and why ("ended" or "expired")."""

    position: int
    seq: int
    reason: str


@dataclass(frozen=True, slots=True)
class _Released:
    """What stays in memory of an idle conversation released on stream time: enough to restart
    or end it; a late event within the TTL needs its full state restored first."""

    last_ts: int
    position: int
    keys: tuple[ItemKey, ...]
    context_seq: int | None
    seq: int


class ContextProcessor:
    """All conversations of one input (a partition, or a replayed file). What the last finalizes
    learned goes to `learning` (a member's processors may share one, as they may share `memos`):
    the next finalize is faster, and no byte changes."""

    def __init__(
        self,
        config: BundleConfig,
        *,
        tokenizer: Tokenizer | None = None,
        is_tracking_changes: bool = False,
        is_recording_items: bool = False,
        memos: Memos | None = None,
        learning: Learning | None = None,
        core: Core | None = None,
    ) -> None:
        self.config = config
        self.core = core if core is not None else load_core(config.core)
        self.tokenizer = tokenizer if tokenizer is not None else get_tokenizer(config.tokenizer)
        self.memos = memos if memos is not None else Memos()
        self.conversations: dict[str, _Conversation] = {}
        self._learning = learning if learning is not None else Learning()
        self.stream_time_ms = 0
        self._last_position = -1
        self._released: dict[str, _Released] = {}
        self._dormant: dict[str, Callable[[], Restored]] = {}
        self._gone: dict[str, _Gone] = {}
        self._is_tracking = is_tracking_changes
        self._changes: dict[str, ConversationChange] = {}
        self._outcomes = ItemOutcomes()
        self._item_events: list[ItemEvent] | None = [] if is_recording_items else None

    def apply(self, event: Event, *, position: int | None = None) -> Bundle | None:
        """Apply one event at `position` (increasing per input; by default one past the last)
        and return a finalize's bundle."""
        if position is None:
            position = self._last_position + 1
        self._last_position = max(self._last_position, position)
        cid = event.conversation_id
        load = self._dormant.pop(cid, None)
        if load is not None:
            self.restore(cid, *load())
        conv = self.conversations.get(cid)
        gone = self._gone.get(cid)
        floor = conv.position if conv is not None else gone.position if gone else None
        if floor is not None and position <= floor:
            return None
        ttl_ms = self.config.conversation_ttl_ms
        released = self._released.get(cid)
        if released is not None:
            if position <= released.position:
                return None
            is_expired = ttl_ms is not None and event.ts - released.last_ts > ttl_ms
            if not is_expired and not isinstance(event, End):
                raise ConversationReleasedError(cid)
            del self._released[cid]
            self._discard(cid, released, position, is_ended=isinstance(event, End))
        self.stream_time_ms = max(self.stream_time_ms, event.ts)
        if conv is not None and ttl_ms is not None and event.ts - conv.last_ts > ttl_ms:
            self._close(cid, conv, position, is_ended=False)
            conv = None
        if isinstance(event, End):
            if conv is not None:
                self._close(cid, conv, position, is_ended=True)
            gone = self._gone.get(cid)
            if gone is not None:  # one never seen stays unknown: nothing of it is persisted
                self._gone[cid] = _Gone(position, gone.seq, "ended")
            return None
        if conv is None:
            gone = self._gone.get(cid)
            if isinstance(event, Finalize):
                # No window to answer from: an empty bundle would replace the last good one.
                raise FinalizeRefusedError(cid, gone.reason if gone else "unknown")
            # Seq goes on from the last incarnation's, so bundle ids never repeat.
            self._gone.pop(cid, None)
            counters = WindowCounters(seq=gone.seq if gone else 0)
            conv = self.conversations[cid] = _Conversation(
                BundleAccumulator(self.config, counters=counters), event.ts, position
            )
        conv.last_ts, conv.position = event.ts, position
        change = self._change(cid, conv)
        if isinstance(event, Retrieval):
            self._add(conv.window, event, position, change)
            return None
        bundle, packed = self._finalize(cid, conv, event)
        if change is not None:
            if conv.previous_context is not None:
                change.drop_context(bundle.seq - 1)
            change.contexts_put[bundle.seq] = packed
        conv.previous_context = packed
        return bundle

    def restore_lazily(self, conversation_id: str, load: Callable[[], Restored]) -> None:
        """Register a persisted conversation to be loaded by `load` when its next event comes:
        a restore then costs little more than reading the changelog, and idle ones stay small."""
        self._dormant[conversation_id] = load

    @property
    def held(self) -> int:
        """Conversations in memory, loaded or waiting to be."""
        return len(self.conversations) + len(self._dormant)

    def restore(
        self,
        conversation_id: str,
        state: ConversationState,
        items: Iterable[ContextItem],
        previous_context: bytes | None = None,
    ) -> None:
        """Load a conversation's persisted state (changelog recovery)."""
        self._released.pop(conversation_id, None)
        self._learning.drop([conversation_id])
        if state.is_ended:
            seq = state.counters.seq
            reason = "expired" if state.is_expired else "ended"
            self._gone[conversation_id] = _Gone(state.position, seq, reason)
            self.conversations.pop(conversation_id, None)
            return
        self._gone.pop(conversation_id, None)
        window = BundleAccumulator(self.config, counters=state.counters, items=items)
        sent = pack_sent(state.sent) if state.sent is not None else None
        self.conversations[conversation_id] = _Conversation(
            window, state.last_ts, state.position, previous_context, sent
        )

    def release_idle(self) -> int:
        """Free the memory of conversations idle longer than the TTL on this input's stream time.

        Their state stays in the changelog. Their next event restarts or ends them exactly as
        if they had been held, except a late one (event time within the TTL of their last
        event), which raises ConversationReleasedError so the shell restores them first. So
        releasing never changes a bundle. Returns how many were released.
        """
        ttl_ms = self.config.conversation_ttl_ms
        if ttl_ms is None:
            return 0
        # Restored conversations not touched since are loaded a bounded number per sweep, so a
        # big restore never stalls the stream and idle ones are released in time.
        for cid in list(itertools.islice(self._dormant, _DORMANT_LOADS_PER_SWEEP)):
            self.restore(cid, *self._dormant.pop(cid)())
        idle = [
            cid
            for cid, conv in self.conversations.items()
            if self.stream_time_ms - conv.last_ts > ttl_ms and cid not in self._changes
        ]
        for cid in idle:
            conv = self.conversations.pop(cid)
            self._learning.drop([cid])
            keys = tuple((it.id, it.revision) for it in conv.window.items.values())
            seq = conv.window.counters.seq if conv.previous_context is not None else None
            self._released[cid] = _Released(
                conv.last_ts, conv.position, keys, seq, conv.window.counters.seq
            )
        return len(idle)

    def forget(self, conversation_ids: Iterable[str]) -> None:
        """Drop conversations from memory (their partition was revoked); state stays durable."""
        for cid in conversation_ids:
            self.conversations.pop(cid, None)
            self._dormant.pop(cid, None)
            self._released.pop(cid, None)
            self._gone.pop(cid, None)
            self._changes.pop(cid, None)
            self._learning.drop([cid])

    def drop_learning(self) -> None:
        """Forget what this input's finalizes learned (its partition moves away)."""
        self._learning.drop(self.conversations)

    def take_item_outcomes(self) -> ItemOutcomes:
        """Items accepted, rejected and evicted since the last call (for metrics)."""
        outcomes, self._outcomes = self._outcomes, ItemOutcomes()
        return outcomes

    def take_item_events(self) -> list[ItemEvent]:
        """Each offered item's outcome since the last call, in order; empty unless recording."""
        if self._item_events is None:
            return []
        events, self._item_events = self._item_events, []
        return events

    def window_of(self, conversation_id: str, *, now_ms: int) -> list[RankedItem] | None:
        """A loaded conversation's window ranked at `now_ms` (read-only); None if not loaded."""
        conv = self.conversations.get(conversation_id)
        return conv.window.ranked(now_ms=now_ms) if conv is not None else None

    def take_changes(self) -> list[ConversationChange]:
        """Changes since the last call, one per touched conversation, in first-touch order."""
        changes = list(self._changes.values())
        self._changes = {}
        for change in changes:
            conv = self.conversations.get(change.conversation_id)
            if conv is not None:
                change.state.window = [(it.id, it.revision) for it in conv.window.items.values()]
                change.state.sent = conv.sent_state()
        return changes

    def state_of(self, conversation_id: str) -> ConversationState | None:
        """The state a changelog would hold for this conversation now."""
        conv = self.conversations.get(conversation_id)
        if conv is None:
            return None
        return self._state(conv)

    def _add(
        self,
        window: BundleAccumulator,
        event: Retrieval,
        position: int,
        change: ConversationChange | None,
    ) -> None:
        for offered in event.items:
            held = window.items.get(offered.id)
            result = window.add(offered, now_ms=event.ts, revision=position)
            self._outcomes.count(result)
            if self._item_events is not None:
                self._item_events.append(
                    ItemEvent(event.conversation_id, event.ts, position, result)
                )
            if change is None or not result.is_accepted:
                continue
            if held is not None:
                change.drop((held.id, held.revision))
            if result.evicted is not None:
                change.drop((result.evicted.id, result.evicted.revision))
            change.put[(offered.id, position)] = window.items[offered.id]

    def _finalize(self, cid: str, conv: _Conversation, event: Finalize) -> tuple[Bundle, bytes]:
        """The bundle, and its full context packed (kept for the next one's prefix reuse)."""
        conv.window.counters.seq += 1
        learned = self._learning.take(cid)
        if learned is None:
            learned = Learned(DagContextAssembler(self.tokenizer, memos=self.memos, core=self.core))
        previous = conv.previous_context
        conversation = Conversation(
            cid,
            conv.window.ranked(now_ms=event.ts),
            conv.window.counters,
            learned.sent_state(conv.sent),
            unpack_context(previous) if previous is not None else None,
        )
        done = finalize(conversation, event, config=self.config, assembler=learned.assembler)
        conv.sent = pack_sent(done.sent)
        learned.sent = conv.sent, done.sent
        self._learning.keep(cid, learned)
        return done.bundle, pack_context(done.full_context)

    def _change(self, cid: str, conv: _Conversation) -> ConversationChange | None:
        if not self._is_tracking:
            return None
        change = self._changes.get(cid)
        if change is None:
            change = self._changes[cid] = ConversationChange(cid, self._state(conv))
        else:
            change.state = self._state(conv)
        return change

    def _close(self, cid: str, conv: _Conversation, position: int, *, is_ended: bool) -> None:
        """End or expire a held conversation: its items are dropped from the changelog."""
        del self.conversations[cid]
        self._learning.drop([cid])
        keys = tuple((it.id, it.revision) for it in conv.window.items.values())
        seq = conv.window.counters.seq if conv.previous_context is not None else None
        gone = _Released(conv.last_ts, conv.position, keys, seq, conv.window.counters.seq)
        self._discard(cid, gone, position, is_ended=is_ended)

    def _discard(self, cid: str, gone: _Released, position: int, *, is_ended: bool) -> None:
        """Tombstone a conversation's records, leaving a "closed at `position`" state that
        keeps its seq."""
        self._gone[cid] = _Gone(position, gone.seq, "ended" if is_ended else "expired")
        if not self._is_tracking:
            return
        marker = ConversationState(
            counters=WindowCounters(seq=gone.seq),
            last_ts=gone.last_ts,
            position=position,
            is_ended=True,
            is_expired=not is_ended,
        )
        change = self._changes.setdefault(cid, ConversationChange(cid, marker))
        for key in gone.keys:
            change.drop(key)
        if gone.context_seq is not None:
            change.drop_context(gone.context_seq)
        change.state = marker

    @staticmethod
    def _state(conv: _Conversation) -> ConversationState:
        return ConversationState(
            counters=conv.window.counters, last_ts=conv.last_ts, position=conv.position
        )
