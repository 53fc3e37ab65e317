"""Window rules: threshold, merge, eviction at the event's time, true top-N, counters."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_ctx.core.window import accumulator
from stream_ctx.core.window.accumulator import BundleAccumulator
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.window.scoring import priority
from stream_ctx.core.wire.events import RetrievedItem
from tests.factories import DAY_MS, T0, make_item, offered_items


def _window(**kw: object) -> BundleAccumulator:
    return BundleAccumulator(BundleConfig(**kw))  # type: ignore[arg-type]


def _counts(acc: BundleAccumulator) -> tuple[int, int, int]:
    c = acc.counters
    return (c.accepted, c.rejected, c.evicted)


# Threshold ---------------------------------------------------------------------------------------


def test_accumulator_rejects_salience_below_threshold_with_reason() -> None:
    acc = _window(min_salience_threshold=0.3)
    result = acc.add(make_item(id="a", salience=0.29), now_ms=T0)
    assert result.status == "rejected"
    assert not result.is_accepted
    assert result.reason is not None
    assert "0.29" in result.reason
    assert acc.items == {}
    assert _counts(acc) == (0, 1, 0)


def test_accumulator_accepts_salience_equal_to_threshold() -> None:
    acc = _window(min_salience_threshold=0.3)
    assert acc.add(make_item(id="a", salience=0.3), now_ms=T0).is_accepted
    assert set(acc.items) == {"a"}


def test_accumulator_threshold_rejects_even_a_held_id_and_changes_nothing() -> None:
    acc = _window(min_salience_threshold=0.3)
    acc.add(make_item(id="a", salience=0.8, content="old", kind="chunk", tags=["x"]), now_ms=T0)
    before = acc.items["a"]
    result = acc.add(
        make_item(
            id="a",
            salience=0.1,
            content="new",
            kind="episode",
            tags=["y"],
            attributes={"k": "v"},
            created_at=T0 + 5,
        ),
        now_ms=T0 + 10,
    )
    assert result.status == "rejected"
    assert result.reason is not None
    assert acc.items == {"a": before}
    assert _counts(acc) == (1, 1, 0)


# Merge -------------------------------------------------------------------------------------------


def test_accumulator_merge_takes_new_fields_and_max_salience() -> None:
    acc = _window()
    acc.add(
        make_item(
            id="a",
            salience=0.9,
            content="old text",
            kind="chunk",
            attributes={"language": "go", "gone": "x"},
            tags=["t1", "t2"],
            created_at=T0 - DAY_MS,
        ),
        now_ms=T0,
    )
    result = acc.add(
        make_item(
            id="a",
            salience=0.4,
            content="new text",
            kind="episode",
            attributes={"language": "rust"},
            tags=["t3"],
            created_at=T0 - 5,
        ),
        now_ms=T0 + 1,
    )
    assert result.is_accepted
    assert result.evicted is None
    item = acc.items["a"]
    assert (item.content, item.kind, item.attributes, item.tags, item.created_at) == (
        "new text",
        "episode",
        {"language": "rust"},
        ["t3"],
        T0 - 5,
    )
    assert item.salience == 0.9
    assert len(acc.items) == 1
    assert _counts(acc) == (2, 0, 0)


def test_accumulator_merge_raises_salience_when_new_is_higher() -> None:
    acc = _window()
    acc.add(make_item(id="a", salience=0.4), now_ms=T0)
    acc.add(make_item(id="a", salience=0.7), now_ms=T0)
    assert acc.items["a"].salience == 0.7


def test_accumulator_merge_without_created_at_takes_the_event_time() -> None:
    acc = _window()
    acc.add(make_item(id="a", created_at=T0 - DAY_MS), now_ms=T0)
    acc.add(make_item(id="a", created_at=None), now_ms=T0 + 77)
    assert acc.items["a"].created_at == T0 + 77


def test_accumulator_new_item_without_created_at_takes_the_event_time() -> None:
    acc = _window()
    acc.add(make_item(id="a", created_at=None), now_ms=T0 + 3)
    assert acc.items["a"].created_at == T0 + 3


def test_accumulator_merge_in_a_full_window_evicts_nothing() -> None:
    acc = _window(max_items=2)
    acc.add(make_item(id="a", salience=0.5), now_ms=T0)
    acc.add(make_item(id="b", salience=0.6), now_ms=T0)
    result = acc.add(make_item(id="a", salience=0.3, content="again"), now_ms=T0)
    assert result.is_accepted
    assert result.evicted is None
    assert set(acc.items) == {"a", "b"}
    assert _counts(acc) == (3, 0, 0)


# Eviction ----------------------------------------------------------------------------------------


def _aging_window() -> BundleAccumulator:
    """`old` is salient but stale, `fresh` is recent with low salience; half-life one day."""
    acc = _window(max_items=2, recency_half_life_days=1.0, min_salience_threshold=0.1)
    acc.add(make_item(id="old", salience=1.0, created_at=T0 - 10 * DAY_MS), now_ms=T0)
    acc.add(make_item(id="fresh", salience=0.3, created_at=T0), now_ms=T0)
    return acc


def test_accumulator_full_evicts_lowest_priority_at_event_time() -> None:
    # At T0: old ~ (0.001 + 1.0) / 2 = 0.50, fresh = (1 + 0.3) / 2 = 0.65 -> old goes.
    acc = _aging_window()
    result = acc.add(make_item(id="new", salience=0.8, created_at=T0), now_ms=T0)
    assert result.status == "accepted"
    assert result.evicted is not None
    assert result.evicted.id == "old"
    assert set(acc.items) == {"fresh", "new"}
    assert _counts(acc) == (3, 0, 1)


def test_accumulator_full_eviction_uses_the_new_events_time_not_arrival_time() -> None:
    # Two days later: fresh = (0.25 + 0.3) / 2 = 0.275 < old ~ 0.50 -> fresh goes.
    acc = _aging_window()
    later = T0 + 2 * DAY_MS
    result = acc.add(make_item(id="new", salience=0.8, created_at=later), now_ms=later)
    assert result.evicted is not None
    assert result.evicted.id == "fresh"
    assert set(acc.items) == {"old", "new"}


def test_accumulator_newcomer_ranking_lowest_is_rejected_with_reason() -> None:
    acc = _window(max_items=2, min_salience_threshold=0.1)
    acc.add(make_item(id="a", salience=0.9, created_at=T0), now_ms=T0)
    acc.add(make_item(id="b", salience=0.8, created_at=T0), now_ms=T0)
    before = dict(acc.items)
    result = acc.add(make_item(id="c", salience=0.2, created_at=T0 - 300 * DAY_MS), now_ms=T0)
    assert result.status == "rejected"
    assert result.evicted is None
    assert result.reason
    assert acc.items == before
    assert _counts(acc) == (2, 1, 0)


def test_accumulator_full_ties_evict_the_greatest_id() -> None:
    acc = _window(max_items=2)
    acc.add(make_item(id="b", salience=0.5, created_at=T0), now_ms=T0)
    acc.add(make_item(id="d", salience=0.5, created_at=T0), now_ms=T0)
    # Same priority, salience and created_at: id ascending, so the last is the greatest id.
    rejected = acc.add(make_item(id="e", salience=0.5, created_at=T0), now_ms=T0)
    assert rejected.status == "rejected"
    accepted = acc.add(make_item(id="a", salience=0.5, created_at=T0), now_ms=T0)
    assert accepted.evicted is not None
    assert accepted.evicted.id == "d"
    assert set(acc.items) == {"a", "b"}


def test_accumulator_tie_on_priority_evicts_lower_salience() -> None:
    # rw = sw: recency 1 + salience 0.4 ties recency 0.5 (one half-life old) + salience 0.9.
    acc = _window(max_items=2, recency_half_life_days=1.0, min_salience_threshold=0.1)
    acc.add(make_item(id="z-top", salience=1.0, created_at=T0), now_ms=T0)
    acc.add(make_item(id="low-sal", salience=0.4, created_at=T0), now_ms=T0)
    low = {r.item.id: r.priority for r in acc.ranked(now_ms=T0)}["low-sal"]
    assert priority(0.9, T0 - DAY_MS, now_ms=T0, cfg=acc.config) == low
    result = acc.add(make_item(id="hi-sal", salience=0.9, created_at=T0 - DAY_MS), now_ms=T0)
    assert result.evicted is not None
    assert result.evicted.id == "low-sal"


def test_accumulator_evicted_id_returning_is_a_new_item() -> None:
    acc = _window(max_items=2, recency_half_life_days=1.0, min_salience_threshold=0.1)
    acc.add(make_item(id="x", salience=0.5, created_at=T0 - 30 * DAY_MS, content="v1"), now_ms=T0)
    acc.add(make_item(id="y", salience=0.9, created_at=T0 - 30 * DAY_MS), now_ms=T0)
    entered_before = acc.items["x"].entered
    assert acc.add(make_item(id="z", salience=0.9, created_at=T0 - 30 * DAY_MS), now_ms=T0).evicted
    assert "x" not in acc.items
    # Back with a lower salience but fresh: it re-enters as a new item, salience not maxed.
    result = acc.add(make_item(id="x", salience=0.4, created_at=T0, content="v2"), now_ms=T0)
    assert result.status == "accepted"
    assert result.evicted is not None
    item = acc.items["x"]
    assert (item.salience, item.content) == (0.4, "v2")
    assert item.entered != entered_before
    assert _counts(acc) == (4, 0, 2)


def test_accumulator_counters_over_a_mixed_sequence() -> None:
    acc = _window(max_items=2, min_salience_threshold=0.2)
    acc.add(make_item(id="a", salience=0.5, created_at=T0), now_ms=T0)  # accepted
    acc.add(make_item(id="b", salience=0.1, created_at=T0), now_ms=T0)  # rejected: threshold
    acc.add(make_item(id="c", salience=0.6, created_at=T0), now_ms=T0)  # accepted
    acc.add(make_item(id="d", salience=0.9, created_at=T0), now_ms=T0)  # accepted, evicts a
    acc.add(make_item(id="e", salience=0.3, created_at=T0), now_ms=T0)  # rejected: ranks lowest
    acc.add(make_item(id="c", salience=0.2, created_at=T0), now_ms=T0)  # merged: accepted
    assert _counts(acc) == (4, 2, 1)
    assert set(acc.items) == {"c", "d"}


def test_accumulator_each_outcome_names_its_item_status_and_reason() -> None:
    acc = _window(max_items=1, min_salience_threshold=0.3)
    results = [
        acc.add(make_item(id="a", salience=0.5, created_at=T0), now_ms=T0),
        acc.add(make_item(id="a", salience=0.6, created_at=T0), now_ms=T0),
        acc.add(make_item(id="b", salience=0.1), now_ms=T0),
        acc.add(make_item(id="c", salience=0.4, created_at=T0 - 100 * DAY_MS), now_ms=T0),
    ]
    assert [(r.item_id, r.status, r.is_accepted, r.reason) for r in results] == [
        ("a", "accepted", True, None),
        ("a", "merged", True, None),
        ("b", "rejected", False, "salience 0.1 is below min_salience_threshold 0.3"),
        ("c", "rejected", False, "window is full (1 items) and this item ranks lowest"),
    ]


def test_accumulator_ranked_is_best_first_at_given_time() -> None:
    acc = _window(max_items=5, recency_half_life_days=1.0, min_salience_threshold=0.1)
    acc.add(make_item(id="old", salience=1.0, created_at=T0 - 10 * DAY_MS), now_ms=T0)
    acc.add(make_item(id="fresh", salience=0.3, created_at=T0), now_ms=T0)
    assert [r.item.id for r in acc.ranked(now_ms=T0)] == ["fresh", "old"]
    assert [r.item.id for r in acc.ranked(now_ms=T0 + 2 * DAY_MS)] == ["old", "fresh"]


def test_accumulator_ranked_breaks_a_full_tie_by_id_not_by_arrival() -> None:
    acc = _window(max_items=5)
    for item_id in ("c", "a", "b"):
        acc.add(make_item(id=item_id, salience=0.5, created_at=T0), now_ms=T0)
    assert [r.item.id for r in acc.ranked(now_ms=T0)] == ["a", "b", "c"]


# Property: the window is the brute-force top-N ---------------------------------------------------


@dataclass
class _Held:
    id: str
    kind: str
    salience: float
    created_at: int
    content: str
    attributes: dict[str, str]
    tags: list[str]
    entered: int
    revision: int

    def fields(self) -> tuple[object, ...]:
        return (
            self.kind,
            self.salience,
            self.created_at,
            self.content,
            self.attributes,
            self.tags,
            self.entered,
            self.revision,
        )


class _BruteWindow:
    """The issue's rules re-implemented with plain lists and a full sort per insertion."""

    def __init__(self, cfg: BundleConfig) -> None:
        self.cfg = cfg
        self.held: list[_Held] = []
        self.accepted = self.rejected = self.evicted = self.entered = 0

    def _priority(self, h: _Held, now: int) -> float:
        age_days = (now - h.created_at) / DAY_MS
        fresh = (
            1.0 if now - h.created_at <= 0 else 0.5 ** (age_days / self.cfg.recency_half_life_days)
        )
        rw, sw = self.cfg.recency_weight, self.cfg.salience_weight
        return (rw * fresh + sw * h.salience) / (rw + sw)

    def order(self, now: int) -> list[_Held]:
        return sorted(
            self.held, key=lambda h: (-self._priority(h, now), -h.salience, -h.created_at, h.id)
        )

    def offer(self, item: RetrievedItem, now: int, revision: int) -> None:
        if item.salience < self.cfg.min_salience_threshold:
            self.rejected += 1
            return
        created = now if item.created_at is None else item.created_at
        same = [h for h in self.held if h.id == item.id]
        if same:
            held = same[0]
            held.salience = max(held.salience, item.salience)
            held.created_at = created
            held.kind, held.content = item.kind, item.content
            held.attributes, held.tags = item.attributes, item.tags
            held.revision = revision
            self.accepted += 1
            return
        newcomer = _Held(
            item.id,
            item.kind,
            item.salience,
            created,
            item.content,
            item.attributes,
            item.tags,
            self.entered,
            revision,
        )
        self.held.append(newcomer)
        if len(self.held) > self.cfg.max_items:
            last = self.order(now)[-1]
            self.held.remove(last)
            if last is newcomer:
                self.rejected += 1
                return
            self.evicted += 1
        self.accepted += 1
        self.entered += 1


