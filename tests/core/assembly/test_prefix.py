"""Rendering orders and prefix reuse: same selection, exact reuse counts, kept across restarts."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_ctx.core.assembly.prefix import (
    NO_BREAKPOINT,
    cache_breakpoint,
    pack_context,
    tokens_prefix_reused,
    unpack_context,
)
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.counting.tokenizer import BpeTokenizer, get_tokenizer
from stream_ctx.core.text.textmatch import common_run
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.bundle import Bundle, CacheBreakpoint
from stream_ctx.core.wire.events import Event, Finalize, RenderOrder
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.shell.state.changelog import ChangelogWrites, RestoredPartition
from tests.factories import written

ORDERS: tuple[RenderOrder, ...] = ("priority", "stable", "edges")
SHAPE = WorkloadShape(
    conversations=3, retrievals_per_conversation=10, finalize_every=1, items_per_retrieval=(1, 4)
)


def _bundles(events: list[Event], config: BundleConfig) -> list[Bundle]:
    processor = ContextProcessor(config)
    return [b for n, e in enumerate(events) if (b := processor.apply(e, position=n)) is not None]


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), budget=st.one_of(st.none(), st.integers(50, 3_000)))
def test_every_order_keeps_the_budget_and_without_one_selects_the_same_items(
    seed: int, budget: int | None
) -> None:
    # Repeats are written out where they first appear in the chosen order, so under a budget a
    # borderline item may fit in one order and not in another; without one, orders agree.
    events = generate(seed, SHAPE)
    runs = {o: _bundles(events, BundleConfig(order=o, max_tokens=budget)) for o in ORDERS}
    if budget is None:
        selections = {o: [[i.id for i in b.items] for b in bundles] for o, bundles in runs.items()}
        assert selections["stable"] == selections["priority"] == selections["edges"]
    for bundles in runs.values():
        for bundle in bundles:
            assert budget is None or bundle.stats.tokens_bundle <= budget
            assert get_tokenizer().count(bundle.context) == bundle.stats.tokens_bundle


@pytest.mark.parametrize("order", ORDERS)
def test_tokens_prefix_reused_equals_a_brute_force_count(order: RenderOrder) -> None:
    tokenizer = get_tokenizer()
    previous: dict[str, list[int]] = {}
    reused = 0
    for bundle in _bundles(generate(17, SHAPE), BundleConfig(order=order)):
        tokens = tokenizer.encode(bundle.context)
        before = previous.get(bundle.conversation_id)
        want = 0 if before is None else _common_prefix(before, tokens)
        assert bundle.stats.tokens_prefix_reused == want, bundle.bundle_id
        previous[bundle.conversation_id] = tokens
        reused += want
    assert reused > 0  # the workload does reuse prefixes, so the check above is not vacuous


def test_stable_order_keeps_items_in_arrival_order_and_reuses_more() -> None:
    events = generate(23, SHAPE)
    share = {}
    for order in ("priority", "stable"):
        bundles = _bundles(events, BundleConfig(order=order))
        share[order] = sum(b.stats.tokens_prefix_reused for b in bundles)
    assert share["stable"] > share["priority"]


def test_prefix_reuse_survives_a_restart_through_the_changelog() -> None:
    events = generate(29, SHAPE)
    config = BundleConfig(order="stable")
    uninterrupted = [b.stats.tokens_prefix_reused for b in _bundles(events, config)]
    half = len(events) // 2
    first = ContextProcessor(config, is_tracking_changes=True)
    changelog = RestoredPartition()
    got = []
    for position, event in enumerate(events[:half]):
        bundle = first.apply(event, position=position)
        got += [bundle.stats.tokens_prefix_reused] if bundle is not None else []
        changelog.fold(written(ChangelogWrites.of(first.take_changes())))
    second = ContextProcessor(config, is_tracking_changes=True)
    for cid, state, items, context in changelog.conversations():
        second.restore(cid, state, items, context)
    for position, event in enumerate(events[half:], start=half):
        bundle = second.apply(event, position=position)
        got += [bundle.stats.tokens_prefix_reused] if bundle is not None else []
    assert got == uninterrupted
    assert any(isinstance(e, Finalize) for e in events[half:])


def test_a_kept_context_with_a_lone_surrogate_unpacks_to_the_same_text() -> None:
    # Content may hold lone surrogates (tokenizers refuse them; a bundle must not): the kept
    # context round-trips them instead of failing the next finalize.
    context = "§1 a (chunk)\nbefore \ud800 after\n"
    assert unpack_context(pack_context(context)) == context


@pytest.mark.parametrize(
    ("before", "segments", "reused"),
    [
        ("ab\nA b\n", ["ab\nA!\n"], 3),
        ("§1 x (chunk)\nA b c\n", ["§1 x (chunk)\nA!\n"], 7),
        # A segment ends where the texts part, but the earlier one's word goes on: its last
        # token differs ("fore" against "forest").
        ("§1 a (chunk)\nforest\n", ["§1 a (chunk)\n", "fore", "\n"], 6),
    ],
)
def test_prefix_reuse_counts_exactly_the_tokens_both_texts_start_with(
    before: str, segments: list[str], reused: int
) -> None:
    tokenizer = BpeTokenizer()
    context = "".join(segments)
    assert common_run(tokenizer.encode(before), 0, tokenizer.encode(context), 0) == reused
    counted = [(text, tokenizer.count(text)) for text in segments]
    assert tokens_prefix_reused(before, context, counted, tokenizer) == reused


@pytest.mark.parametrize("order", ORDERS)
def test_the_cache_breakpoint_ends_the_whole_entries_the_previous_context_began_with(
    order: RenderOrder,
) -> None:
    tokenizer = get_tokenizer()
    previous: dict[str, str] = {}
    placed = 0
    for bundle in _bundles(generate(17, SHAPE), BundleConfig(order=order)):
        point, context = bundle.cache_breakpoint, bundle.context
        before = previous.get(bundle.conversation_id, "")
        previous[bundle.conversation_id] = context
        assert context[: point.chars] == before[: point.chars]
        # Nothing shared past it but part of an entry: the next entry differs, or there is none.
        same = common_run(before, 0, context, 0)
        assert "\n§" not in context[point.chars : same] or same == len(context)
        assert point.chars == 0 or point.chars == len(context) or context[point.chars] == "§"
        assert point.tokens == tokenizer.count(context[: point.chars])
        blocks = bundle.cache_blocks()
        assert "".join(blocks) == context
        assert sum(tokenizer.count(b) for b in blocks) == bundle.stats.tokens_bundle
        assert point.meets == [m for m in (1_024, 2_048, 4_096) if point.tokens >= m]
        placed += point.chars > 0
    assert placed > 0  # the workload does share entries, so the checks above are not vacuous


def test_a_delta_has_no_cache_breakpoint_of_its_own() -> None:
    bundles = _bundles(generate(17, SHAPE), BundleConfig(order="stable", mode="delta"))
    deltas = [b for b in bundles if b.mode == "delta"]
    assert deltas
    assert all(b.cache_breakpoint.chars == 0 for b in deltas)


# Two entries as an assembly cuts and counts them.
_TWO = [
    ("§1", 2),
    (" a (chunk)\n", 4),
    ("First text", 2),
    (".\n", 1),
    ("§2", 2),
    (" b ^1\n", 4),
    ("Second text", 2),
    (".\n", 1),
]


@pytest.mark.parametrize(
    ("before", "segments", "point"),
    [
        # The previous context ends where the second entry starts: the first is shared whole.
        ("§1 a (chunk)\nFirst text.\n", _TWO, CacheBreakpoint(chars=25, tokens=9, meets=[])),
        # The texts part inside the second entry's content: its line start is no entry start.
        (
            "§1 a (chunk)\nFirst text.\n§2 b ^1\nSecond word.\n",
            _TWO,
            CacheBreakpoint(chars=25, tokens=9, meets=[]),
        ),
        # A lead-like segment inside a line starts no entry.
        ("x§2 c\n", [("x", 1), ("§2", 1), (" b\n", 1)], NO_BREAKPOINT),
        # An entry starting at the first line break, one character in.
        (
            "\n§1 c\n",
            [("\n", 1), ("§1", 1), (" b\n", 1)],
            CacheBreakpoint(chars=1, tokens=1, meets=[]),
        ),
        # All of it, exactly the smallest cached prefix.
        (
            "§1 a\n",
            [("§1", 1000), (" a\n", 24)],
            CacheBreakpoint(chars=5, tokens=1024, meets=[1024]),
        ),
    ],
)
def test_the_cache_breakpoint_is_the_last_entry_start_at_or_before_the_first_difference(
    before: str, segments: list[tuple[str, int]], point: CacheBreakpoint
) -> None:
    context = "".join(text for text, _ in segments)
    assert cache_breakpoint(before, context, segments) == point
