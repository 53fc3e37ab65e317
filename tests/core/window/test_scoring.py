"""Scoring rules: fractional-day recency, normalised priority, the total item order."""

from __future__ import annotations

import functools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.window.scoring import priority, rank_key, recency
from tests.factories import DAY_MS, HOUR_MS, T0


def test_recency_uses_fractional_days() -> None:
    # The seed truncates to whole days and would score 12 hours old as 1.0.
    assert recency(T0 - 12 * HOUR_MS, now_ms=T0, half_life_days=1.0) == pytest.approx(
        0.5**0.5, rel=1e-12
    )
    assert recency(T0 - 36 * HOUR_MS, now_ms=T0, half_life_days=3.0) == pytest.approx(
        0.5**0.5, rel=1e-12
    )
    assert recency(T0 - 1, now_ms=T0, half_life_days=30.0) < 1.0


def test_recency_halves_every_half_life() -> None:
    assert recency(T0 - 30 * DAY_MS, now_ms=T0, half_life_days=30.0) == pytest.approx(0.5)
    assert recency(T0 - 60 * DAY_MS, now_ms=T0, half_life_days=30.0) == pytest.approx(0.25)
    assert recency(T0 - 7 * DAY_MS, now_ms=T0, half_life_days=3.5) == pytest.approx(0.25)


@pytest.mark.parametrize("ahead_ms", [0, 1, HOUR_MS, 400 * DAY_MS])
def test_recency_of_future_created_at_is_one(ahead_ms: int) -> None:
    assert recency(T0 + ahead_ms, now_ms=T0, half_life_days=30.0) == 1.0


@pytest.mark.parametrize(
    ("age_ms", "half_life_days", "expected"),
    [
        (12 * HOUR_MS, 1.0, 0.7071067811865476),  # 2 ** -0.5
        (36 * HOUR_MS, 1.0, 0.3535533905932738),  # 2 ** -1.5
        (90 * DAY_MS, 30.0, 0.125),  # three half-lives
        (DAY_MS, 30.0, 0.9771599684342459),  # 2 ** (-1 / 30)
        (1, 1.0, 0.9999999919774633),  # one millisecond: 2 ** (-1 / 86_400_000)
        (0, 1.0, 1.0),
    ],
)
def test_recency_hand_computed_values(age_ms: int, half_life_days: float, expected: float) -> None:
    got = recency(T0 - age_ms, now_ms=T0, half_life_days=half_life_days)
    assert got == pytest.approx(expected, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    # At most 400 half-lives, so a millisecond older is still a smaller float.
    age_ms=st.integers(0, 400 * DAY_MS),
    more_ms=st.integers(1, 100 * DAY_MS),
    half_life=st.floats(1.0, 1_000.0),
)
def test_recency_decays_strictly_and_halves_every_half_life(
    age_ms: int, more_ms: int, half_life: float
) -> None:
    now = T0 + 5_000 * DAY_MS
    got = recency(now - age_ms, now_ms=now, half_life_days=half_life)
    assert 0.0 < got <= 1.0
    assert recency(now - age_ms - more_ms, now_ms=now, half_life_days=half_life) < got
    one_half_life_older = now - age_ms - round(half_life * DAY_MS)
    halved = recency(one_half_life_older, now_ms=now, half_life_days=half_life)
    assert halved == pytest.approx(got / 2, rel=1e-6)


@pytest.mark.parametrize(
    ("weights", "age_ms", "salience", "expected"),
    [
        # (0.5 * 0.5 + 0.6 * 0.9) / 1.1: one half-life old, weights summing to 1.1.
        ((0.5, 0.6), DAY_MS, 0.9, 0.7181818181818181),
        # (0.3 * 2 ** -0.5 + 0.5 * 0.2) / 0.8
        ((0.3, 0.5), 12 * HOUR_MS, 0.2, 0.3901650429449553),
        ((0.4, 0.4), 0, 0.0, 0.5),
        ((0.4, 0.4), 2 * DAY_MS, 0.5, 0.375),
        ((0.0, 0.9), 5 * DAY_MS, 0.3, 0.3),
        ((0.9, 0.0), DAY_MS, 0.8, 0.5),
    ],
)
def test_priority_hand_computed_values(
    weights: tuple[float, float], age_ms: int, salience: float, expected: float
) -> None:
    cfg = BundleConfig(
        recency_weight=weights[0], salience_weight=weights[1], recency_half_life_days=1.0
    )
    assert priority(salience, T0 - age_ms, now_ms=T0, cfg=cfg) == pytest.approx(expected, rel=1e-12)


