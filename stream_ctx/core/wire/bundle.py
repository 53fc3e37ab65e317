"""The bundle wire type: one per finalize event, byte-identical however often it is rebuilt."""

from __future__ import annotations

import msgspec

from stream_ctx.core.wire.events import BundleMode, ContextFormat, RenderOrder

__all__ = ("Bundle", "BundleItem", "BundleStats", "CacheBreakpoint", "SharedAttribute")


class SharedAttribute(msgspec.Struct, frozen=True, kw_only=True):
    """An attribute value or tag held by two or more included items, stored once."""

    field: str
    name: str
    value: str
    count: int
    items: list[str]


class BundleItem(msgspec.Struct, frozen=True, kw_only=True):
    """An included item: metadata in full, content as the ids of its blocks, in order."""

    id: str
    kind: str
    salience: float
    priority: float
    created_at: int
    attributes: dict[str, str]
    tags: list[str]
    blocks: list[str]


class BundleStats(msgspec.Struct, frozen=True, kw_only=True):
    """The seed's window statistics, counted over the conversation so far, plus token counts.

    `tokens_bundle` is what this context costs, `tokens_full` what the full context would; the
    conversation totals sum both over its bundles so far, this one included.
    """

    tokenizer: str
    tokens_naive: int
    tokens_bundle: int
    tokens_full: int
    conversation_tokens_sent: int
    conversation_tokens_full: int
    tokens_prefix_reused: int
    deduplicated: bool
    items_in_window: int
    items_included: int
    skipped_for_budget: int
    max_items: int
    fill_percentage: float
    accepted: int
    rejected: int
    evicted: int
    acceptance_rate: float
    avg_salience: float
    avg_priority: float
    oldest_created_at: int | None
    newest_created_at: int | None
    blocks: int
    shared_blocks: int


class CacheBreakpoint(msgspec.Struct, frozen=True, kw_only=True):
    """Where the entries a context shares with the conversation's previous bundle end: its first
    `chars` characters, `tokens` tokens exactly when sent as a block of their own, which reach
    each of the common providers' minimum cacheable prefixes in `meets` (1,024, 2,048, 4,096)."""

    chars: int
    tokens: int
    meets: list[int]


class Bundle(msgspec.Struct, frozen=True, kw_only=True, tag="bundle", tag_field="type"):
    """A conversation's context at one finalize: `items` in priority order, `context` to prompt.

    A `delta` bundle's context holds only what changed since bundle `base_bundle_id`, and its
    `blocks` only what its new items need; `context_order` lists the full context's items (as
    indices into `items`), so rebuild_full can make the full bundle from it and its base.
    `cache_breakpoint` says where a host puts a prompt-cache breakpoint (none in a delta).
    """

    bundle_id: str
    conversation_id: str
    seq: int
    request_id: str | None
    trigger: str
    ts: int
    format: ContextFormat
    order: RenderOrder
    mode: BundleMode
    base_bundle_id: str | None
    items: list[BundleItem]
    blocks: dict[str, str]
    shared: list[SharedAttribute]
    context: str
    stats: BundleStats
    context_order: list[int] | None = None
    cache_breakpoint: CacheBreakpoint = msgspec.field(
        default_factory=lambda: CacheBreakpoint(chars=0, tokens=0, meets=[])
    )

    def cache_blocks(self) -> list[str]:
        """The context as a host sends it for prompt caching: the part the previous bundle sent
        too, then the rest (each only when not empty)."""
        at = self.cache_breakpoint.chars
        return [part for part in (self.context[:at], self.context[at:]) if part]
