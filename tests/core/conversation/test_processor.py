"""ContextProcessor: bundles per finalize, budget, end, TTL, positions, stats, replay."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import get_args

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.counting.tokenizer import TiktokenTokenizer, get_tokenizer
from stream_ctx.core.window.accumulator import BundleAccumulator, ContextItem
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.codec import encode_bundle
from stream_ctx.core.wire.events import ContextFormat, Event, RenderOrder, RetrievedItem
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.errors import FinalizeRefusedError
from tests.factories import (
    DAY_MS,
    HOUR_MS,
    T0,
    make_end,
    make_finalize,
    make_item,
    make_retrieval,
    retrieved_from,
)

FORMATS: tuple[ContextFormat, ...] = get_args(ContextFormat)
_tokenizer = get_tokenizer()


def _run(events: Iterable[Event], config: BundleConfig | None = None) -> list[Bundle]:
    processor = ContextProcessor(config or BundleConfig())
    bundles = []
    for position, event in enumerate(events, start=1):
        bundle = processor.apply(event, position=position)
        if bundle is not None:
            bundles.append(bundle)
    return bundles


def _ids(bundle: Bundle) -> list[str]:
    return [item.id for item in bundle.items]


def _words(seed: int, count: int) -> str:
    vocab = ("alpha", "beta", "gamma", "delta", "router", "cache", "retry", "token", "queue")
    return " ".join(
        f"{vocab[(seed + n * 7) % len(vocab)]}{(seed * 31 + n) % 1000}" for n in range(count)
    )


# Sequence, ids and request echo ------------------------------------------------------------------


def test_processor_seq_counts_finalizes_from_one_per_conversation() -> None:
    events: list[Event] = [
        make_retrieval(),
        make_finalize(ts=T0 + 1),
        make_retrieval(conversation_id="c-2", ts=T0 + 2),
        make_finalize(ts=T0 + 3),
        make_finalize(conversation_id="c-2", ts=T0 + 4),
        make_finalize(ts=T0 + 5),
    ]
    bundles = _run(events)
    assert [(b.conversation_id, b.seq, b.bundle_id) for b in bundles] == [
        ("c-1", 1, "c-1:1"),
        ("c-1", 2, "c-1:2"),
        ("c-2", 1, "c-2:1"),
        ("c-1", 3, "c-1:3"),
    ]


def test_processor_bundle_echoes_request_and_trigger() -> None:
    bundles = _run(
        [make_retrieval(), make_finalize(ts=T0 + 9, request_id="turn-5"), make_finalize(ts=T0 + 10)]
    )
    assert (bundles[0].request_id, bundles[0].trigger, bundles[0].ts) == (
        "turn-5",
        "finalize",
        T0 + 9,
    )
    assert bundles[1].request_id is None
    wire = msgspec.json.decode(encode_bundle(bundles[0]))
    assert wire["type"] == "bundle"
    assert wire["request_id"] == "turn-5"
    assert wire["bundle_id"] == "c-1:1"


def test_processor_retrieval_and_end_produce_no_bundle() -> None:
    processor = ContextProcessor(BundleConfig())
    assert processor.apply(make_retrieval(), position=1) is None
    assert processor.apply(make_end(ts=T0 + 1), position=2) is None


# Ordering at finalize time -----------------------------------------------------------------------


def test_processor_orders_items_by_priority_at_finalize_time() -> None:
    config = BundleConfig(
        recency_half_life_days=1.0, min_salience_threshold=0.1, conversation_ttl_hours=None
    )
    items = [
        make_item(id="old", salience=1.0, created_at=T0 - 10 * DAY_MS),
        make_item(id="fresh", salience=0.3, created_at=T0),
    ]
    early, late = _run(
        [make_retrieval(items=items), make_finalize(ts=T0), make_finalize(ts=T0 + 2 * DAY_MS)],
        config,
    )
    assert _ids(early) == ["fresh", "old"]
    assert _ids(late) == ["old", "fresh"]


def test_processor_writes_priorities_as_computed() -> None:
    config = BundleConfig(recency_weight=0.3, salience_weight=0.5, recency_half_life_days=14.0)
    created = T0 - 3 * DAY_MS - 17
    now = T0 + 12_345
    (bundle,) = _run(
        [
            make_retrieval(items=[make_item(salience=0.83, created_at=created)]),
            make_finalize(ts=now),
        ],
        config,
    )
    fresh = 0.5 ** (((now - created) / DAY_MS) / 14.0)
    expected = (0.3 * fresh + 0.5 * 0.83) / (0.3 + 0.5)
    assert bundle.items[0].priority == expected
    assert msgspec.json.decode(encode_bundle(bundle))["items"][0]["priority"] == expected


def test_processor_window_keeps_sliding_after_finalize() -> None:
    events: list[Event] = [
        make_retrieval(items=[make_item(id="a")]),
        make_finalize(ts=T0 + 1),
        make_retrieval(ts=T0 + 2, items=[make_item(id="b")]),
        make_finalize(ts=T0 + 3),
    ]
    first, second = _run(events)
    assert _ids(first) == ["a"]
    assert sorted(_ids(second)) == ["a", "b"]


# Token budget ------------------------------------------------------------------------------------


def _sized_items() -> list[RetrievedItem]:
    return [
        make_item(id="big", salience=1.0, created_at=T0, content=_words(1, 600)),
        make_item(id="small-1", salience=0.6, created_at=T0, content=_words(2, 20)),
        make_item(id="small-2", salience=0.5, created_at=T0, content=_words(3, 20)),
    ]


def test_processor_skips_item_over_budget_and_takes_later_smaller_ones() -> None:
    (everything,) = _run([make_retrieval(items=_sized_items()), make_finalize(ts=T0 + 1)])
    assert _ids(everything) == ["big", "small-1", "small-2"]
    budget = everything.stats.tokens_bundle // 2
    events: list[Event] = [
        make_retrieval(items=_sized_items()),
        make_finalize(ts=T0 + 1, max_tokens=budget),
        make_finalize(ts=T0 + 2),
    ]
    limited, after = _run(events)
    assert _ids(limited) == ["small-1", "small-2"]
    assert limited.stats.skipped_for_budget == 1
    assert limited.stats.tokens_bundle <= budget
    assert limited.stats.items_in_window == 3
    # Skipped is not evicted: the next bundle without a budget has it again.
    assert _ids(after) == ["big", "small-1", "small-2"]
    assert after.stats.skipped_for_budget == 0
    assert after.stats.evicted == 0


def test_processor_event_budget_overrides_config_budget() -> None:
    roomy, tight = 100_000, 60
    config = BundleConfig(max_tokens=tight)
    events: list[Event] = [
        make_retrieval(items=_sized_items()),
        make_finalize(ts=T0 + 1),
        make_finalize(ts=T0 + 2, max_tokens=roomy),
    ]
    by_config, by_event = _run(events, config)
    assert by_config.stats.tokens_bundle <= tight
    assert "big" not in _ids(by_config)
    assert _ids(by_event) == ["big", "small-1", "small-2"]
    loose = BundleConfig(max_tokens=roomy)
    events[1] = make_finalize(ts=T0 + 1, max_tokens=tight)
    narrowed, _ = _run(events, loose)
    assert narrowed.stats.tokens_bundle <= tight
    assert "big" not in _ids(narrowed)


@pytest.mark.parametrize("fmt", FORMATS)
def test_processor_budget_smaller_than_any_context_is_not_exceeded(fmt: ContextFormat) -> None:
    (bundle,) = _run(
        [make_retrieval(items=_sized_items()), make_finalize(ts=T0 + 1, max_tokens=1)],
        BundleConfig(format=fmt),
    )
    assert bundle.items == []
    assert bundle.stats.skipped_for_budget == 3
    assert bundle.stats.tokens_bundle <= 1
    assert _tokenizer.count(bundle.context) <= 1


_contents = st.one_of(
    st.builds(_words, st.integers(0, 50), st.integers(0, 400)),
    st.sampled_from(["", "short", "x" * 300]),
)
_budget_items = st.lists(
    st.builds(
        make_item,
        id=st.sampled_from([f"i{n}" for n in range(10)]),
        salience=st.floats(0.2, 1.0),
        created_at=st.integers(T0 - 30 * DAY_MS, T0),
        content=_contents,
        attributes=st.dictionaries(
            st.sampled_from(["lang", "domain"]), st.sampled_from(["go", "rs"]), max_size=2
        ),
        tags=st.lists(st.sampled_from(["a", "b"]), max_size=2),
    ),
    max_size=8,
)


def _budget_bundle(
    items: list[RetrievedItem], budget: int | None, fmt: ContextFormat
) -> tuple[Bundle, BundleAccumulator]:
    config = BundleConfig(format=fmt, max_items=6)
    (bundle,) = _run(
        [make_retrieval(items=items), make_finalize(ts=T0 + 1, max_tokens=budget)], config
    )
    window = BundleAccumulator(config)
    for item in items:
        window.add(item, now_ms=T0)
    return bundle, window


def _tokens_of(items: list[ContextItem], fmt: ContextFormat) -> int:
    """Tokens of the context rendered from exactly these items (no budget)."""
    offered = [retrieved_from(i) for i in items]
    config = BundleConfig(format=fmt, max_items=6, min_salience_threshold=0.0)
    (bundle,) = _run([make_retrieval(items=offered), make_finalize(ts=T0 + 1)], config)
    assert len(bundle.items) == len(items)
    return bundle.stats.tokens_bundle


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=_budget_items, budget=st.integers(1, 4000), fmt=st.sampled_from(FORMATS))
def test_processor_budget_is_never_exceeded(
    items: list[RetrievedItem], budget: int, fmt: ContextFormat
) -> None:
    bundle, _ = _budget_bundle(items, budget, fmt)
    assert bundle.stats.tokens_bundle <= budget
    assert _tokenizer.count(bundle.context) == bundle.stats.tokens_bundle


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=_budget_items, budget=st.none() | st.integers(20, 4000), fmt=st.sampled_from(FORMATS))
def test_processor_budget_takes_items_greedily_in_priority_order(
    items: list[RetrievedItem], budget: int | None, fmt: ContextFormat
) -> None:
    bundle, window = _budget_bundle(items, budget, fmt)
    ranked = [r.item for r in window.ranked(now_ms=T0 + 1)]
    # The rule: in priority order, an item fits when the context rendered from the
    # items taken so far plus this one stays within the budget.
    taken: list[ContextItem] = []
    for candidate in ranked:
        if budget is None or _tokens_of([*taken, candidate], fmt) <= budget:
            taken.append(candidate)
    assert _ids(bundle) == [i.id for i in taken]
    if budget is not None:
        assert bundle.stats.tokens_bundle <= budget
    assert bundle.stats.skipped_for_budget == len(ranked) - len(taken)
    assert bundle.stats.items_included == len(taken)
    assert bundle.stats.items_in_window == len(ranked)
    assert bundle.stats.tokens_bundle <= bundle.stats.tokens_naive
    assert _tokenizer.count(bundle.context) == bundle.stats.tokens_bundle
    for entry in bundle.items:
        assert "".join(bundle.blocks[b] for b in entry.blocks) == window.items[entry.id].content


# End, TTL, positions -----------------------------------------------------------------------------


def test_processor_end_drops_window_refuses_a_finalize_and_numbers_on() -> None:
    processor = ContextProcessor(BundleConfig())
    window = [make_item(id="a"), make_item(id="b", salience=0.1)]
    processor.apply(make_retrieval(items=window), position=1)
    before = processor.apply(make_finalize(ts=T0 + 1), position=2)
    processor.apply(make_end(ts=T0 + 2), position=3)
    with pytest.raises(FinalizeRefusedError, match="finalize refused: conversation 'c-1' has end"):
        processor.apply(make_finalize(ts=T0 + 3), position=4)
    processor.apply(make_retrieval(ts=T0 + 4, items=[make_item(id="c")]), position=5)
    fresh = processor.apply(make_finalize(ts=T0 + 5), position=6)
    assert before is not None and fresh is not None
    assert (before.bundle_id, _ids(before)) == ("c-1:1", ["a"])
    assert (fresh.bundle_id, _ids(fresh)) == ("c-1:2", ["c"])


def test_processor_refuses_a_finalize_of_a_conversation_never_seen_and_keeps_nothing() -> None:
    processor = ContextProcessor(BundleConfig(), is_tracking_changes=True)
    with pytest.raises(FinalizeRefusedError, match="'nope' has no events") as refused:
        processor.apply(make_finalize(conversation_id="nope"), position=1)
    assert (refused.value.reason, refused.value.path) == ("unknown", "$.conversation_id")
    assert (processor.held, processor.take_changes()) == (0, [])


def test_processor_end_of_one_conversation_leaves_others() -> None:
    events: list[Event] = [
        make_retrieval(items=[make_item(id="a")]),
        make_retrieval(conversation_id="c-2", items=[make_item(id="z")]),
        make_end(ts=T0 + 1),
        make_finalize(conversation_id="c-2", ts=T0 + 2),
    ]
    (bundle,) = _run(events)
    assert (bundle.conversation_id, _ids(bundle)) == ("c-2", ["z"])


def test_processor_event_after_ttl_restarts_window_and_seq() -> None:
    ttl = 24 * HOUR_MS
    events: list[Event] = [
        make_retrieval(items=[make_item(id="a", created_at=T0)]),
        make_finalize(ts=T0 + ttl),  # exactly the TTL later: same conversation
        make_retrieval(ts=T0 + 2 * ttl + 2, items=[make_item(id="b")]),
        make_finalize(ts=T0 + 2 * ttl + 3),
    ]
    kept, refilled = _run(events, BundleConfig(conversation_ttl_hours=24.0))
    assert (kept.seq, _ids(kept)) == (1, ["a"])
    assert (refilled.seq, _ids(refilled)) == (2, ["b"])


def test_processor_refuses_a_finalize_more_than_the_ttl_after_the_last_event() -> None:
    processor = ContextProcessor(BundleConfig(conversation_ttl_hours=1.0))
    processor.apply(make_retrieval(items=[make_item(id="a")]), position=1)
    processor.apply(make_finalize(ts=T0 + 1), position=2)
    late = make_finalize(ts=T0 + 2 * HOUR_MS)
    with pytest.raises(FinalizeRefusedError, match="'c-1' expired") as refused:
        processor.apply(late, position=3)
    assert refused.value.reason == "expired"
    # Released on stream time first, then refused alike.
    other = ContextProcessor(BundleConfig(conversation_ttl_hours=1.0))
    other.apply(make_retrieval(items=[make_item(id="a")]), position=1)
    other.apply(make_retrieval(conversation_id="c-2", ts=T0 + 2 * HOUR_MS), position=2)
    assert other.release_idle() == 1
    with pytest.raises(FinalizeRefusedError, match="'c-1' expired"):
        other.apply(late, position=3)


def test_processor_ttl_counts_from_the_previous_event_not_the_first() -> None:
    events: list[Event] = [
        make_retrieval(items=[make_item(id="a")]),
        make_retrieval(ts=T0 + 20 * HOUR_MS, items=[make_item(id="b")]),
        make_finalize(ts=T0 + 40 * HOUR_MS),
    ]
    (bundle,) = _run(events, BundleConfig(conversation_ttl_hours=24.0))
    assert sorted(_ids(bundle)) == ["a", "b"]


def test_processor_without_ttl_never_restarts() -> None:
    events: list[Event] = [
        make_retrieval(items=[make_item(id="a", created_at=T0)]),
        make_finalize(ts=T0 + 400 * DAY_MS),
    ]
    (bundle,) = _run(events, BundleConfig(conversation_ttl_hours=None))
    assert _ids(bundle) == ["a"]


def test_processor_skips_events_at_or_below_last_position() -> None:
    processor = ContextProcessor(BundleConfig())
    assert processor.apply(make_retrieval(items=[make_item(id="a")]), position=10) is None
    assert processor.apply(make_retrieval(items=[make_item(id="x")]), position=10) is None
    assert processor.apply(make_retrieval(items=[make_item(id="y")]), position=3) is None
    assert processor.apply(make_finalize(ts=T0 + 1), position=10) is None
    assert processor.apply(make_end(ts=T0 + 1), position=9) is None
    bundle = processor.apply(make_finalize(ts=T0 + 1), position=11)
    assert bundle is not None
    assert (bundle.seq, _ids(bundle)) == (1, ["a"])
    assert bundle.stats.accepted == 1
    # Positions are per conversation: another one starts wherever its input is.
    other = ContextProcessor(BundleConfig())
    other.apply(make_retrieval(items=[make_item(id="a")]), position=5)
    other.apply(make_retrieval(conversation_id="c-2", items=[make_item(id="q")]), position=1)
    second = other.apply(make_finalize(conversation_id="c-2", ts=T0 + 1), position=2)
    assert second is not None
    assert _ids(second) == ["q"]


def test_processor_skips_replayed_events_after_end() -> None:
    processor = ContextProcessor(BundleConfig())
    processor.apply(make_retrieval(items=[make_item(id="a")]), position=1)
    processor.apply(make_end(ts=T0 + 1), position=2)
    assert processor.apply(make_retrieval(items=[make_item(id="a")]), position=1) is None
    with pytest.raises(FinalizeRefusedError, match="has ended"):
        processor.apply(make_finalize(ts=T0 + 2), position=3)


def test_processor_skips_replayed_events_after_an_end_that_found_the_conversation_expired() -> None:
    processor = ContextProcessor(BundleConfig(conversation_ttl_hours=24.0))
    processor.apply(make_retrieval(items=[make_item(id="a")]), position=5)
    late = T0 + 25 * HOUR_MS
    assert processor.apply(make_end(ts=late), position=10) is None
    # Position 7 is at or below the last applied position (10): skipped, as after any end.
    replayed = make_retrieval(ts=late, items=[make_item(id="x")])
    assert processor.apply(replayed, position=7) is None
    with pytest.raises(FinalizeRefusedError, match="has ended"):
        processor.apply(make_finalize(ts=late + 1), position=11)


# Stats -------------------------------------------------------------------------------------------


def test_processor_stats_follow_the_seed() -> None:
    config = BundleConfig(max_items=2, min_salience_threshold=0.2)
    events: list[Event] = [
        make_retrieval(
            items=[
                make_item(id="a", salience=0.5, created_at=T0 - 10 * DAY_MS),
                make_item(id="b", salience=0.1, created_at=T0),  # rejected: threshold
                make_item(id="c", salience=0.6, created_at=T0 - 5 * DAY_MS),
                make_item(id="d", salience=0.9, created_at=T0 - 3),  # evicts the lowest
            ]
        ),
        make_finalize(ts=T0 + 1000),
        make_retrieval(ts=T0 + 2000, items=[make_item(id="e", salience=0.05)]),
        make_finalize(ts=T0 + 3000),
    ]
    first, second = _run(events, config)
    s = first.stats
    assert _ids(first) == ["d", "c"]
    assert (s.accepted, s.rejected, s.evicted) == (3, 1, 1)
    assert s.acceptance_rate == 0.75
    assert (s.items_in_window, s.items_included, s.max_items) == (2, 2, 2)
    assert s.fill_percentage == 100.0
    assert s.avg_salience == pytest.approx(0.75)
    assert s.avg_priority == pytest.approx((first.items[0].priority + first.items[1].priority) / 2)
    assert (s.oldest_created_at, s.newest_created_at) == (T0 - 5 * DAY_MS, T0 - 3)
    assert s.skipped_for_budget == 0
    assert s.tokenizer == "cl100k_base"
    # Counted over the conversation so far.
    assert (second.stats.accepted, second.stats.rejected, second.stats.evicted) == (3, 2, 1)
    assert second.stats.acceptance_rate == 0.6


def test_processor_stats_of_partly_filled_and_empty_windows() -> None:
    config = BundleConfig(max_items=4)
    (partial,) = _run(
        [make_retrieval(items=[make_item(id="a", created_at=T0)]), make_finalize(ts=T0)], config
    )
    assert partial.stats.fill_percentage == 25.0
    assert partial.stats.acceptance_rate == 1.0
    assert (partial.stats.oldest_created_at, partial.stats.newest_created_at) == (T0, T0)
    (empty,) = _run([make_retrieval(items=[]), make_finalize(ts=T0)], config)
    assert empty.items == []
    assert empty.stats.fill_percentage == 0.0
    assert (empty.stats.oldest_created_at, empty.stats.newest_created_at) == (None, None)
    assert empty.stats.avg_salience == 0.0


# Whole workloads ---------------------------------------------------------------------------------


def _encoded(events: Sequence[Event], processor: ContextProcessor) -> list[bytes]:
    out = []
    for position, event in enumerate(events, start=1):
        bundle = processor.apply(event, position=position)
        if bundle is not None:
            out.append(encode_bundle(bundle))
    return out


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), fmt=st.sampled_from(FORMATS))
def test_processor_replay_is_byte_identical(seed: int, fmt: ContextFormat) -> None:
    events = generate(seed, WorkloadShape(conversations=4))
    config = BundleConfig(format=fmt, max_items=8)
    warm = _encoded(events, ContextProcessor(config))
    cold = _encoded(events, ContextProcessor(config, tokenizer=TiktokenTokenizer()))
    again = _encoded(events, ContextProcessor(config))
    assert warm
    assert warm == cold == again


def test_processor_tokens_bundle_below_naive_on_workload() -> None:
    bundles = _run(generate(7))
    assert bundles
    for bundle in bundles:
        assert bundle.stats.tokens_bundle <= bundle.stats.tokens_naive
        assert bundle.stats.tokens_bundle == _tokenizer.count(bundle.context)
        assert bundle.stats.tokenizer == "cl100k_base"
    bundled = sum(b.stats.tokens_bundle for b in bundles)
    naive = sum(b.stats.tokens_naive for b in bundles)
    assert bundled / naive < 1.0


def test_item_events_record_each_offer_and_who_evicted_whom_only_when_recording() -> None:
    events = [
        make_retrieval(
            items=[make_item(id="it-1", salience=0.5), make_item(id="it-2", salience=0.7)]
        ),
        make_retrieval(
            items=[make_item(id="it-2", salience=0.7), make_item(id="it-3", salience=0.9)]
        ),
    ]
    silent = ContextProcessor(BundleConfig(max_items=2))
    recording = ContextProcessor(BundleConfig(max_items=2), is_recording_items=True)
    for position, event in enumerate(events):
        silent.apply(event, position=position)
        recording.apply(event, position=position)
    assert silent.take_item_events() == []
    taken = recording.take_item_events()
    assert [(e.position, e.result.item_id, e.result.status) for e in taken] == [
        (0, "it-1", "accepted"),
        (0, "it-2", "accepted"),
        (1, "it-2", "merged"),
        (1, "it-3", "accepted"),
    ]
    evicted = taken[-1].result.evicted
    assert evicted is not None and evicted.id == "it-1"
    assert recording.take_item_events() == []  # taken means reset


def test_window_of_ranks_a_held_window_and_is_none_for_an_unknown_conversation() -> None:
    processor = ContextProcessor(BundleConfig())
    processor.apply(
        make_retrieval(
            items=[make_item(id="low", salience=0.3), make_item(id="high", salience=0.9)]
        )
    )
    ranked = processor.window_of("c-1", now_ms=processor.stream_time_ms)
    assert ranked is not None
    assert [r.item.id for r in ranked] == ["high", "low"]
    assert ranked[0].priority > ranked[1].priority
    assert processor.window_of("nobody", now_ms=0) is None


_PASSAGE = (
    "the shared passage that every retrieval returns in full, with more words than its quotes"
)


@pytest.mark.parametrize(
    ("contents", "is_alike", "writes"),
    [
        ((f"First.\n{_PASSAGE}\n", f"Output:\n{_PASSAGE}\ndone"), False, '[§1 "'),  # a repeat
        (("alpha beta gamma", "delta epsilon zeta"), True, "^1"),  # a header naming its base
        (("alpha beta gamma", "delta epsilon zeta"), False, None),  # nothing shared
    ],
)
def test_stats_say_deduplicated_exactly_when_the_context_shares_something(
    contents: tuple[str, str], is_alike: bool, writes: str | None
) -> None:
    unlike: dict[str, object] = {} if is_alike else {"kind": "tool_result", "tags": ["t"]}
    items = [
        make_item(id="doc:1", content=contents[0]),
        make_item(id="run-7", content=contents[1], **unlike),
    ]
    processor = ContextProcessor(BundleConfig(min_salience_threshold=0.0))
    processor.apply(make_retrieval(items=items), position=1)
    bundle = processor.apply(make_finalize(), position=2)
    assert bundle is not None
    assert all(mark in bundle.context for mark in [writes] if mark is not None)
    assert not any(m in bundle.context for m in ('[§1 "', "^1") if m != writes)
    assert bundle.stats.deduplicated is (writes is not None)
    # The repeated passage is one block both items use; nothing else is used twice.
    assert bundle.stats.shared_blocks == (1 if writes == '[§1 "' else 0)


def test_a_finalize_with_nothing_offered_has_an_acceptance_rate_of_zero() -> None:
    (bundle,) = _run([make_retrieval(items=[]), make_finalize()])
    assert (bundle.stats.accepted, bundle.stats.rejected) == (0, 0)
    assert bundle.stats.acceptance_rate == 0.0


@pytest.mark.parametrize(
    ("order", "budget", "context_ids"),
    [
        ("stable", 130, ["d0", "d2"]),
        ("edges", 175, ["d2", "d3", "d0"]),
        ("priority", 175, ["d2", "d0", "d3"]),
    ],
)
def test_under_a_budget_the_items_chosen_are_written_in_the_order_asked_for(
    order: RenderOrder, budget: int, context_ids: list[str]
) -> None:
    # Four items of ~57 tokens each, ranked d2, d0, d3, d1: the budget leaves out the weakest.
    processor = ContextProcessor(BundleConfig(min_salience_threshold=0.0, order=order))
    items = [
        make_item(id=f"d{n}", content=" ".join(f"w{n}x{k}" for k in range(12)), salience=s)
        for n, s in enumerate([0.6, 0.3, 0.9, 0.5])
    ]
    processor.apply(make_retrieval(items=items), position=1)
    bundle = processor.apply(make_finalize(max_tokens=budget), position=2)
    assert bundle is not None
    assert bundle.stats.skipped_for_budget == 4 - len(context_ids)
    written = [line.split()[1] for line in bundle.context.splitlines() if line.startswith("§")]
    assert written == context_ids
