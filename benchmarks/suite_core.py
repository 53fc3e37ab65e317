"""The core alone, no broker, for benchmarks/suite.py: speed figures and memory per conversation.

Window adds/s, finalize time of ~1 KB items, apply times over the workload, and tracemalloc's
memory per held conversation; about a minute of the suite's run."""

from __future__ import annotations

import gc
import math
import random
import statistics
import time
import tracemalloc
from collections.abc import Sequence
from typing import Any, cast

import msgspec
import suite_load as load

from stream_ctx import BundleConfig, ContextProcessor, RetrievedItem, decode_event
from stream_ctx.core.assembly.learning import LEARNED_ITEMS, Learning
from stream_ctx.core.counting.tokenizer import TiktokenTokenizer, get_tokenizer
from stream_ctx.core.memo import Memos
from stream_ctx.core.text.engine import PYTHON_CORE, Core, load_core
from stream_ctx.core.window.accumulator import BundleAccumulator
from stream_ctx.core.window.config import CoreChoice
from stream_ctx.core.wire.events import Event, Finalize, Retrieval

# Changes are taken (and dropped) this often, as the runner takes them once per batch.
_TAKE_EVERY = 500
_SITES = 8
_DAY_MS = 86_400_000
_NOW_MS = 1_764_480_000_000


