"""ContextProcessor: applies events to per-conversation windows and builds bundles.

Deterministic: the same events in the same order give byte-identical bundles, whether they come
from a file (`stream-ctx replay`) or from Kafka. `position` is where an event sits in its input
(a Kafka offset, or a line number); an event at or below a conversation's last applied position
is skipped, which is how restored state never applies an event twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from stream_ctx.core.assembly.assembler import DagContextAssembler
from stream_ctx.core.assembly.delta import pack_sent
from stream_ctx.core.assembly.finalize import Conversation, finalize
from stream_ctx.core.assembly.learning import Learned, Learning
from stream_ctx.core.assembly.prefix import pack_context, unpack_context
from stream_ctx.core.conversation.changes import ConversationChange, ConversationState, Restored
from stream_ctx.core.conversation.lifecycle import Closed, HeldConversation, Lifecycle
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
from stream_ctx.core.wire.events import Event, Finalize, Retrieval

__all__ = ("ContextProcessor", "ItemEvent", "ItemOutcomes")


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


class ContextProcessor:
    """All conversations of one input (a partition, or a replayed file): each event goes to the
    window its conversation's lifecycle names, and a finalize makes a bundle of it. What the last
    finalizes learned goes to `learning` (a member's processors may share one, as they may share
    `memos`): the next finalize is faster, and no byte changes."""

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
        self._learning = learning if learning is not None else Learning()
        self.lifecycle = Lifecycle(config, self._learning, on_close=self._closed)
        self._last_position = -1
        self._is_tracking = is_tracking_changes
        self._changes: dict[str, ConversationChange] = {}
        self._outcomes = ItemOutcomes()
        self._item_events: list[ItemEvent] | None = [] if is_recording_items else None

    @property
    def conversations(self) -> dict[str, HeldConversation]:
        """The conversations held in memory, by id."""
        return self.lifecycle.held

    @property
    def stream_time_ms(self) -> int:
        """The latest event time this input has seen (0 before any)."""
        return self.lifecycle.stream_time_ms

    @property
    def held(self) -> int:
        """Conversations in memory, loaded or waiting to be."""
        return self.lifecycle.count

    def apply(self, event: Event, *, position: int | None = None) -> Bundle | None:
        """Apply one event at `position` (increasing per input; by default one past the last)
        and return a finalize's bundle."""
        if position is None:
            position = self._last_position + 1
        self._last_position = max(self._last_position, position)
        conv = self.lifecycle.enter(event, position)
        if conv is None:
            return None
        change = self._change(event.conversation_id, conv)
        if isinstance(event, Retrieval):
            self._add(conv.window, event, position, change)
        elif isinstance(event, Finalize):  # an end closed its conversation in `enter`
            return self._finalize(conv, event, change)
        return None

    def restore_lazily(self, conversation_id: str, load: Callable[[], Restored]) -> None:
        """Register a persisted conversation to be loaded by `load` when its next event comes:
        a restore then costs little more than reading the changelog, and idle ones stay small."""
        self.lifecycle.restore_lazily(conversation_id, load)

    def restore(
        self,
        conversation_id: str,
        state: ConversationState,
        items: Iterable[ContextItem],
        previous_context: bytes | None = None,
    ) -> None:
        """Load a conversation's persisted state (changelog recovery)."""
        self.lifecycle.restore(conversation_id, state, items, previous_context)

    def release_idle(self) -> int:
        """Free the memory of conversations idle longer than the TTL on this input's stream time.

        Their state stays in the changelog. Their next event restarts or ends them exactly as
        if they had been held, except a late one (event time within the TTL of their last
        event), which raises ConversationReleasedError so the shell restores them first. So
        releasing never changes a bundle. Returns how many were released.
        """
        return self.lifecycle.release_idle(is_busy=self._changes.__contains__)

    def forget(self, conversation_ids: Iterable[str]) -> None:
        """Drop conversations from memory (their partition was revoked); state stays durable."""
        conversation_ids = list(conversation_ids)
        self.lifecycle.forget(conversation_ids)
        for cid in conversation_ids:
            self._changes.pop(cid, None)

    def drop_learning(self) -> None:
        """Forget what this input's finalizes learned (its partition moves away)."""
        self._learning.drop(self.lifecycle.held)

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
        conv = self.lifecycle.held.get(conversation_id)
        return conv.window.ranked(now_ms=now_ms) if conv is not None else None

    def take_changes(self) -> list[ConversationChange]:
        """Changes since the last call, one per touched conversation, in first-touch order."""
        changes = list(self._changes.values())
        self._changes = {}
        for change in changes:
            conv = self.lifecycle.held.get(change.conversation_id)
            if conv is not None:
                change.state.window = [(it.id, it.revision) for it in conv.window.items.values()]
                change.state.sent = conv.sent_state()
        return changes

    def state_of(self, conversation_id: str) -> ConversationState | None:
        """The state a changelog would hold for this conversation now."""
        conv = self.lifecycle.held.get(conversation_id)
        return conv.state() if conv is not None else None

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

    def _finalize(
        self, conv: HeldConversation, event: Finalize, change: ConversationChange | None
    ) -> Bundle:
        """The bundle; its full context is packed and kept for the next one's prefix reuse."""
        cid = event.conversation_id
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
        packed = pack_context(done.full_context)
        if change is not None:
            if previous is not None:
                change.drop_context(done.bundle.seq - 1)
            change.contexts_put[done.bundle.seq] = packed
        conv.previous_context = packed
        return done.bundle

    def _change(self, cid: str, conv: HeldConversation) -> ConversationChange | None:
        if not self._is_tracking:
            return None
        change = self._changes.get(cid)
        if change is None:
            change = self._changes[cid] = ConversationChange(cid, conv.state())
        else:
            change.state = conv.state()
        return change

    def _closed(self, closed: Closed) -> None:
        """Tombstone a closed conversation's records, leaving a "closed at its position" state
        that keeps its seq."""
        if not self._is_tracking:
            return
        marker = ConversationState(
            counters=WindowCounters(seq=closed.seq),
            last_ts=closed.last_ts,
            position=closed.position,
            is_ended=True,
            is_expired=not closed.is_ended,
        )
        cid = closed.conversation_id
        change = self._changes.setdefault(cid, ConversationChange(cid, marker))
        for key in closed.keys:
            change.drop(key)
        if closed.context_seq is not None:
            change.drop_context(closed.context_seq)
        change.state = marker
