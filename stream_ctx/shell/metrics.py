"""Prometheus metrics and health probes, served over HTTP by `run_metrics_server`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import anyio
import anyio.abc
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

log = logging.getLogger("stream_ctx.metrics")

# Finalize-to-publish is milliseconds when caught up and seconds under backlog.
_LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# A restore takes milliseconds for a few conversations, up to `state.restore_timeout_s` (300 s).
_RESTORE_BUCKETS_S = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_ITEM_OUTCOMES = ("accepted", "rejected", "evicted")

# A probe or scrape request is one short line and a few headers; 8 KiB is what most servers allow.
_MAX_REQUEST_BYTES = 8192
# A client that has not sent its request head in this long is dropped, freeing its slot.
_REQUEST_TIMEOUT_S = 5.0
# Scrapers and probes open a few connections at a time; more wait rather than pile up tasks.
_MAX_CONNECTIONS = 16
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
        for outcome in _ITEM_OUTCOMES:
            self._items.labels(outcome)  # so rates start from an explicit zero

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

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)


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

    def beat(self) -> None:
        """The processing loop is alive; call once per loop iteration."""
        self._last_beat = self._clock()

    def set_ready(self, is_ready: bool) -> None:
        """Ready once partitions are assigned and restored; not ready while rebalancing."""
        self._is_ready = is_ready

    @property
    def is_alive(self) -> bool:
        return self._clock() - self._last_beat <= self._stale_after_s

    @property
    def is_ready(self) -> bool:
        return self._is_ready and self.is_alive


async def run_metrics_server(
    metrics: Metrics,
    health: Health,
    *,
    host: str,
    port: int,
    request_timeout_s: float = _REQUEST_TIMEOUT_S,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve GET /metrics, /healthz and /readyz until cancelled; `port=0` picks a free port."""
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    limiter = anyio.CapacityLimiter(_MAX_CONNECTIONS)

    async def handle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            with anyio.move_on_after(request_timeout_s):
                async with limiter:
                    try:
                        head = await _read_head(stream)
                        await stream.send(_respond(head, metrics, health))
                    except (anyio.EndOfStream, anyio.BrokenResourceError, OSError) as exc:
                        log.debug("metrics client went away: %r", exc)

    async with listener:
        bound = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio, not Django
        log.info("metrics and health on http://%s:%d/metrics", host, bound)
        task_status.started(bound)
        await listener.serve(handle)


async def _read_head(stream: anyio.abc.SocketStream) -> bytes | None:
    """The request line and headers, or None past `_MAX_REQUEST_BYTES`."""
    received = b""
    while len(received) <= _MAX_REQUEST_BYTES:  # each receive adds at least one byte
        for end in (b"\r\n\r\n", b"\n\n"):
            if end in received:
                return received[: received.index(end)]
        received += await stream.receive(_MAX_REQUEST_BYTES)
    return None


def _respond(head: bytes | None, metrics: Metrics, health: Health) -> bytes:
    if head is None:
        return _response(431, b"request head too large\n")
    parts = head.split(b"\n", 1)[0].rstrip(b"\r").split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
        return _response(400, b"bad request\n")
    method, target = parts[0], parts[1].split(b"?", 1)[0]
    is_head = method == b"HEAD"
    if method != b"GET" and not is_head:
        return _response(405, b"method not allowed\n", extra=b"Allow: GET, HEAD\r\n")
    if target == b"/metrics":
        return _response(200, metrics.render(), content_type=CONTENT_TYPE_LATEST, is_head=is_head)
    if target == b"/healthz":
        is_ok = health.is_alive
        body = b"ok\n" if is_ok else b"stalled\n"
    elif target == b"/readyz":
        is_ok = health.is_ready
        body = b"ready\n" if is_ok else b"not ready\n"
    else:
        return _response(404, b"not found: try /metrics, /healthz or /readyz\n", is_head=is_head)
    return _response(200 if is_ok else 503, body, is_head=is_head)


_TEXT = "text/plain; charset=utf-8"
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


def _response(
    status: int,
    body: bytes,
    *,
    content_type: str = _TEXT,
    extra: bytes = b"",
    is_head: bool = False,
) -> bytes:
    """A complete response; HEAD gets the headers GET would, without the body."""
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n"
    ).encode()
    return head + extra + b"\r\n" + (b"" if is_head else body)
