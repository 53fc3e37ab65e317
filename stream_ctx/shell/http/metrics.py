"""Prometheus metrics and health state; `stream_ctx.shell.http.server` serves them over HTTP."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from stream_ctx.core.caches import cache_figures
from stream_ctx.core.memo import Memos

__all__ = ("Health", "Metrics")

# Finalize-to-publish is milliseconds when caught up and seconds under backlog.
_LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# A restore takes milliseconds for a few conversations, up to `state.restore_timeout_s` (300 s).
_RESTORE_BUCKETS_S = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_ITEM_OUTCOMES = ("accepted", "rejected", "evicted")

# The loop beats at least every poll (100 ms); one batch's acks are bounded by aiokafka's
# request timeout (40 s), so two minutes without a beat means the loop is stuck.
_STALE_AFTER_S = 120.0


class Metrics:
    """The processor's metrics, in a registry of their own (several runners may share a process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        self._events = Counter(
            "stream_ctx_events_consumed_total",
            "Input records consumed, per input topic.",
            ["topic"],
            registry=reg,
        )
        self._bundles = Counter(
            "stream_ctx_bundles_published_total",
            "Bundles published and acknowledged by the broker.",
            registry=reg,
        )
        self._dead_letters = Counter(
            "stream_ctx_dead_letters_total",
            "Input records parked on the dead-letter topic, per exception class.",
            ["error"],
            registry=reg,
        )
        self._dead_letters_cut = Counter(
            "stream_ctx_dead_letters_truncated_total",
            "Dead letters the broker refused whole, parked as their head plus headers saying so.",
            registry=reg,
        )
        self._items = Counter(
            "stream_ctx_items_total",
            "Retrieved items offered to windows, by outcome (accepted, rejected, evicted).",
            ["outcome"],
            registry=reg,
        )
        self._tokens_naive = Counter(
            "stream_ctx_tokens_naive_total",
            "Tokens the published bundles' items would take concatenated as retrieved.",
            registry=reg,
        )
        self._tokens_bundle = Counter(
            "stream_ctx_tokens_bundle_total",
            "Tokens of the published bundles' rendered context.",
            registry=reg,
        )
        self._tokens_reused = Counter(
            "stream_ctx_tokens_prefix_reused_total",
            "Leading tokens of published contexts equal to the conversation's previous one.",
            registry=reg,
        )
        self._latency = Histogram(
            "stream_ctx_finalize_to_publish_seconds",
            "From a finalize record's Kafka timestamp to its bundle's publish acknowledgement.",
            buckets=_LATENCY_BUCKETS_S,
            registry=reg,
        )
        self._held = Gauge(
            "stream_ctx_conversations_held",
            "Open conversations held in memory across assigned partitions.",
            registry=reg,
        )
        self._restore = Histogram(
            "stream_ctx_restore_duration_seconds",
            "Time to rebuild newly assigned partitions' windows from their changelogs.",
            buckets=_RESTORE_BUCKETS_S,
            registry=reg,
        )
        self._restored = Counter(
            "stream_ctx_restored_conversations_total",
            "Conversation states read back from changelogs (open and ended ones).",
            registry=reg,
        )
        self._lag = Gauge(
            "stream_ctx_consumer_lag_records",
            "Records between the committed-to position and the high watermark, per partition.",
            ["topic", "partition"],
            registry=reg,
        )
        self._since_progress = Gauge(
            "stream_ctx_seconds_since_progress",
            "Seconds since the member last moved a partition with records waiting (near 0 idle).",
            registry=reg,
        )
        for outcome in _ITEM_OUTCOMES:
            self._items.labels(outcome)  # so rates start from an explicit zero
        self._caches = _CacheCollector()
        reg.register(self._caches)

    def watch_memos(self, memos: Memos) -> None:
        """Read the member's memo tables when scraped."""
        self._caches.memos = (memos,)

    def events_consumed(self, topic: str, count: int = 1) -> None:
        """`count` records of `topic` were read (call once per partition per batch)."""
        self._events.labels(topic).inc(count)

    def bundle_published(
        self,
        *,
        tokens_naive: int,
        tokens_bundle: int,
        latency_s: float,
        tokens_prefix_reused: int = 0,
    ) -> None:
        """One bundle was acknowledged; `latency_s` since its finalize (clock skew below 0 is 0)."""
        self._bundles.inc()
        self._tokens_naive.inc(tokens_naive)
        self._tokens_bundle.inc(tokens_bundle)
        self._tokens_reused.inc(tokens_prefix_reused)
        self._latency.observe(max(latency_s, 0.0))

    def dead_lettered(self, error_kind: str) -> None:
        """One record was dead-lettered; `error_kind` is the exception class name."""
        self._dead_letters.labels(error_kind).inc()

    def dead_letter_truncated(self) -> None:
        """A dead letter was too large for the broker and was parked truncated."""
        self._dead_letters_cut.inc()

    def items(self, *, accepted: int = 0, rejected: int = 0, evicted: int = 0) -> None:
        """Add item outcomes."""
        for outcome, count in zip(_ITEM_OUTCOMES, (accepted, rejected, evicted), strict=True):
            if count:
                self._items.labels(outcome).inc(count)

    def conversations_held(self, count: int) -> None:
        """Set the number of open conversations held in memory."""
        self._held.set(count)

    def restored(self, *, seconds: float, conversations: int) -> None:
        """One restore finished."""
        self._restore.observe(seconds)
        self._restored.inc(conversations)

    def lag(self, topic: str, partition: int, lag: int) -> None:
        """Set a partition's consumer lag in records."""
        self._lag.labels(topic, str(partition)).set(max(lag, 0))

    def forget_partitions(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Drop the lag series of revoked partitions, so another member's lag is not shadowed."""
        for topic, partition in partitions:
            self._lag.remove(topic, str(partition))

    def progress_clock(self, seconds: Callable[[], float]) -> None:
        """Read seconds since the last progress from `seconds` when scraped."""
        self._since_progress.set_function(seconds)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)


