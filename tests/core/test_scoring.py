"""Scoring rules of issue 2: fractional-day recency, normalised priority, the total item order."""

from __future__ import annotations

import functools
import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stream_ctx.core.config import BundleConfig
from stream_ctx.core.scoring import priority, rank_key, recency
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


@settings(max_examples=200, deadline=None)
@given(
    age_ms=st.integers(0, 3_000 * DAY_MS),
    more_ms=st.integers(0, 100 * DAY_MS),
    half_life=st.floats(0.01, 1_000.0),
)
def test_recency_matches_formula_and_decays(age_ms: int, more_ms: int, half_life: float) -> None:
    now = T0 + 5_000 * DAY_MS
    got = recency(now - age_ms, now_ms=now, half_life_days=half_life)
    expected = 0.5 ** ((age_ms / DAY_MS) / half_life) if age_ms > 0 else 1.0
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-300)
    assert 0.0 <= got <= 1.0
    older = recency(now - age_ms - more_ms, now_ms=now, half_life_days=half_life)
    assert older <= got


def test_priority_is_normalised_by_weight_sum() -> None:
    cfg = BundleConfig(recency_weight=0.5, salience_weight=0.6, recency_half_life_days=1.0)
    got = priority(0.9, T0 - DAY_MS, now_ms=T0, cfg=cfg)
    assert got == pytest.approx((0.5 * 0.5 + 0.6 * 0.9) / 1.1, rel=1e-12)


def test_priority_of_fresh_fully_salient_item_is_one_whatever_the_weights() -> None:
    for rw, sw in [(0.4, 0.4), (0.3, 0.5), (0.6, 0.6), (0.5, 0.3)]:
        cfg = BundleConfig(recency_weight=rw, salience_weight=sw)
        assert priority(1.0, T0, now_ms=T0, cfg=cfg) == pytest.approx(1.0)


@settings(max_examples=200, deadline=None)
@given(
    rw=st.floats(0.0, 1.0),
    sw=st.floats(0.0, 1.0),
    salience=st.floats(0.0, 1.0),
    age_ms=st.integers(-10 * DAY_MS, 500 * DAY_MS),
    half_life=st.floats(0.1, 100.0),
)
def test_priority_matches_issue_formula(
    rw: float, sw: float, salience: float, age_ms: int, half_life: float
) -> None:
    assume(abs(rw + sw - 1.0) <= 0.2)
    cfg = BundleConfig(recency_weight=rw, salience_weight=sw, recency_half_life_days=half_life)
    fresh = 1.0 if age_ms <= 0 else 0.5 ** ((age_ms / DAY_MS) / half_life)
    got = priority(salience, T0 - age_ms, now_ms=T0, cfg=cfg)
    assert got == pytest.approx((rw * fresh + sw * salience) / (rw + sw), rel=1e-12, abs=1e-15)
    assert -1e-12 <= got <= 1.0 + 1e-12


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