def _items(rng: random.Random, count: int, chars: int) -> list[RetrievedItem]:
    words = [f"w{n}" for n in range(2_000)]
    return [
        RetrievedItem(
            id=f"item-{n}",
            kind="chunk",
            salience=round(rng.uniform(0.2, 1.0), 3),
            content=" ".join(rng.choice(words) for _ in range(chars // 5))[:chars],
            created_at=_NOW_MS - rng.randint(0, 60 * _DAY_MS),
            attributes={"language": rng.choice(["rust", "go"]), "domain": "web-api"},
            tags=rng.sample(["a", "b", "c", "d"], 2),
        )
        for n in range(count)
    ]


def adds_per_second(max_items: int, adds: int = 20_000) -> float:
    """Offer `adds` distinct items to one window of `max_items` (full after the first N)."""
    rng = random.Random(1)
    window = BundleAccumulator(BundleConfig(max_items=max_items))
    offered = _items(rng, adds, 64)
    started = time.perf_counter()
    for n, item in enumerate(offered):
        window.add(item, now_ms=_NOW_MS + n)
    return adds / (time.perf_counter() - started)


def finalize_ms(items: int = 20, chars: int = 1_000, rounds: int = 30) -> tuple[float, float]:
    """Median and p95 time of a finalize (dedup + render + token count) of `items` ~1 KB items;
    each round holds fresh content, so token counts are not served from the cache."""
    times = []
    for r in range(rounds):
        rng = random.Random(100 + r)
        processor = ContextProcessor(BundleConfig(max_items=items))
        held = Retrieval(
            conversation_id="c", event_id="r", ts=_NOW_MS, items=_items(rng, items, chars)
        )
        processor.apply(held, position=0)
        started = time.perf_counter()
        processor.apply(Finalize(conversation_id="c", event_id="f", ts=_NOW_MS), position=1)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def core_figures(*, adds: int, rounds: int, conversations: int, seed: int) -> dict[str, Any]:
    """adds/s and finalize time (fresh ~1 KB items), and apply times on the workload."""
    adds_per_s = {str(m): adds_per_second(m, adds) for m in (20, 200)}
    median, p95 = finalize_ms(rounds=rounds)
    events = load.standard(conversations, seed)
    raw = [msgspec.json.encode(e) for e in events]
    processor = ContextProcessor(
        BundleConfig(), tokenizer=TiktokenTokenizer(), is_tracking_changes=True
    )
    retrieval_s, items = 0.0, 0
    finals: list[float] = []
    for position, (event, data) in enumerate(zip(events, raw, strict=True)):
        started = time.perf_counter()
        processor.apply(decode_event(data), position=position)
        took = time.perf_counter() - started
        if isinstance(event, Finalize):
            finals.append(took * 1000)
        elif isinstance(event, Retrieval):
            retrieval_s += took
            items += len(event.items)
        if position % _TAKE_EVERY == 0:
            processor.take_changes()
    finals.sort()
    return {
        "adds_per_s": adds_per_s,
        "finalize_20x1KB_ms": {"median": median, "p95": p95},
        "workload_items_per_s": items / retrieval_s if retrieval_s else 0.0,
        "workload_finalize_ms": {
            "median": statistics.median(finals),
            "p99": finals[max(0, math.ceil(0.99 * len(finals)) - 1)],
            "mean": statistics.fmean(finals),
        },
    }


def replay_cpu_ms(conversations: int, seed: int, *, core: str) -> float:
    """The core alone on the real-text workload with one core: process CPU ms per event, the
    best of two replays (each with fresh memo tables)."""
    events = load.standard(conversations, seed)
    best = math.inf
    for _ in range(2):
        processor = ContextProcessor(BundleConfig(), core=load_core(cast(CoreChoice, core)))
        started = time.process_time()
        for position, event in enumerate(events):
            processor.apply(event, position=position)
        best = min(best, (time.process_time() - started) / len(events) * 1000)
    return best


def count_bound(events: Sequence[Event], *, rounds: int = 3) -> dict[str, float | str]:
    """The exact-count bound: events/s if counting each new content text once were all the work.

    New content is every item content not seen before in the workload (a content-hash cache
    counts a text once per process); the counter is the core's (`get_tokenizer().count`), timed
    over those texts in CPU time (as the processors' CPU per event), best of `rounds`.
    """
    seen: set[str] = set()
    for event in events:
        if isinstance(event, Retrieval):
            seen.update(item.content for item in event.items)
    texts = sorted(seen)
    tokenizer = get_tokenizer()
    tokenizer.count(texts[0])  # loaded before timing, as in a running instance
    best = math.inf
    for _ in range(rounds):
        started = time.process_time()
        for text in texts:
            tokenizer.count(text)
        best = min(best, time.process_time() - started)
    new_bytes = sum(len(text.encode()) for text in texts)
    return {
        "counter": type(tokenizer).__name__,
        "texts": len(texts),
        "mb_per_s": new_bytes / best / 1e6,
        "new_content_bytes_per_event": new_bytes / len(events),
        "events_per_s": len(events) / best,
    }


def repeat_bound(
    events: Sequence[Event], *, max_items: int = 20, rounds: int = 3
) -> dict[str, float]:
    """The exact-repeat bound: events/s if finding the repeats of each finalize's window (the
    index of its lines and sentences, the quotes and the diffs, planned by the compiled core,
    and by the Python one beside it) were all the work; and the share of a window's items its
    conversation's previous bundle did not hold (what an incremental finalize must plan and
    count afresh).

    The windows are the bundles' items in context order, their contents rebuilt from the
    bundles' blocks, as the core processor makes them over `events`; timed in CPU time, best of
    `rounds`.
    """
    processor = ContextProcessor(BundleConfig(max_items=max_items), tokenizer=get_tokenizer())
    compiled = load_core()
    windows: list[list[str]] = []
    last_window: dict[str, set[str]] = {}
    new_items = 0
    for position, event in enumerate(events):
        bundle = processor.apply(event, position=position)
        if bundle is not None:
            contents = ["".join(map(bundle.blocks.__getitem__, i.blocks)) for i in bundle.items]
            windows.append(contents)
            before = last_window.get(bundle.conversation_id, set())
            new_items += sum(content not in before for content in contents)
            last_window[bundle.conversation_id] = set(contents)
    best = {core.name: _planning_s(windows, core, rounds) for core in (compiled, PYTHON_CORE)}
    window_bytes = sum(len(text.encode()) for contents in windows for text in contents)
    return {
        "windows": len(windows),
        "bytes_per_window": window_bytes / len(windows),
        "ms_per_window": best[compiled.name] / len(windows) * 1000,
        "events_per_s": len(events) / best[compiled.name],
        "ms_per_window_python": best[PYTHON_CORE.name] / len(windows) * 1000,
        "new_item_share": new_items / sum(len(contents) for contents in windows),
    }


def _planning_s(windows: list[list[str]], core: Core, rounds: int) -> float:
    """CPU seconds to plan every window from nothing with `core`, the best of `rounds`."""
    best = math.inf
    for _ in range(rounds):
        started = time.process_time()
        for contents in windows:
            memos = Memos()
            index = core.text_index(memos)
            planner = core.planner(index, [text.serial for text in index.add(contents)], memos)
            for n in range(len(contents)):
                planner.plan(n)
        best = min(best, time.process_time() - started)
    return best


def held_memory(*, conversations: int, seed: int) -> dict[str, Any]:
    """Bytes a ContextProcessor keeps per open conversation (tracemalloc), against its content.

    Events are decoded inside the traced region, as the runner decodes records, and dropped;
    what remains is the processor's. Caches come apart: the segment-count cache, shared by the
    process (measured by swapping the processor's own tokenizer for the shared one), the
    processor's memo tables (measured by clearing them), and what each conversation's last
    finalize learned (measured as the difference to a processor that keeps none).
    """
    raw = [msgspec.json.encode(e) for e in load.standard(conversations, seed, is_ending=False)]
    learned = _traced(raw, learned_items=LEARNED_ITEMS)
    kept = _traced(raw, learned_items=0)
    processor, count = kept["processor"], kept["conversations"]
    windows = [conv.window.items.values() for conv in processor.conversations.values()]
    content = sum(len(item.content.encode()) for items in windows for item in items)
    per_conv, per_content = kept["held"] / count, content / count
    entries = kept["token_entries"]
    return {
        "conversations": count,
        "items_per_conversation": sum(len(items) for items in windows) / count,
        "bytes_per_conversation": per_conv,
        "content_bytes_per_conversation": per_content,
        "token_cache_bytes_per_conversation": kept["token_cache"] / count,
        "token_cache_entries_per_conversation": entries / count,
        "token_cache_bytes_per_entry": kept["token_cache"] / entries if entries else None,
        "memo_cache_bytes_per_conversation": kept["memos"] / count,
        "learned_bytes_per_conversation": (learned["held"] - kept["held"]) / count,
        "learned_items": LEARNED_ITEMS,
        "limit_bytes": 1.5 * per_content + 4096,
        "ratio_to_content": per_conv / per_content,
        "top_allocation_sites": [
            {
                "site": f"{_short(site.traceback[0].filename)}:{site.traceback[0].lineno}",
                "bytes_per_conversation": site.size / count,
            }
            for site in kept["sites"]
        ],
    }


def _traced(raw: Sequence[bytes], *, learned_items: int) -> dict[str, Any]:
    """Replay `raw` into a fresh processor under tracemalloc: what it holds, the memo tables'
    and the token counts' bytes, and the largest allocation sites of what it holds."""
    shared, tokenizer = get_tokenizer(), TiktokenTokenizer()
    tokenizer.count("its encoding loads lazily: before tracing")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        processor = ContextProcessor(
            BundleConfig(),
            tokenizer=tokenizer,
            is_tracking_changes=True,
            learning=Learning(learned_items),
        )
        for position, data in enumerate(raw):
            processor.apply(decode_event(data), position=position)
            if position % _TAKE_EVERY == 0:
                processor.take_changes()
        processor.take_changes()
        gc.collect()
        total = tracemalloc.get_traced_memory()[0] - before
        entries = len(getattr(tokenizer, "_cache", ()))
        processor.tokenizer = shared
        del tokenizer
        gc.collect()
        with_memos = tracemalloc.get_traced_memory()[0] - before
        processor.memos.clear()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        sites = tracemalloc.take_snapshot().statistics("lineno")[:_SITES]
    finally:
        tracemalloc.stop()
    return {
        "processor": processor,
        "conversations": len(processor.conversations),
        "held": held,
        "memos": with_memos - held,
        "token_cache": total - with_memos,
        "token_entries": entries,
        "sites": sites,
    }


def _short(path: str) -> str:
    for marker in ("/stream_ctx/", "/site-packages/", "/lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path
