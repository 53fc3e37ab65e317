"""The inspector's bounded in-memory history: per conversation, the last item outcomes and bundles.

Fed by the runner from what the processor returns; never a second store. Every collection has
a bound, so memory is O(conversations x (events + bundles)) whatever the stream's length.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from stream_ctx.core.conversation.processor import ContextProcessor, ItemEvent
from stream_ctx.core.wire.bundle import Bundle

__all__ = ("ConversationHistory", "InspectorHistory", "TimelineEntry", "What")

What = Literal["accepted", "merged", "rejected", "evicted", "skipped for budget"]


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """Something that happened to one item, at an event's time and input position."""

    ts: int
    position: int
    item_id: str
    what: What
    detail: str = ""
    by: str | None = None  # the newcomer that evicted this item


@dataclass(slots=True)
class ConversationHistory:
    """One conversation's recent past; `version` grows with every record (for live pages)."""

    conversation_id: str
    source: str
    timeline: deque[TimelineEntry]
    bundles: deque[Bundle]
    bundles_total: int = 0
    last_event_ts: int = 0
    version: int = 0

    def bundle(self, seq: int) -> Bundle | None:
        """A kept bundle by its seq; None once it is older than the kept ones."""
        return next((b for b in self.bundles if b.seq == seq), None)


@dataclass(slots=True)
class InspectorHistory:
    """The last `max_events` item outcomes and `max_bundles` bundles of the `max_conversations`
    most recently active conversations."""

    max_events: int = 200
    max_bundles: int = 10
    max_conversations: int = 1000
    _conversations: OrderedDict[str, ConversationHistory] = field(default_factory=OrderedDict)
    version: int = 0

    def record_processing(
        self, source: str, processor: ContextProcessor, bundle: Bundle | None
    ) -> None:
        """What `processor` did since the last call: its item outcomes, then the bundle they led
        to (if any) with the window it was made from."""
        self.record_items(source, processor.take_item_events())
        if bundle is not None:
            window = processor.window_of(bundle.conversation_id, now_ms=bundle.ts) or []
            self.record_bundle(source, bundle, [r.item.id for r in window])

    def record_items(self, source: str, events: Iterable[ItemEvent]) -> None:
        """Timeline entries for offered items; an eviction is entered on the evicted item."""
        for event in events:
            result = event.result
            conv = self._touch(event.conversation_id, source, event.ts)
            entry = TimelineEntry(
                event.ts, event.position, result.item_id, result.status, result.reason or ""
            )
            conv.timeline.append(entry)
            if result.evicted is not None:
                detail = "ranked lowest in the full window when the newcomer arrived"
                conv.timeline.append(
                    TimelineEntry(
                        event.ts,
                        event.position,
                        result.evicted.id,
                        "evicted",
                        detail,
                        by=result.item_id,
                    )
                )

    def record_bundle(self, source: str, bundle: Bundle, window_ids: Iterable[str]) -> None:
        """A published bundle; held items it left out went over the token budget."""
        conv = self._touch(bundle.conversation_id, source, bundle.ts)
        included = {item.id for item in bundle.items}
        for item_id in window_ids:
            if item_id not in included:
                detail = f"bundle {bundle.bundle_id} reached its token budget"
                conv.timeline.append(
                    TimelineEntry(bundle.ts, -1, item_id, "skipped for budget", detail)
                )
        conv.bundles.append(bundle)
        conv.bundles_total += 1

    def get(self, conversation_id: str) -> ConversationHistory | None:
        return self._conversations.get(conversation_id)

    def recent(self, *, containing: str = "", limit: int) -> Iterator[ConversationHistory]:
        """Up to `limit` conversations whose id contains `containing`, most recent first."""
        found = 0
        for conv in reversed(self._conversations.values()):
            if found >= limit:
                return
            if containing in conv.conversation_id:
                found += 1
                yield conv

    def __len__(self) -> int:
        return len(self._conversations)

    def _touch(self, conversation_id: str, source: str, ts: int) -> ConversationHistory:
        conv = self._conversations.get(conversation_id)
        if conv is None:
            if len(self._conversations) >= self.max_conversations:
                self._conversations.popitem(last=False)  # the least recently active
            conv = ConversationHistory(
                conversation_id,
                source,
                deque(maxlen=self.max_events),
                deque(maxlen=self.max_bundles),
            )
            self._conversations[conversation_id] = conv
        else:
            self._conversations.move_to_end(conversation_id)
        conv.source = source
        conv.last_event_ts = max(conv.last_event_ts, ts)
        conv.version += 1
        self.version += 1
        return conv
