"""Input event wire types: a JSON union tagged on `type`, times in epoch milliseconds."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

__all__ = (
    "BundleMode",
    "ContextFormat",
    "End",
    "EpochMs",
    "Event",
    "Finalize",
    "History",
    "NonEmpty",
    "RenderOrder",
    "Retrieval",
    "RetrievedItem",
    "Salience",
)

Salience = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
EpochMs = Annotated[int, msgspec.Meta(ge=0)]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
RenderOrder = Literal["priority", "stable", "edges"]
ContextFormat = Literal["lean"]
BundleMode = Literal["full", "delta"]
"""`full`: every included item; `delta`: what changed since the conversation's previous bundle."""
History = Literal["reset"]
"""A platform's word on its chat history: `reset` means it no longer holds earlier bundles."""


class RetrievedItem(msgspec.Struct, frozen=True, kw_only=True):
    """One retrieved memory, pattern, chunk or tool result, as the retriever sent it."""

    id: NonEmpty
    kind: str
    salience: Salience
    content: str
    created_at: EpochMs | None = None
    attributes: dict[str, str] = msgspec.field(default_factory=dict)
    tags: list[str] = msgspec.field(default_factory=list)


class Retrieval(msgspec.Struct, frozen=True, kw_only=True, tag="retrieval", tag_field="type"):
    """Items retrieved for a conversation; `created_at` defaults to this event's `ts`."""

    conversation_id: NonEmpty
    event_id: str
    ts: EpochMs
    items: list[RetrievedItem]
    query: str | None = None


class Finalize(msgspec.Struct, frozen=True, kw_only=True, tag="finalize", tag_field="type"):
    """Asks for a bundle of the conversation's window as of `ts`."""

    conversation_id: NonEmpty
    event_id: str
    ts: EpochMs
    request_id: str | None = None
    max_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    order: RenderOrder | None = None
    mode: BundleMode | None = None
    history: History | None = None


class End(msgspec.Struct, frozen=True, kw_only=True, tag="end", tag_field="type"):
    """The conversation is over: its window and state are dropped."""

    conversation_id: NonEmpty
    event_id: str
    ts: EpochMs


Event = Retrieval | Finalize | End
