"""Delta bundles: rebuilt byte for byte, lossless for a reader of the history, never dearer."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_ctx.core.assembly.delta import read_delta
from stream_ctx.core.assembly.rebuild import DeltaBaseError, rebuild_full
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.counting.tokenizer import BpeTokenizer, get_tokenizer
from stream_ctx.core.entries.reader import ContextSyntaxError, ReadItem, read_context
from stream_ctx.core.window.config import BundleConfig, bundle_config_from_table
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.codec import decode_event, encode_bundle
from stream_ctx.core.wire.events import Event, Finalize, RenderOrder
from stream_ctx.corpora.realtext import workload
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.errors import ConfigError, InvalidEventError
from stream_ctx.shell.state.changelog import ChangelogWrites, RestoredPartition
from tests.factories import make_finalize, make_item, make_retrieval, written

_SHAPE = WorkloadShape(conversations=2, retrievals_per_conversation=6, finalize_every=1)
_WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi".split()


def _text(n: int) -> str:
    """A distinct text of a few sentences with no repeats inside it."""
    return " ".join(f"{_WORDS[(n + k) % len(_WORDS)]}{n}x{k}" for k in range(12)) + "."


class History:
    """What a platform that appends every bundle's context to its chat history holds: the
    entries since the last full context, read back; and the last full bundle, rebuilt."""

    def __init__(self) -> None:
        self.entries: dict[str, list[ReadItem]] = {}
        self.full: dict[str, Bundle] = {}

    def take(self, bundle: Bundle) -> tuple[Bundle, list[ReadItem]]:
        """The bundle's full form and the items its context says apply now."""
        cid = bundle.conversation_id
        if bundle.mode == "full":
            current = self.entries[cid] = read_context(bundle.context)
            full = bundle
        else:
            current, new = read_delta(bundle.context, self.entries[cid])
            self.entries[cid] += new
            full = rebuild_full(bundle, self.full[cid])
        self.full[cid] = full
        return full, current


def _stated(items: Iterable[ReadItem]) -> list[tuple[str, str, dict[str, str], list[str], str]]:
    return sorted((it.id, it.kind, it.attributes, it.tags, it.content) for it in items)


def _check_against_full_twin(events: Sequence[Event], config: BundleConfig) -> list[Bundle]:
    """Apply `events`; before each finalize, a copy of the processor gets it in `full` mode: the
    delta's rebuild must encode exactly as that bundle, and reading the history must give the
    items that bundle's context states. Returns the bundles sent."""
    processor = ContextProcessor(config)
    history = History()
    sent = []
    for position, event in enumerate(events):
        twin = None
        if isinstance(event, Finalize):
            twin = copy.deepcopy(processor, {id(processor.tokenizer): processor.tokenizer})
        bundle = processor.apply(event, position=position)
        if bundle is None or twin is None:
            continue
        expected = twin.apply(msgspec.structs.replace(event, mode="full"), position=position)
        assert expected is not None
        assert bundle.stats.tokens_bundle <= bundle.stats.tokens_full
        full, current = history.take(bundle)
        assert encode_bundle(full) == encode_bundle(expected)
        assert _stated(current) == _stated(read_context(expected.context))
        sent.append(bundle)
    return sent


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    order=st.sampled_from(["priority", "stable", "edges"]),
    max_items=st.integers(2, 8),
    overrides=st.lists(
        st.tuples(
            st.sampled_from([None, None, "full", "delta"]),
            st.sampled_from([None, None, None, "reset"]),
            st.sampled_from([None, None, 200, 700]),
        ),
        min_size=12,
        max_size=12,
    ),
)
def test_every_delta_rebuilds_to_the_full_bundle_and_reads_as_its_items(
    seed: int,
    order: RenderOrder,
    max_items: int,
    overrides: list[tuple[str | None, str | None, int | None]],
) -> None:
    events: list[Event] = []
    for event in generate(seed, _SHAPE):
        if isinstance(event, Finalize):
            mode, history, budget = overrides[len(events) % len(overrides)]
            event = msgspec.structs.replace(event, mode=mode, history=history, max_tokens=budget)
        events.append(event)
    config = BundleConfig(max_items=max_items, order=order, mode="delta")
    bundles = _check_against_full_twin(events, config)
    assert bundles


def test_real_text_deltas_rebuild_exactly_and_cost_under_half() -> None:
    """A few conversations of the real-text workload (benchmarks/delta_bench.py runs it all)."""
    events = workload("numpy", conversations=4, seed=3)
    bundles = _check_against_full_twin(events, BundleConfig(max_items=10, mode="delta"))
    assert {b.mode for b in bundles} == {"full", "delta"}
    last = {b.conversation_id: b.stats for b in bundles}
    sent = sum(s.conversation_tokens_sent for s in last.values())
    full = sum(s.conversation_tokens_full for s in last.values())
    assert sent < 0.5 * full


