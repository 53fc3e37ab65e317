"""The bounded sliding window of one conversation: threshold, merge, true top-N eviction."""

from __future__ import annotations

from collections.abc import Iterable
from sys import intern
from typing import Literal

import msgspec

from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.window.scoring import lowest_ranked, priority, rank_key
from stream_ctx.core.wire.events import RetrievedItem

__all__ = (
    "AddResult",
    "AddStatus",
    "BundleAccumulator",
    "ContextItem",
    "RankedItem",
    "WindowCounters",
)


class ContextItem(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An item held in a window; `entered` numbers arrivals so `stable` order can keep places.

    Untracked by the cycle collector (gc=False: 16 B less each, and never scanned): it refers
    only to strings, numbers and the shared attribute mapping and tag list, so no cycle."""

    id: str
    kind: str
    salience: float
    created_at: int
    content: str
    attributes: dict[str, str]
    tags: list[str]
    entered: int
    # Position (Kafka offset) of the event that last changed the item; keys its changelog record.
    revision: int = 0


class WindowCounters(msgspec.Struct, kw_only=True, gc=False):
    """What a conversation has done so far; persisted with its window (numbers only: untracked)."""

    seq: int = 0
    accepted: int = 0
    rejected: int = 0
    evicted: int = 0
    entered: int = 0


AddStatus = Literal["accepted", "merged", "rejected"]


class AddResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of offering one item to a window; `evicted_id` names a displaced older item."""

    item_id: str
    status: AddStatus
    reason: str | None = None
    evicted: ContextItem | None = None

    @property
    def is_accepted(self) -> bool:
        return self.status != "rejected"


class RankedItem(msgspec.Struct, frozen=True):
    """A held item with its priority at some reference time."""

    item: ContextItem
    priority: float


class BundleAccumulator:
    """One conversation's window. Every time is the triggering event's `ts`, never a clock."""

    __slots__ = ("config", "counters", "items")

    def __init__(
        self,
        config: BundleConfig,
        *,
        counters: WindowCounters | None = None,
        items: Iterable[ContextItem] = (),
    ) -> None:
        self.config = config
        self.counters = counters if counters is not None else WindowCounters()
        self.items: dict[str, ContextItem] = {item.id: item for item in items}

    def add(self, offered: RetrievedItem, *, now_ms: int, revision: int = 0) -> AddResult:
        """Offer one item at event time `now_ms` and apply the window rules to it."""
        created_at = offered.created_at if offered.created_at is not None else now_ms
        if offered.salience < self.config.min_salience_threshold:
            self.counters.rejected += 1
            reason = (
                f"salience {offered.salience!r} is below min_salience_threshold "
                f"{self.config.min_salience_threshold!r}"
            )
            return AddResult(item_id=offered.id, status="rejected", reason=reason)
        held = self.items.get(offered.id)
        if held is not None:
            self.items[offered.id] = _merged(held, offered, created_at, revision)
            self.counters.accepted += 1
            return AddResult(item_id=offered.id, status="merged")
        newcomer = ContextItem(
            id=offered.id,
            kind=intern(offered.kind),
            salience=offered.salience,
            created_at=created_at,
            content=offered.content,
            attributes=_interned(offered.attributes),
            tags=_interned_tags(offered.tags),
            entered=self.counters.entered,
            revision=revision,
        )
        if len(self.items) < self.config.max_items:
            return self._admit(newcomer)
        candidates = [*self.items.values(), newcomer]
        entries = [(it.id, it.salience, it.created_at) for it in candidates]
        lowest = candidates[lowest_ranked(entries, now_ms=now_ms, cfg=self.config)]
        if lowest is newcomer:
            self.counters.rejected += 1
            reason = f"window is full ({self.config.max_items} items) and this item ranks lowest"
            return AddResult(item_id=offered.id, status="rejected", reason=reason)
        del self.items[lowest.id]
        self.counters.evicted += 1
        return self._admit(newcomer, evicted=lowest)

    def ranked(self, *, now_ms: int) -> list[RankedItem]:
        """The window's items with priorities at `now_ms`, best first."""
        ranked = [RankedItem(item, self._priority(item, now_ms)) for item in self.items.values()]
        ranked.sort(key=_ranked_key)
        return ranked

    def _admit(self, item: ContextItem, evicted: ContextItem | None = None) -> AddResult:
        self.items[item.id] = item
        self.counters.accepted += 1
        self.counters.entered += 1
        return AddResult(item_id=item.id, status="accepted", evicted=evicted)

    def _priority(self, item: ContextItem, now_ms: int) -> float:
        return priority(item.salience, item.created_at, now_ms=now_ms, cfg=self.config)


def _ranked_key(ranked: RankedItem) -> tuple[float, float, int, str]:
    item = ranked.item
    return rank_key(ranked.priority, item.salience, item.created_at, item.id)


def _merged(
    held: ContextItem, offered: RetrievedItem, created_at: int, revision: int
) -> ContextItem:
    """A re-retrieved id stays one item: newest content and metadata, the higher salience."""
    return msgspec.structs.replace(
        held,
        kind=intern(offered.kind),
        salience=max(held.salience, offered.salience),
        created_at=created_at,
        content=offered.content,
        attributes=_interned(offered.attributes),
        tags=_interned_tags(offered.tags),
        revision=revision,
    )


def _interned(attributes: dict[str, str]) -> dict[str, str]:
    """Attribute names and values, kinds and tags repeat across thousands of held items: one
    shared string each, and one shared mapping per distinct set, keep a window's memory close
    to its content. Held mappings are never mutated (a merge replaces them)."""
    key = tuple(attributes.items())
    shared = _shared_attributes.get(key)
    if shared is None:
        if len(_shared_attributes) >= _SHARED_ATTRIBUTES_LIMIT:
            del _shared_attributes[next(iter(_shared_attributes))]
        shared = {intern(name): intern(value) for name, value in key}
        _shared_attributes[key] = shared
    return shared


def _interned_tags(tags: list[str]) -> list[str]:
    """Tag lists, shared the same way (never mutated once held)."""
    key = tuple(tags)
    shared = _shared_tags.get(key)
    if shared is None:
        if len(_shared_tags) >= _SHARED_ATTRIBUTES_LIMIT:
            del _shared_tags[next(iter(_shared_tags))]
        shared = _shared_tags[key] = [intern(tag) for tag in key]
    return shared


# Distinct attribute sets and tag lists kept for sharing; beyond it the oldest are forgotten.
_SHARED_ATTRIBUTES_LIMIT = 1 << 16
_shared_attributes: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
_shared_tags: dict[tuple[str, ...], list[str]] = {}
