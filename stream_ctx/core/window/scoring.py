"""Scoring: exponential recency decay blended with salience, and the total order on items.

Times are event-time epoch milliseconds passed in by the caller; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ("MS_PER_DAY", "Weights", "lowest_ranked", "priority", "rank_key", "recency")

MS_PER_DAY = 86_400_000


class Weights(Protocol):
    """The config fields scoring needs (BundleConfig satisfies it)."""

    @property
    def recency_weight(self) -> float: ...
    @property
    def salience_weight(self) -> float: ...
    @property
    def recency_half_life_days(self) -> float: ...


def recency(created_at_ms: int, *, now_ms: int, half_life_days: float) -> float:
    """0.5 ** (age in fractional days / half-life); 1.0 for an item created at or after `now_ms`."""
    age_ms = now_ms - created_at_ms
    if age_ms <= 0:
        return 1.0
    return float(0.5 ** ((age_ms / MS_PER_DAY) / half_life_days))


def priority(salience: float, created_at_ms: int, *, now_ms: int, cfg: Weights) -> float:
    """(rw * recency + sw * salience) / (rw + sw): a score in [0, 1] whatever the weights' sum."""
    rw, sw = cfg.recency_weight, cfg.salience_weight
    fresh = recency(created_at_ms, now_ms=now_ms, half_life_days=cfg.recency_half_life_days)
    return (rw * fresh + sw * salience) / (rw + sw)


def lowest_ranked(entries: Sequence[tuple[str, float, int]], *, now_ms: int, cfg: Weights) -> int:
    """Index of the last entry (id, salience, created_at) in the item order at `now_ms`.

    The hot path of eviction: the same arithmetic as `priority`, inlined, with rank keys built
    only for the entries tied on the lowest priority.
    """
    rw, sw, half_life = cfg.recency_weight, cfg.salience_weight, cfg.recency_half_life_days
    scores = [
        (
            rw
            * (1.0 if now_ms <= created else 0.5 ** (((now_ms - created) / MS_PER_DAY) / half_life))
            + sw * salience
        )
        / (rw + sw)
        for _, salience, created in entries
    ]
    lowest = min(scores)
    tied = [n for n, score in enumerate(scores) if score == lowest]
    return max(tied, key=lambda n: rank_key(lowest, entries[n][1], entries[n][2], entries[n][0]))


def rank_key(
    item_priority: float, salience: float, created_at_ms: int, item_id: str
) -> tuple[float, float, int, str]:
    """Sort key for the item order: priority desc, salience desc, created_at desc, id asc."""
    return (-item_priority, -salience, -created_at_ms, item_id)