def _turns(*contents: Sequence[str], **finalize: object) -> list[Event]:
    """One retrieval and one finalize per turn; each turn retrieves items `d<n>` of `contents`."""
    events: list[Event] = []
    for turn, texts in enumerate(contents):
        items = [make_item(id=f"doc:{n}", content=t, salience=0.9) for n, t in enumerate(texts)]
        events.append(make_retrieval(event_id=f"r{turn}", items=items))
        events.append(make_finalize(event_id=f"f{turn}", request_id=f"t{turn}", **finalize))
    return events


def _bundles(events: Iterable[Event], config: BundleConfig) -> list[Bundle]:
    processor = ContextProcessor(config)
    found = (processor.apply(event, position=n) for n, event in enumerate(events))
    return [bundle for bundle in found if bundle is not None]


def test_delta_names_what_still_applies_and_what_no_longer_does() -> None:
    a, b, c = _text(1), _text(2), _text(3)
    first, second, third = _bundles(
        _turns([a, b], [a, "changed " + b], [a, "changed " + b, c]),
        BundleConfig(mode="delta", order="stable"),
    )
    assert (first.mode, first.base_bundle_id) == ("full", None)
    assert first.context == f"§1 doc:0 (chunk)\n{a}\n§2 doc:1 ^1\n{b}\n"
    assert (second.mode, second.base_bundle_id) == ("delta", "c-1:1")
    assert second.context == (
        f"Still applies: §1 (bundle 1)\nNo longer applies: §2\n§3 doc:1 ^1\nchanged {b}\n"
    )
    assert third.context == f"Still applies: §1 (bundle 1), §3 (bundle 2)\n§4 doc:2 ^3\n{c}\n"
    assert third.stats.tokens_bundle < third.stats.tokens_full / 2


def test_kept_entries_are_named_in_number_order_runs_as_their_ends() -> None:
    a, b, c, d = (_text(n) for n in range(1, 5))
    _, second = _bundles(
        _turns([a, b, c, d], [a, b, "changed " + c, d]),
        BundleConfig(mode="delta", order="stable"),
    )
    assert second.context.startswith(
        "Still applies: §1-2 §4 (bundle 1)\nNo longer applies: §3\n§5 doc:2 "
    )
    # Priority order turned round since bundle 1 (doc:0 merged at a higher salience): the kept
    # entries are still named by number, not in the order the full context now places them.
    turns: list[Event] = [
        make_retrieval(
            event_id="r0",
            items=[
                make_item(id="doc:0", content=a, salience=0.6),
                make_item(id="doc:1", content=b, salience=0.9),
            ],
        ),
        make_finalize(event_id="f0", request_id="t0"),
        make_retrieval(event_id="r1", items=[make_item(id="doc:0", content=a, salience=0.95)]),
        make_finalize(event_id="f1", request_id="t1"),
    ]
    first, second = _bundles(turns, BundleConfig(mode="delta"))
    assert [item.id for item in first.items] == ["doc:1", "doc:0"]
    assert [item.id for item in second.items] == ["doc:0", "doc:1"]
    assert second.context == "Still applies: §1-2 (bundle 1)\n"


def test_a_delta_counts_its_own_context_and_carries_only_its_new_blocks() -> None:
    # A counter of its own, with nothing cached: every segment is counted from its text here.
    processor = ContextProcessor(BundleConfig(mode="delta"), tokenizer=BpeTokenizer())
    texts = [_text(n) for n in range(3)]
    events = _turns(texts[:2], texts)
    first, second = [b for n, e in enumerate(events) if (b := processor.apply(e, position=n))]
    assert second.mode == "delta"
    count = get_tokenizer("cl100k_base").count
    assert second.stats.tokens_bundle == count(second.context)
    assert second.stats.tokens_full == count(rebuild_full(second, first).context)
    # Appended to the history, a delta starts no cached prefix of its own.
    assert second.stats.tokens_prefix_reused == 0
    (new,) = [item for item in second.items if item.id == "doc:2"]
    assert set(second.blocks) == set(new.blocks)


def test_a_delta_costing_what_the_full_context_costs_goes_out_full() -> None:
    b = _text(2)
    count = get_tokenizer("cl100k_base").count
    delta_cost = count(f"Still applies: §1 (bundle 1)\n§2 doc:1 ^1\n{b}\n")
    costs = {}
    for words in range(1, 12):
        a = " ".join(["word"] * words) + "."
        costs[count(f"§1 doc:0 (chunk)\n{a}\n§2 doc:1 ^1\n{b}\n")] = a
    # doc:0 short enough that leaving it out saves exactly what the delta's first line costs,
    # then one token more.
    for full_cost, mode in ((delta_cost, "full"), (delta_cost + 1, "delta")):
        a = costs[full_cost]
        _, second = _bundles(_turns([a], [a, b]), BundleConfig(mode="delta", order="stable"))
        assert (second.mode, second.stats.tokens_full) == (mode, full_cost), a
        assert second.stats.tokens_bundle == (full_cost if mode == "full" else delta_cost)


