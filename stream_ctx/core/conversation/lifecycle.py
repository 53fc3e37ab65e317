"""Where each conversation of one input stands in its life: held in memory, waiting to be loaded
from the changelog, released while idle, or gone (ended or expired). It decides which window an
event reaches, if any; applying the event to that window is the processor's job."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from stream_ctx.core.assembly.delta import SentState, pack_sent, unpack_sent
from stream_ctx.core.assembly.learning import Learning
from stream_ctx.core.conversation.changes import ConversationState, ItemKey, Restored
from stream_ctx.core.window.accumulator import BundleAccumulator, ContextItem, WindowCounters
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.events import End, Event, Finalize
from stream_ctx.errors import ConversationReleasedError, FinalizeRefusedError

__all__ = ("Closed", "HeldConversation", "Lifecycle")

# How many restored, untouched conversations one idle sweep loads to check them.
_DORMANT_LOADS_PER_SWEEP = 10_000


@dataclass(slots=True)
class HeldConversation:
    """A conversation in memory: its window, its last event, and what its last bundle left."""

    window: BundleAccumulator
    last_ts: int
    position: int
    previous_context: bytes | None = None
    # The SentState, packed (pack_sent): held by every conversation, read only at a finalize.
    sent: bytes | None = None

    def sent_state(self) -> SentState | None:
        """What the model's history holds after the last bundle, unpacked."""
        return unpack_sent(self.sent) if self.sent is not None else None

    def state(self) -> ConversationState:
        """Its counters and last event, as the changelog keeps them (the window keys apart)."""
        return ConversationState(
            counters=self.window.counters, last_ts=self.last_ts, position=self.position
        )


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

    @classmethod
    def of(cls, conv: HeldConversation) -> _Released:
        keys = tuple((it.id, it.revision) for it in conv.window.items.values())
        seq = conv.window.counters.seq
        context_seq = seq if conv.previous_context is not None else None
        return cls(conv.last_ts, conv.position, keys, context_seq, seq)


@dataclass(frozen=True, slots=True)
class Closed:
    """A conversation that ended or expired at `position`: the records its changelog drops
    (`keys`, the context of bundle `context_seq`) and the state that stays (`seq`, `last_ts`)."""

    conversation_id: str
    position: int
    is_ended: bool
    last_ts: int
    keys: tuple[ItemKey, ...]
    context_seq: int | None
    seq: int


class Lifecycle:
    """The conversations of one input and where each stands; `on_close` hears of each one that
    ends or expires, as it does."""

    def __init__(
        self, config: BundleConfig, learning: Learning, on_close: Callable[[Closed], None]
    ) -> None:
        self.config = config
        self.held: dict[str, HeldConversation] = {}
        self.stream_time_ms = 0
        self._learning = learning
        self._on_close = on_close
        self._dormant: dict[str, Callable[[], Restored]] = {}
        self._released: dict[str, _Released] = {}
        self._gone: dict[str, _Gone] = {}

    @property
    def count(self) -> int:
        """Conversations in memory, loaded or waiting to be."""
        return len(self.held) + len(self._dormant)

    def enter(self, event: Event, position: int) -> HeldConversation | None:
        """The held conversation `event` applies to, its last event now this one: opened,
        restarted past its TTL or loaded as needed. None for a replayed event (at or below its
        conversation's position) and for an end, which closes its conversation."""
        cid = event.conversation_id
        load = self._dormant.pop(cid, None)
        if load is not None:
            self.restore(cid, *load())
        conv = self.held.get(cid)
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
            conv = self._open(cid, event, position)
        conv.last_ts, conv.position = event.ts, position
        return conv

    def restore_lazily(self, conversation_id: str, load: Callable[[], Restored]) -> None:
        """Register a persisted conversation to be loaded by `load` when its next event comes."""
        self._dormant[conversation_id] = load

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
            self.held.pop(conversation_id, None)
            return
        self._gone.pop(conversation_id, None)
        window = BundleAccumulator(self.config, counters=state.counters, items=items)
        sent = pack_sent(state.sent) if state.sent is not None else None
        self.held[conversation_id] = HeldConversation(
            window, state.last_ts, state.position, previous_context, sent
        )

    def release_idle(self, is_busy: Callable[[str], bool]) -> int:
        """Release conversations idle longer than the TTL on stream time, but not those
        `is_busy` names; returns how many."""
        ttl_ms = self.config.conversation_ttl_ms
        if ttl_ms is None:
            return 0
        # Restored conversations not touched since are loaded a bounded number per sweep, so a
        # big restore never stalls the stream and idle ones are released in time.
        for cid in list(itertools.islice(self._dormant, _DORMANT_LOADS_PER_SWEEP)):
            self.restore(cid, *self._dormant.pop(cid)())
        idle = [
            cid
            for cid, conv in self.held.items()
            if self.stream_time_ms - conv.last_ts > ttl_ms and not is_busy(cid)
        ]
        for cid in idle:
            self._learning.drop([cid])
            self._released[cid] = _Released.of(self.held.pop(cid))
        return len(idle)

    def forget(self, conversation_ids: Iterable[str]) -> None:
        """Drop conversations from memory, whatever their stage."""
        for cid in conversation_ids:
            self.held.pop(cid, None)
            self._dormant.pop(cid, None)
            self._released.pop(cid, None)
            self._gone.pop(cid, None)
            self._learning.drop([cid])

    def _open(self, cid: str, event: Event, position: int) -> HeldConversation:
        gone = self._gone.get(cid)
        if isinstance(event, Finalize):
            # No window to answer from: an empty bundle would replace the last good one.
            raise FinalizeRefusedError(cid, gone.reason if gone else "unknown")
        # Seq goes on from the last incarnation's, so bundle ids never repeat.
        self._gone.pop(cid, None)
        counters = WindowCounters(seq=gone.seq if gone else 0)
        conv = self.held[cid] = HeldConversation(
            BundleAccumulator(self.config, counters=counters), event.ts, position
        )
        return conv

    def _close(self, cid: str, conv: HeldConversation, position: int, *, is_ended: bool) -> None:
        """End or expire a held conversation."""
        del self.held[cid]
        self._learning.drop([cid])
        self._discard(cid, _Released.of(conv), position, is_ended=is_ended)

    def _discard(self, cid: str, gone: _Released, position: int, *, is_ended: bool) -> None:
        """Mark a conversation closed at `position`, keeping its seq, and say so."""
        self._gone[cid] = _Gone(position, gone.seq, "ended" if is_ended else "expired")
        self._on_close(
            Closed(cid, position, is_ended, gone.last_ts, gone.keys, gone.context_seq, gone.seq)
        )
