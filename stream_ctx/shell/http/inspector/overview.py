"""The overview's figures: read from the processor's own Prometheus registry, sampled over time."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

__all__ = ("Series", "Totals", "read_totals")

# One point a second for five minutes: what the overview's small plots show.
_SERIES_POINTS = 300


@dataclass(frozen=True, slots=True)
class Totals:
    """Counters and gauges at one moment."""

    events: float = 0.0
    bundles: float = 0.0
    tokens_naive: float = 0.0
    tokens_bundle: float = 0.0
    tokens_reused: float = 0.0
    held: float = 0.0
    dead_letters: dict[str, float] = field(default_factory=dict)
    lag: dict[str, float] = field(default_factory=dict)
    items: dict[str, float] = field(default_factory=dict)


def read_totals(registry: CollectorRegistry) -> Totals:
    """Sum the stream_ctx series of `registry` (events over topics; lag per partition)."""
    sums: dict[str, float] = {}
    dead: dict[str, float] = {}
    lag: dict[str, float] = {}
    items: dict[str, float] = {}
    for family in registry.collect():
        for sample in family.samples:
            name, labels = sample.name, sample.labels
            if name == "stream_ctx_dead_letters_total":
                dead[labels["error"]] = sample.value
            elif name == "stream_ctx_consumer_lag_records":
                lag[f"{labels['topic']}/{labels['partition']}"] = sample.value
            elif name == "stream_ctx_items_total":
                items[labels["outcome"]] = sample.value
            else:
                sums[name] = sums.get(name, 0.0) + sample.value
    return Totals(
        events=sums.get("stream_ctx_events_consumed_total", 0.0),
        bundles=sums.get("stream_ctx_bundles_published_total", 0.0),
        tokens_naive=sums.get("stream_ctx_tokens_naive_total", 0.0),
        tokens_bundle=sums.get("stream_ctx_tokens_bundle_total", 0.0),
        tokens_reused=sums.get("stream_ctx_tokens_prefix_reused_total", 0.0),
        held=sums.get("stream_ctx_conversations_held", 0.0),
        dead_letters=dead,
        lag=dict(sorted(lag.items())),
        items=items,
    )


@dataclass(slots=True)
class Series:
    """Per-second rates derived from successive totals, the last `_SERIES_POINTS` of them."""

    events_per_s: deque[float] = field(default_factory=lambda: deque(maxlen=_SERIES_POINTS))
    bundles_per_s: deque[float] = field(default_factory=lambda: deque(maxlen=_SERIES_POINTS))
    saved_per_s: deque[float] = field(default_factory=lambda: deque(maxlen=_SERIES_POINTS))
    _last: tuple[float, Totals] | None = None

    def sample(self, totals: Totals, *, now_s: float) -> None:
        """Add the rates since the previous sample (monotonic seconds)."""
        if self._last is not None:
            then, before = self._last
            span = max(now_s - then, 1e-9)
            saved = totals.tokens_naive - totals.tokens_bundle
            saved_before = before.tokens_naive - before.tokens_bundle
            self.events_per_s.append((totals.events - before.events) / span)
            self.bundles_per_s.append((totals.bundles - before.bundles) / span)
            self.saved_per_s.append((saved - saved_before) / span)
        self._last = (now_s, totals)

    def latest(self, values: deque[float]) -> float:
        return values[-1] if values else 0.0
