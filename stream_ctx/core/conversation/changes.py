"""What a conversation persists: its state record, and the changes a batch of events makes to
its changelog (item puts, state, drops, kept contexts)."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from stream_ctx.core.assembly.delta import SentState
from stream_ctx.core.window.accumulator import ContextItem, WindowCounters

__all__ = ("ConversationChange", "ConversationState", "ItemKey", "Restored")

ItemKey = tuple[str, int]
"""An item's changelog identity: (item id, revision)."""


class ConversationState(msgspec.Struct, kw_only=True):
    """What is persisted per conversation besides its items; `window` lists their keys."""

    counters: WindowCounters
    last_ts: int
    position: int
    window: list[ItemKey] = msgspec.field(default_factory=list)
    is_ended: bool = False
    # A closed conversation that expired (no event within the TTL) rather than ended.
    is_expired: bool = False
    # What the last bundle holds as the platform's history numbers it (for delta bundles).
    sent: SentState | None = None


Restored = tuple[ConversationState, list[ContextItem], bytes | None]
"""A persisted conversation: its state, its items (window order), its last packed context."""


@dataclass(slots=True)
class ConversationChange:
    """What one conversation's changelog must record: item puts, then state, then drops."""

    conversation_id: str
    state: ConversationState
    put: dict[ItemKey, ContextItem] = field(default_factory=dict)
    dropped: set[ItemKey] = field(default_factory=set)
    # The last bundle's packed context, keyed by its seq (for tokens_prefix_reused).
    contexts_put: dict[int, bytes] = field(default_factory=dict)
    contexts_dropped: set[int] = field(default_factory=set)

    def drop(self, key: ItemKey) -> None:
        """An item version is gone: unwrite it if written in this batch, else tombstone it."""
        if self.put.pop(key, None) is None:
            self.dropped.add(key)

    def drop_context(self, seq: int) -> None:
        """A kept context is superseded: unwrite it if written in this batch, else tombstone it."""
        if self.contexts_put.pop(seq, None) is None:
            self.contexts_dropped.add(seq)
