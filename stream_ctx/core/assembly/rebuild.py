"""rebuild_full: the full bundle a delta bundle stands for, made from the delta and its base.

A consumer that keeps each conversation's last full bundle (as received, or rebuilt) loses
nothing by taking deltas: the delta carries every item's metadata, the blocks its new items need
and the full context's order; the rest of the content is the base's. The full context is then
rendered again by the same pure core that rendered it the first time.
"""

from __future__ import annotations

import msgspec

from stream_ctx.core.assembly.assembler import DagContextAssembler
from stream_ctx.core.assembly.prefix import cache_breakpoint, tokens_prefix_reused
from stream_ctx.core.counting.tokenizer import get_tokenizer
from stream_ctx.core.window.accumulator import ContextItem, RankedItem
from stream_ctx.core.wire.bundle import Bundle, BundleItem
from stream_ctx.errors import StreamCtxError

__all__ = ("DeltaBaseError", "rebuild_full")


class DeltaBaseError(StreamCtxError):
    """A delta bundle cannot be rebuilt from the bundle given as its base."""


def rebuild_full(bundle: Bundle, base: Bundle) -> Bundle:
    """The bundle this finalize would have produced in `full` mode, byte for byte once encoded.

    `base` is the full form of bundle `bundle.base_bundle_id`; a full `bundle` comes back as it
    is. Raises DeltaBaseError when `base` is not that bundle or the rebuilt context's token count
    differs from `stats.tokens_full` (a library that renders differently from the sender's).
    """
    if bundle.mode == "full":
        return bundle
    if base.mode != "full" or base.bundle_id != bundle.base_bundle_id:
        raise DeltaBaseError(
            f"`base_bundle_id` of {bundle.bundle_id!r} is {bundle.base_bundle_id!r}, got a"
            f" {base.mode} bundle {base.bundle_id!r} as its base"
        )
    if bundle.context_order is None or sorted(bundle.context_order) != list(
        range(len(bundle.items))
    ):
        raise DeltaBaseError(
            f"`context_order` of {bundle.bundle_id!r} must order all {len(bundle.items)} items,"
            f" got {bundle.context_order!r}"
        )
    blocks = bundle.blocks | base.blocks
    held = {item.id: item for item in base.items}
    ranked = []
    for entered, n in enumerate(bundle.context_order):
        item = bundle.items[n]
        content = _content(item, blocks, held.get(item.id), base.blocks)
        if content is None:
            raise DeltaBaseError(
                f"the content of item {item.id!r} of {bundle.bundle_id!r} is neither in its"
                f" blocks nor in base {base.bundle_id!r}"
            )
        ranked.append(RankedItem(_window_item(item, content, entered), item.priority))
    tokenizer = get_tokenizer(bundle.stats.tokenizer)
    assembly = DagContextAssembler(tokenizer).assemble(ranked, max_tokens=None, order="priority")
    stats = bundle.stats
    if assembly.tokens_bundle != stats.tokens_full:
        raise DeltaBaseError(
            f"the full context of {bundle.bundle_id!r} rebuilds to {assembly.tokens_bundle}"
            f" tokens, but its `stats.tokens_full` is {stats.tokens_full}"
        )
    reused = tokens_prefix_reused(base.context, assembly.context, assembly.segments, tokenizer)
    sent = stats.conversation_tokens_sent - stats.tokens_bundle + stats.tokens_full
    return msgspec.structs.replace(
        bundle,
        mode="full",
        base_bundle_id=None,
        blocks=assembly.dag.blocks,
        context=assembly.context,
        stats=msgspec.structs.replace(
            stats,
            tokens_bundle=stats.tokens_full,
            tokens_prefix_reused=reused,
            conversation_tokens_sent=sent,
        ),
        context_order=None,
        cache_breakpoint=cache_breakpoint(base.context, assembly.context, assembly.segments),
    )


def _content(
    item: BundleItem, blocks: dict[str, str], held: BundleItem | None, base_blocks: dict[str, str]
) -> str | None:
    """An item's content from the blocks at hand or, for an item the delta did not resend (its
    blocks may be cut differently now), from the base's copy of it."""
    if all(b in blocks for b in item.blocks):
        return "".join(blocks[b] for b in item.blocks)
    if held is None:
        return None
    return "".join(base_blocks[b] for b in held.blocks)


def _window_item(item: BundleItem, content: str, entered: int) -> ContextItem:
    return ContextItem(
        id=item.id,
        kind=item.kind,
        salience=item.salience,
        created_at=item.created_at,
        content=content,
        attributes=item.attributes,
        tags=item.tags,
        entered=entered,
    )