_weights = st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)).filter(
    lambda w: abs(w[0] + w[1] - 1.0) <= 0.2
)


@settings(max_examples=200, deadline=None)
@given(
    weights=_weights,
    salience=st.floats(0.0, 1.0),
    more_salience=st.floats(0.0, 1.0),
    age_ms=st.integers(-10 * DAY_MS, 500 * DAY_MS),
    more_ms=st.integers(0, 100 * DAY_MS),
    half_life=st.floats(0.1, 100.0),
)
def test_priority_is_a_weighted_mean_rising_with_salience_and_falling_with_age(
    weights: tuple[float, float],
    salience: float,
    more_salience: float,
    age_ms: int,
    more_ms: int,
    half_life: float,
) -> None:
    rw, sw = weights
    cfg = BundleConfig(recency_weight=rw, salience_weight=sw, recency_half_life_days=half_life)
    fresh = recency(T0 - age_ms, now_ms=T0, half_life_days=half_life)
    got = priority(salience, T0 - age_ms, now_ms=T0, cfg=cfg)
    eps = 1e-12
    assert min(fresh, salience) - eps <= got <= max(fresh, salience) + eps
    higher = min(1.0, salience + more_salience)
    assert priority(higher, T0 - age_ms, now_ms=T0, cfg=cfg) >= got - eps
    assert priority(salience, T0 - age_ms - more_ms, now_ms=T0, cfg=cfg) <= got + eps
    # Only the weights' ratio matters: the same ratio at another sum gives the same score.
    scale = 0.9 / (rw + sw)
    rescaled = BundleConfig(
        recency_weight=rw * scale, salience_weight=sw * scale, recency_half_life_days=half_life
    )
    assert priority(salience, T0 - age_ms, now_ms=T0, cfg=rescaled) == pytest.approx(
        got, rel=1e-9, abs=1e-12
    )


def test_priority_of_fresh_fully_salient_item_is_one_whatever_the_weights() -> None:
    for rw, sw in [(0.4, 0.4), (0.3, 0.5), (0.6, 0.6), (0.5, 0.3)]:
        cfg = BundleConfig(recency_weight=rw, salience_weight=sw)
        assert priority(1.0, T0, now_ms=T0, cfg=cfg) == pytest.approx(1.0)


def _ordered(rows: list[tuple[float, float, int, str]]) -> list[str]:
    return [r[3] for r in sorted(rows, key=lambda r: rank_key(*r))]


def test_order_is_priority_desc_first() -> None:
    rows = [(0.2, 0.9, T0, "a"), (0.8, 0.1, T0 - 5, "z"), (0.5, 0.5, T0, "m")]
    assert _ordered(rows) == ["z", "m", "a"]


def test_order_breaks_priority_ties_by_salience_desc() -> None:
    rows = [(0.5, 0.3, T0, "a"), (0.5, 0.7, T0 - 5, "b")]
    assert _ordered(rows) == ["b", "a"]


def test_order_breaks_salience_ties_by_created_at_desc() -> None:
    rows = [(0.5, 0.5, T0 - 5, "a"), (0.5, 0.5, T0, "b")]
    assert _ordered(rows) == ["b", "a"]


def test_order_breaks_created_at_ties_by_id_asc() -> None:
    rows = [(0.5, 0.5, T0, "b"), (0.5, 0.5, T0, "B"), (0.5, 0.5, T0, "a")]
    assert _ordered(rows) == ["B", "a", "b"]


def _issue_cmp(x: tuple[float, float, int, str], y: tuple[float, float, int, str]) -> int:
    """The issue's order spelled out field by field: -1 when x comes first."""
    for mine, theirs, is_descending in ((x[0], y[0], True), (x[1], y[1], True), (x[2], y[2], True)):
        if mine != theirs:
            return -1 if (mine > theirs) == is_descending else 1
    return -1 if x[3] < y[3] else (1 if x[3] > y[3] else 0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(0.0, 1.0),
            st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0.0, 1.0),
            st.integers(T0 - 3, T0 + 3),
            st.text("abAB", min_size=1, max_size=3),
        ),
        max_size=12,
        unique_by=lambda r: r[3],
    )
)
def test_rank_key_sorts_like_the_issue_order(rows: list[tuple[float, float, int, str]]) -> None:
    assert not any(math.isnan(r[0]) for r in rows)
    expected = sorted(rows, key=functools.cmp_to_key(_issue_cmp))
    assert sorted(rows, key=lambda r: rank_key(*r)) == expected