def test_an_item_whose_attribute_turns_into_tags_of_the_same_text_is_sent_again() -> None:
    a, b = _text(1), _text(2)
    turns: list[Event] = [
        make_retrieval(
            event_id="r0",
            items=[
                make_item(id="doc:0", content=a, attributes={"x": "y"}),
                make_item(id="doc:1", content=b),
            ],
        ),
        make_finalize(event_id="f0", request_id="t0"),
        make_retrieval(event_id="r1", items=[make_item(id="doc:0", content=a, tags=["x", "y"])]),
        make_finalize(event_id="f1", request_id="t1"),
    ]
    config = BundleConfig(mode="delta", order="stable", min_salience_threshold=0.0)
    _, second = _bundles(turns, config)
    assert second.context.startswith(
        f"Still applies: §2 (bundle 1)\nNo longer applies: §1\n§3 doc:0 ^2 #x #y\n{a}\n"
    )


def test_a_lone_surrogate_in_content_goes_out_in_a_delta_too() -> None:
    lone = f"lone \ud800 surrogate {_text(3)}"
    bundles = _bundles(_turns([lone], [lone, _text(2)]), BundleConfig(mode="delta"))
    assert [bundle.mode for bundle in bundles] == ["full", "delta"]
    history = History()
    current = [history.take(bundle)[1] for bundle in bundles][-1]
    assert [item.content for item in current] == [lone, _text(2)]


def test_first_bundle_and_reset_are_full_and_restart_the_numbers() -> None:
    texts = [_text(1), _text(2)]
    events = _turns(texts, texts, texts)
    events[-1] = msgspec.structs.replace(events[-1], history="reset")
    modes = [(b.mode, b.base_bundle_id) for b in _bundles(events, BundleConfig(mode="delta"))]
    assert modes == [("full", None), ("delta", "c-1:1"), ("full", None)]


def test_a_finalize_mode_overrides_the_configured_one() -> None:
    texts = [_text(1), _text(2)]
    as_delta = _turns(texts, texts, mode="delta")
    assert [b.mode for b in _bundles(as_delta, BundleConfig())] == ["full", "delta"]
    as_full = _turns(texts, texts, mode="full")
    assert [b.mode for b in _bundles(as_full, BundleConfig(mode="delta"))] == ["full", "full"]


def test_a_delta_that_would_cost_more_falls_back_to_full() -> None:
    replaced = _turns([_text(1), _text(2)], [_text(3), _text(4)], [_text(5), _text(6)])
    bundles = _bundles(replaced, BundleConfig(mode="delta", max_items=2))
    assert [b.mode for b in bundles] == ["full", "full", "full"]
    assert all(b.stats.tokens_bundle == b.stats.tokens_full for b in bundles)


def test_budget_selects_the_same_items_in_both_modes() -> None:
    texts = [_text(n) for n in range(6)]
    events = _turns(texts[:3], texts[:5], texts, max_tokens=150)
    full = _bundles(events, BundleConfig(max_items=10))
    delta = _bundles(events, BundleConfig(max_items=10, mode="delta"))
    assert [b.mode for b in delta] == ["full", "delta", "delta"]
    for f, d in zip(full, delta, strict=True):
        assert [it.id for it in d.items] == [it.id for it in f.items]
        assert d.stats.skipped_for_budget == f.stats.skipped_for_budget > 0
        assert d.stats.tokens_bundle <= d.stats.tokens_full == f.stats.tokens_bundle <= 150


def test_conversation_totals_sum_what_was_sent_and_what_full_would_cost() -> None:
    texts = [_text(1), _text(2)]
    bundles = _bundles(_turns(texts, texts, texts), BundleConfig(mode="delta"))
    stats = bundles[-1].stats
    assert stats.conversation_tokens_sent == sum(b.stats.tokens_bundle for b in bundles)
    assert stats.conversation_tokens_full == sum(b.stats.tokens_full for b in bundles)
    assert stats.conversation_tokens_sent < stats.conversation_tokens_full


