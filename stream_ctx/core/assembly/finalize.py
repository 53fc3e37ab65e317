"""A finalize: one conversation's ranked window and what its history holds, to the bundle that is
sent, full or delta, built once."""

from __future__ import annotations

from dataclasses import dataclass

from stream_ctx.core.assembly.assembler import Assembly, DagContextAssembler
from stream_ctx.core.assembly.delta import Delta, SentState, plan_delta, sent_after
from stream_ctx.core.assembly.prefix import NO_BREAKPOINT, cache_breakpoint, tokens_prefix_reused
from stream_ctx.core.counting.tokenizer import Tokenizer
from stream_ctx.core.window.accumulator import RankedItem, WindowCounters
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.bundle import Bundle, BundleItem, BundleStats
from stream_ctx.core.wire.events import Finalize

__all__ = ("Conversation", "Finalized", "finalize")


@dataclass(frozen=True, slots=True)
class Finalized:
    """The bundle, what the history holds after it, and the full context (the next bundle's
    prefix reuse is counted against it)."""

    bundle: Bundle
    sent: SentState
    full_context: str


@dataclass(frozen=True, slots=True)
class Conversation:
    """What a finalize reads of its conversation: the window ranked at the finalize's time, its
    counters (`seq` already counts this bundle), the history's state after the last bundle, and
    the last full context."""

    conversation_id: str
    ranked: list[RankedItem]
    counters: WindowCounters
    sent: SentState | None
    previous_context: str | None


def finalize(
    conversation: Conversation,
    event: Finalize,
    *,
    config: BundleConfig,
    assembler: DagContextAssembler,
) -> Finalized:
    """The bundle `event` asks for; pure and deterministic, whatever `assembler` (the
    conversation's own, or a fresh one) assembled before."""
    budget = event.max_tokens if event.max_tokens is not None else config.max_tokens
    order = event.order or config.order
    assembly = assembler.assemble(conversation.ranked, max_tokens=budget, order=order)
    seq, previous = conversation.counters.seq, conversation.sent
    delta = None
    if (event.mode or config.mode) == "delta" and previous is not None and event.history is None:
        delta = plan_delta(assembly, previous, seq=seq, assembler=assembler)
    sent = sent_after(assembly, previous, seq=seq, delta=delta)
    cid = conversation.conversation_id
    bundle = Bundle(
        bundle_id=f"{cid}:{seq}",
        conversation_id=cid,
        seq=seq,
        request_id=event.request_id,
        trigger="finalize",
        ts=event.ts,
        format=config.format,
        order=order,
        mode="full" if delta is None else "delta",
        base_bundle_id=None if delta is None else f"{cid}:{delta.base_seq}",
        items=_items(assembly),
        blocks=_blocks(assembly, delta),
        shared=assembly.dag.shared,
        context=assembly.context if delta is None else delta.context,
        stats=_stats(
            conversation, assembly, delta, sent, config=config, tokenizer=assembler.tokenizer
        ),
        context_order=None if delta is None else _context_order(assembly),
        cache_breakpoint=NO_BREAKPOINT
        if delta is not None
        else cache_breakpoint(conversation.previous_context, assembly.context, assembly.segments),
    )
    return Finalized(bundle, sent, assembly.context)


def _items(assembly: Assembly) -> list[BundleItem]:
    """The included items in priority order, each content as its block ids."""
    blocks = assembly.blocks_by_id()
    return [
        BundleItem(
            id=r.item.id,
            kind=r.item.kind,
            salience=r.item.salience,
            priority=r.priority,
            created_at=r.item.created_at,
            attributes=r.item.attributes,
            tags=r.item.tags,
            blocks=blocks[r.item.id],
        )
        for r in assembly.selected
    ]


def _blocks(assembly: Assembly, delta: Delta | None) -> dict[str, str]:
    """Every block of the full context, or only those a delta's new items need."""
    if delta is None:
        return assembly.dag.blocks
    pairs = zip(assembly.placed, assembly.dag.item_blocks, strict=True)
    needed = {b for r, ids in pairs if r.item.id in delta.new_ids for b in ids}
    return {b: text for b, text in assembly.dag.blocks.items() if b in needed}


def _context_order(assembly: Assembly) -> list[int]:
    """The full context's items as indices into the bundle's items (for rebuild_full)."""
    index = {r.item.id: n for n, r in enumerate(assembly.selected)}
    return [index[r.item.id] for r in assembly.placed]


def _stats(
    conversation: Conversation,
    assembly: Assembly,
    delta: Delta | None,
    sent: SentState,
    *,
    config: BundleConfig,
    tokenizer: Tokenizer,
) -> BundleStats:
    counters, selected, held = conversation.counters, assembly.selected, len(conversation.ranked)
    offered = counters.accepted + counters.rejected
    created = [r.item.created_at for r in selected]
    # A delta is appended to the history: its own start is no cached prefix.
    reused = 0
    if delta is None:
        reused = tokens_prefix_reused(
            conversation.previous_context, assembly.context, assembly.segments, tokenizer
        )
    return BundleStats(
        tokenizer=tokenizer.name,
        tokens_naive=assembly.tokens_naive,
        tokens_bundle=assembly.tokens_bundle if delta is None else delta.tokens,
        tokens_full=assembly.tokens_bundle,
        conversation_tokens_sent=sent.tokens_sent,
        conversation_tokens_full=sent.tokens_full,
        tokens_prefix_reused=reused,
        deduplicated=assembly.is_deduplicated,
        items_in_window=held,
        items_included=len(selected),
        skipped_for_budget=assembly.skipped_for_budget,
        max_items=config.max_items,
        fill_percentage=100.0 * held / config.max_items,
        accepted=counters.accepted,
        rejected=counters.rejected,
        evicted=counters.evicted,
        acceptance_rate=counters.accepted / offered if offered else 0.0,
        avg_salience=_mean([r.item.salience for r in selected]),
        avg_priority=_mean([r.priority for r in selected]),
        oldest_created_at=min(created, default=None),
        newest_created_at=max(created, default=None),
        blocks=len(assembly.dag.blocks),
        shared_blocks=sum(1 for uses in assembly.dag.block_uses.values() if uses > 1),
    )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
