"""What the inspector's pages show, computed from the processor's state, history and bundles."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from stream_ctx.core.counting.tokenizer import Tokenizer, get_tokenizer
from stream_ctx.core.entries.reader import (
    ContextSyntaxError,
    Reference,
    read_context,
    read_references,
)
from stream_ctx.core.entries.render import naive_entry, stem_of
from stream_ctx.core.window.accumulator import RankedItem
from stream_ctx.core.window.scoring import recency
from stream_ctx.core.wire.bundle import Bundle, BundleItem
from stream_ctx.shell.http.inspector.history import ConversationHistory
from stream_ctx.shell.http.inspector.overview import Series, Totals

__all__ = (
    "BundlePage",
    "Entry",
    "EntryCost",
    "Piece",
    "WindowRow",
    "bundle_page",
    "context_pieces",
    "conversation_summary",
    "live_figures",
    "saved_fraction",
    "split_entries",
    "window_rows",
)


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
class Entry:
    """An entry of a context: its number and where it is written (characters `start` to `end`)."""

    number: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of the context as the bundle page shows it: plain text, or a reference (`names`
    the entry it names) and the text it stands for; `entry` when entry n starts here."""

    text: str
    stands_for: str | None = None
    names: int | None = None
    entry: int | None = None


@dataclass(frozen=True, slots=True)
class EntryCost:
    """An entry's item (None when the page cannot tell) and its tokens in the naive baseline
    (None without the item's content) and in this context."""

    number: int
    item: BundleItem | None
    item_id: str
    tokens_naive: int | None
    tokens_here: int


@dataclass(frozen=True, slots=True)
class BundlePage:
    """The bundle page: the context in pieces, each entry's cost, and why references are not
    highlighted (None when they are)."""

    pieces: list[Piece]
    costs: list[EntryCost]
    note: str | None


_ENTRY_LEAD = re.compile(r"^§(\d+) ", re.MULTILINE)
_WRITTEN_ID = re.compile(r'§\d+ (~?)(?:("(?:[^"\\]|\\.)*")|(\S+))')


def split_entries(context: str) -> list[Entry]:
    """The entries of a context, each from its `§n ` line to the next (no content line starts
    so: the renderer escapes them); what comes before the first (a delta's lines) is in none."""
    leads = list(_ENTRY_LEAD.finditer(context))
    spans = pairwise([*(lead.start() for lead in leads), len(context)])
    return [Entry(int(lead[1]), *span) for lead, span in zip(leads, spans, strict=True)]


def context_pieces(
    context: str, references: Sequence[Reference], entries: Sequence[Entry]
) -> list[Piece]:
    """The context cut at every entry's start and around every reference; joined, the pieces'
    texts are the context."""
    starts = {entry.start: entry.number for entry in entries}
    found = {ref.start: ref for ref in references}
    cuts = sorted({0, len(context), *starts, *found, *(ref.end for ref in references)})
    pieces = []
    for start, end in pairwise(cuts):
        ref = found.get(start)
        pieces.append(
            Piece(
                context[start:end],
                ref.text if ref is not None else None,
                ref.number if ref is not None else None,
                starts.get(start),
            )
        )
    return pieces


def bundle_page(bundle: Bundle) -> BundlePage:
    """The context as sent with what each reference stands for, and each entry's cost. A full
    context is read on its own; a delta's references may name entries of earlier bundles."""
    context = bundle.context
    entries = split_entries(context)
    ids: list[str | None] = [_written_id(context, entry) for entry in entries]
    references: list[Reference] = []
    note = None
    if bundle.mode == "delta":
        note = "A delta: its references may name entries of earlier bundles, so none is read here."
    else:
        try:
            references = read_references(context)
            ids = [item.id for item in read_context(context)]
        except ContextSyntaxError as exc:
            note = f"This context does not read back, so its references are not shown: {exc}"
    tokenizer = get_tokenizer(bundle.stats.tokenizer)
    costs = [_cost(bundle, e, item_id, tokenizer) for e, item_id in zip(entries, ids, strict=True)]
    return BundlePage(context_pieces(context, references, entries), costs, note)


def _cost(bundle: Bundle, entry: Entry, item_id: str | None, tokenizer: Tokenizer) -> EntryCost:
    item = _item(bundle.items, item_id)
    here = tokenizer.count(bundle.context[entry.start : entry.end])
    shown = item_id if item_id is not None else "?"
    if item is None or any(block not in bundle.blocks for block in item.blocks):
        return EntryCost(entry.number, item, shown, None, here)
    content = "".join(bundle.blocks[block] for block in item.blocks)
    lead = f"[{entry.number}]"
    baseline = naive_entry(
        item.id, item.kind, tuple(item.attributes.items()), tuple(item.tags), content
    )
    naive = sum(tokenizer.count_segment(key, text) for key, text in [(lead, lead), *baseline])
    return EntryCost(entry.number, item, item.id, naive, here)


def _item(items: Sequence[BundleItem], item_id: str | None) -> BundleItem | None:
    """The item of an id as read, or as written `~rest` (the one item whose stem and rest it is)."""
    if item_id is None:
        return None
    if item_id.startswith("~"):
        rest = item_id[1:]
        matches = [it for it in items if (stem := stem_of(it.id)) and stem + rest == it.id]
        return matches[0] if len(matches) == 1 else None
    return next((it for it in items if it.id == item_id), None)


def _written_id(context: str, entry: Entry) -> str | None:
    """The id an entry's header writes (`~rest` when abbreviated), without reading the context:
    a JSON string, or up to the first space (of a bare id with spaces, its first word)."""
    written = _WRITTEN_ID.match(context, entry.start)
    if written is None:
        return None
    tilde, quoted, bare = written.groups()
    if quoted is not None:
        try:
            return tilde + str(json.loads(quoted))
        except ValueError:
            return None
    return tilde + bare


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