@settings(max_examples=300, deadline=None)
@given(
    max_items=st.integers(1, 5),
    threshold=st.sampled_from([0.0, 0.2, 0.5]),
    half_life=st.sampled_from([0.5, 3.0, 30.0]),
    weights=st.sampled_from([(0.4, 0.4), (0.3, 0.5), (0.6, 0.5), (0.5, 0.3)]),
    events=st.lists(
        st.tuples(st.integers(0, 60 * DAY_MS), st.lists(offered_items(), min_size=1, max_size=4)),
        max_size=12,
    ),
)
def test_accumulator_window_equals_brute_force_top_n(
    max_items: int,
    threshold: float,
    half_life: float,
    weights: tuple[float, float],
    events: list[tuple[int, list[RetrievedItem]]],
) -> None:
    cfg = BundleConfig(
        max_items=max_items,
        min_salience_threshold=threshold,
        recency_half_life_days=half_life,
        recency_weight=weights[0],
        salience_weight=weights[1],
    )
    acc = BundleAccumulator(cfg)
    brute = _BruteWindow(cfg)
    now = T0
    for revision, (offset, items) in enumerate(events):
        now = T0 + offset
        for item in items:
            acc.add(item, now_ms=now, revision=revision)
            brute.offer(item, now, revision)
        assert set(acc.items) == {h.id for h in brute.held}
    for h in brute.held:
        got = acc.items[h.id]
        assert (
            got.kind,
            got.salience,
            got.created_at,
            got.content,
            got.attributes,
            got.tags,
            got.entered,
            got.revision,
        ) == h.fields()
    assert _counts(acc) == (brute.accepted, brute.rejected, brute.evicted)
    assert len(acc.items) <= max_items
    assert [r.item.id for r in acc.ranked(now_ms=now + DAY_MS)] == [
        h.id for h in brute.order(now + DAY_MS)
    ]