def test_delta_state_survives_a_restart_through_the_changelog() -> None:
    events = generate(5, _SHAPE)
    config = BundleConfig(mode="delta", max_items=6)
    uninterrupted = [encode_bundle(b) for b in _bundles(events, config)]
    half = len(events) // 2
    first = ContextProcessor(config, is_tracking_changes=True)
    changelog = RestoredPartition()
    got = []
    for position, event in enumerate(events[:half]):
        bundle = first.apply(event, position=position)
        got += [encode_bundle(bundle)] if bundle is not None else []
        changelog.fold(written(ChangelogWrites.of(first.take_changes())))
    second = ContextProcessor(config, is_tracking_changes=True)
    for cid, state, items, context in changelog.conversations():
        assert state.sent is not None
        second.restore(cid, state, items, context)
    for position, event in enumerate(events[half:], start=half):
        bundle = second.apply(event, position=position)
        got += [encode_bundle(bundle)] if bundle is not None else []
    assert got == uninterrupted
    assert b'"mode":"delta"' in b"".join(got[len(got) // 2 :])


def test_rebuild_refuses_a_base_that_is_not_the_named_bundle() -> None:
    texts = [_text(1), _text(2)]
    first, second, third = _bundles(_turns(texts, texts, texts), BundleConfig(mode="delta"))
    with pytest.raises(DeltaBaseError, match=r"`base_bundle_id` of 'c-1:3' is 'c-1:2', got a"):
        rebuild_full(third, first)
    with pytest.raises(DeltaBaseError, match=r"got a delta bundle 'c-1:2'"):
        rebuild_full(third, second)
    assert rebuild_full(first, second) is first


def test_rebuild_refuses_a_delta_it_cannot_rebuild_and_says_why() -> None:
    texts = [_text(1), _text(2)]
    first, second = _bundles(_turns(texts, [*texts, _text(3)]), BundleConfig(mode="delta"))
    assert (second.mode, second.context_order) == ("delta", [0, 1, 2])
    assert rebuild_full(second, first).stats.tokens_bundle == second.stats.tokens_full
    for order in (None, [0, 1], [0, 1, 1], [0, 1, 3]):
        broken = msgspec.structs.replace(second, context_order=order)
        message = f"`context_order` of 'c-1:2' must order all 3 items, got {order!r}"
        with pytest.raises(DeltaBaseError, match=f"^{re.escape(message)}$"):
            rebuild_full(broken, first)
    # doc:2 is new in the delta: its text is in the delta's blocks only.
    without_blocks = msgspec.structs.replace(second, blocks={})
    message = "the content of item 'doc:2' of 'c-1:2' is neither in its blocks nor in base 'c-1:1'"
    with pytest.raises(DeltaBaseError, match=f"^{re.escape(message)}$"):
        rebuild_full(without_blocks, first)
    full = second.stats.tokens_full
    miscounted = msgspec.structs.replace(
        second, stats=msgspec.structs.replace(second.stats, tokens_full=full + 1)
    )
    message = (
        f"the full context of 'c-1:2' rebuilds to {full} tokens, but its `stats.tokens_full`"
        f" is {full + 1}"
    )
    with pytest.raises(DeltaBaseError, match=f"^{re.escape(message)}$"):
        rebuild_full(miscounted, first)


def test_read_delta_refuses_a_context_it_cannot_read_against_the_history() -> None:
    texts = [_text(1), _text(2)]
    first, second = _bundles(_turns(texts, [*texts, _text(3)]), BundleConfig(mode="delta"))
    held = read_context(first.context)
    current, new = read_delta(second.context, held)
    assert [it.id for it in current] == ["doc:0", "doc:1", "doc:2"]
    assert [it.id for it in new] == ["doc:2"]
    message = "a delta context starts with 'Still applies: '"
    with pytest.raises(ContextSyntaxError, match=f"^{re.escape(message)}$"):
        read_delta(first.context, held)
    # Kept entries the reader does not hold: more than it has, or none named at all.
    for kept, history in (("§1-2 (bundle 1)", held[:1]), ("(bundle 1)", held)):
        context = second.context.replace("§1-2 (bundle 1)", kept)
        message = f"the kept entries {kept!r} are not all held"
        with pytest.raises(ContextSyntaxError, match=f"^{re.escape(message)}$"):
            read_delta(context, history)


@pytest.mark.parametrize(
    ("field", "value"), [("mode", "partial"), ("history", "forget"), ("mode", 1)]
)
def test_bad_mode_or_history_on_a_finalize_names_field_and_value(field: str, value: object) -> None:
    raw = msgspec.json.encode(
        {"type": "finalize", "conversation_id": "c", "event_id": "e", "ts": 1, field: value}
    )
    with pytest.raises(InvalidEventError, match=rf"`{field}`: .*, got {value!r}"):
        decode_event(raw)


def test_bad_bundle_mode_names_the_key_and_value() -> None:
    with pytest.raises(ConfigError, match=r"`bundle.mode`: .*, got 'partial'"):
        bundle_config_from_table({"mode": "partial"})
