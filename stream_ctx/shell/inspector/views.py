"""What the inspector's pages show, computed from the processor's state, history and bundles."""

from __future__ import annotations

from dataclasses import dataclass

from stream_ctx.core.accumulator import RankedItem
from stream_ctx.core.bundle import Bundle
from stream_ctx.core.scoring import recency
from stream_ctx.core.tokenizer import get_tokenizer
from stream_ctx.shell.inspector.history import ConversationHistory
from stream_ctx.shell.inspector.overview import Series, Totals


@dataclass(frozen=True, slots=True)
class WindowRow:
    """One held item as the conversation page lists it."""

    item_id: str
    kind: str
    priority: float
    recency: float
    salience: float
    created_at: int


@dataclass(frozen=True, slots=True)
class BlockUse:
    """One of an item's blocks: `ref` anchors this use, `is_shared` when others use it too."""

    block_id: str
    ref: str
    is_shared: bool


@dataclass(frozen=True, slots=True)
class ItemCost:
    """An included item's tokens on its own (content as retrieved) and its blocks in order."""

    item_id: str
    kind: str
    priority: float
    tokens: int
    blocks: list[BlockUse]


@dataclass(frozen=True, slots=True)
class SharedBlock:
    """A block used by two or more items, with the anchors of every use."""

    block_id: str
    text: str
    tokens: int
    refs: list[str]


def window_rows(ranked: list[RankedItem], *, now_ms: int, half_life_days: float) -> list[WindowRow]:
    return [
        WindowRow(
            r.item.id,
            r.item.kind,
            r.priority,
            recency(r.item.created_at, now_ms=now_ms, half_life_days=half_life_days),
            r.item.salience,
            r.item.created_at,
        )
        for r in ranked
    ]


def bundle_breakdown(bundle: Bundle) -> tuple[list[ItemCost], list[SharedBlock]]:
    """Per-item token costs and the shared blocks, from `items[].blocks` and `blocks` (never
    from parsing `context`, whose format may change)."""
    tokenizer = get_tokenizer(bundle.stats.tokenizer)
    uses: dict[str, list[str]] = {}
    for item in bundle.items:
        for n, block_id in enumerate(item.blocks):
            uses.setdefault(block_id, []).append(f"ref-{item.id}-{n}")
    costs = [
        ItemCost(
            item.id,
            item.kind,
            item.priority,
            tokenizer.count("".join(bundle.blocks.get(b, "") for b in item.blocks)),
            [
                BlockUse(block_id, f"ref-{item.id}-{n}", len(uses[block_id]) > 1)
                for n, block_id in enumerate(item.blocks)
            ],
        )
        for item in bundle.items
    ]
    shared = [
        SharedBlock(block_id, text, tokenizer.count(text), refs)
        for block_id, refs in uses.items()
        if len(refs) > 1
        for text in [bundle.blocks.get(block_id, "")]
    ]
    return costs, shared


def conversation_summary(conv: ConversationHistory) -> dict[str, object]:
    """A conversations-list row: bundles so far and the last bundle's tokens."""
    last = conv.bundles[-1] if conv.bundles else None
    stats = last.stats if last is not None else None
    return {
        "id": conv.conversation_id,
        "source": conv.source,
        "bundles": conv.bundles_total,
        "last_event_ts": conv.last_event_ts,
        "tokens_naive": stats.tokens_naive if stats else None,
        "tokens_bundle": stats.tokens_bundle if stats else None,
        "saved": saved_fraction(stats.tokens_naive, stats.tokens_bundle) if stats else None,
        "reused": stats.tokens_prefix_reused if stats else None,
        "last_seq": last.seq if last is not None else None,
    }


def live_figures(totals: Totals, series: Series) -> dict[str, object]:
    """The overview's numbers and plots, as sent on every live update."""
    saved = totals.tokens_naive - totals.tokens_bundle
    return {
        "events_per_s": round(series.latest(series.events_per_s), 1),
        "bundles_per_s": round(series.latest(series.bundles_per_s), 1),
        "saved_per_s": round(series.latest(series.saved_per_s), 1),
        "events": int(totals.events),
        "bundles": int(totals.bundles),
        "held": int(totals.held),
        "tokens_naive": int(totals.tokens_naive),
        "tokens_bundle": int(totals.tokens_bundle),
        "tokens_saved": int(saved),
        "saved_pct": round(100 * saved_fraction(totals.tokens_naive, totals.tokens_bundle), 1),
        "tokens_reused": int(totals.tokens_reused),
        "reused_pct": round(100 * totals.tokens_reused / totals.tokens_bundle, 1)
        if totals.tokens_bundle
        else 0.0,
        "dead_letters": {kind: int(n) for kind, n in totals.dead_letters.items()},
        "lag": {partition: int(n) for partition, n in totals.lag.items()},
        "outcomes": {outcome: int(n) for outcome, n in totals.items.items()},
        "plots": {
            "events_per_s": list(series.events_per_s),
            "bundles_per_s": list(series.bundles_per_s),
            "saved_per_s": list(series.saved_per_s),
        },
    }


def saved_fraction(naive: float, bundled: float) -> float:
    return 1 - bundled / naive if naive else 0.0