# Sharing -----------------------------------------------------------------------------------------


def test_windows_share_one_mapping_per_attribute_set_and_one_list_per_tag_list_up_to_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Memos of their own, bounded at two: nothing another test (or a warm process) left in the
    # process-wide ones can stand in for a set or a list this test shares.
    monkeypatch.setattr(accumulator, "_shared_attributes", {})
    monkeypatch.setattr(accumulator, "_shared_tags", {})
    monkeypatch.setattr(accumulator, "_SHARED_ATTRIBUTES_LIMIT", 2)
    first, second = _window(), _window()

    def held(acc: BundleAccumulator, item_id: str, word: str) -> tuple[dict[str, str], list[str]]:
        acc.add(make_item(id=item_id, attributes={"language": word}, tags=[word]), now_ms=T0)
        item = acc.items[item_id]
        return item.attributes, item.tags

    go = held(first, "a", "go")
    assert all(x is y for x, y in zip(held(second, "b", "go"), go, strict=True))
    rust = held(first, "c", "rust")
    held(first, "d", "python")  # a third of each: the oldest, go's, are forgotten
    assert all(x is y for x, y in zip(held(second, "e", "rust"), rust, strict=True))
    again = held(second, "f", "go")
    assert again == go
    assert all(x is not y for x, y in zip(again, go, strict=True))


def test_an_item_keeps_the_revision_it_was_added_or_merged_at_and_zero_without_one() -> None:
    acc = _window()
    acc.add(make_item(id="a"), now_ms=T0)
    acc.add(make_item(id="b"), now_ms=T0, revision=5)
    acc.add(make_item(id="b", content="again"), now_ms=T0, revision=9)
    assert {item.id: item.revision for item in acc.items.values()} == {"a": 0, "b": 9}