class _CacheCollector(Collector):
    """The core's caches, read when scraped: lookups by result, and entries."""

    def __init__(self) -> None:
        self.memos: tuple[Memos, ...] = ()

    def collect(self) -> Iterable[Metric]:
        lookups = CounterMetricFamily(
            "stream_ctx_cache_lookups",
            "Lookups in the core's caches, by cache and result (hit or miss).",
            labels=["cache", "result"],
        )
        entries = GaugeMetricFamily(
            "stream_ctx_cache_entries",
            "Entries held in each of the core's caches.",
            labels=["cache"],
        )
        limits = GaugeMetricFamily(
            "stream_ctx_cache_limit_entries",
            "The bound on each cache's entries (the oldest or least recent go beyond it).",
            labels=["cache"],
        )
        for figures in cache_figures(self.memos):
            lookups.add_metric([figures.name, "hit"], figures.hits)
            lookups.add_metric([figures.name, "miss"], figures.misses)
            entries.add_metric([figures.name], figures.entries)
            limits.add_metric([figures.name], figures.limit)
        yield from (lookups, entries, limits)


class Health:
    """Liveness (the processing loop beats) and readiness (restored, joined, not rebalancing)."""

    def __init__(
        self,
        *,
        stale_after_s: float = _STALE_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stale_after_s = stale_after_s
        self._clock = clock
        self._last_beat = clock()  # starting counts as alive, for as long as a stalled loop would
        self._is_ready = False
        self._stalled: str | None = None

    def beat(self) -> None:
        """The processing loop is alive; call once per loop iteration."""
        self._last_beat = self._clock()

    def set_ready(self, is_ready: bool) -> None:
        """Ready once partitions are assigned and restored; not ready while rebalancing."""
        self._is_ready = is_ready

    def set_stalled(self, reason: str | None) -> None:
        """Not alive while a reason is set: the loop turns, but no partition with records moves."""
        self._stalled = reason

    @property
    def stalled_reason(self) -> str | None:
        """Why the member is not alive, or None when it is."""
        if self._stalled is not None:
            return self._stalled
        if self._clock() - self._last_beat > self._stale_after_s:
            return f"the processing loop has not turned for {self._stale_after_s:.0f} s"
        return None

    @property
    def is_alive(self) -> bool:
        return self.stalled_reason is None

    @property
    def is_ready(self) -> bool:
        return self._is_ready and self.is_alive
