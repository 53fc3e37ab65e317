"""The metrics and health endpoints, scraped over real HTTP (Hypercorn) on a free local port."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.events import Event
from stream_ctx.shell.http.metrics import Health, Metrics
from stream_ctx.shell.http.server import http_app, run_http_server
from tests.factories import make_end, make_finalize, make_item, make_retrieval

# Generous: every step is local and takes milliseconds.
_TEST_TIMEOUT_S = 10.0
# A response is a few KiB; this many reads of at least one byte each is plenty.
_MAX_READS = 10_000

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@asynccontextmanager
async def serving(
    metrics: Metrics, health: Health, *, idle_timeout_s: float = 5.0
) -> AsyncIterator[int]:
    """Run the server on 127.0.0.1 and a free port; yield the port."""
    async with anyio.create_task_group() as tasks:
        port: int = await tasks.start(
            partial(
                run_http_server,
                http_app(metrics, health),
                host="127.0.0.1",
                port=0,
                idle_timeout_s=idle_timeout_s,
            )
        )
        try:
            yield port
        finally:
            tasks.cancel_scope.cancel()


async def exchange(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes (asking the server to close), read to the close, split status, headers
    and body."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(request)
        received = b""
        for _ in range(_MAX_READS):
            try:
                received += await stream.receive()
            except anyio.EndOfStream:
                break
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split(" ")[1]), headers, body


async def get(port: int, path: str) -> tuple[int, bytes]:
    status, _, body = await exchange(
        port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    )
    return status, body


async def scrape(port: int) -> Samples:
    status, headers, body = await exchange(
        port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert status == 200
    assert headers["content-type"].startswith("text/plain")
    assert int(headers["content-length"]) == len(body)
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_scrape_shows_every_metric_moving_after_the_runner_calls() -> None:
    metrics, health = Metrics(), Health()
    with anyio.fail_after(_TEST_TIMEOUT_S):
        async with serving(metrics, health) as port:
            before = await scrape(port)
            metrics.events_consumed("ctx.retrievals", 3)
            metrics.events_consumed("ctx.retrievals")
            metrics.bundle_published(
                tokens_naive=900, tokens_bundle=300, tokens_prefix_reused=120, latency_s=0.004
            )
            metrics.bundle_published(tokens_naive=100, tokens_bundle=100, latency_s=-0.5)
            metrics.dead_lettered("InvalidEventError")
            metrics.items(accepted=5, rejected=2, evicted=1)
            metrics.conversations_held(7)
            metrics.restored(seconds=0.2, conversations=4)
            metrics.lag("ctx.retrievals", 2, 42)
            after = await scrape(port)

    assert value(before, "stream_ctx_events_consumed_total", topic="ctx.retrievals") == 0
    assert value(before, "stream_ctx_items_total", outcome="rejected") == 0
    assert ("stream_ctx_items_total", frozenset({("outcome", "rejected")})) in before
    assert value(after, "stream_ctx_events_consumed_total", topic="ctx.retrievals") == 4
    assert value(after, "stream_ctx_bundles_published_total") == 2
    assert value(after, "stream_ctx_tokens_naive_total") == 1000
    assert value(after, "stream_ctx_tokens_bundle_total") == 400
    assert value(after, "stream_ctx_tokens_prefix_reused_total") == 120
    assert value(after, "stream_ctx_finalize_to_publish_seconds_count") == 2
    # 4 ms lands at or under 5 ms; the negative (skewed clock) one counts as 0
    assert value(after, "stream_ctx_finalize_to_publish_seconds_bucket", le="0.001") == 1
    assert value(after, "stream_ctx_finalize_to_publish_seconds_bucket", le="0.005") == 2
    assert value(after, "stream_ctx_dead_letters_total", error="InvalidEventError") == 1
    assert value(after, "stream_ctx_items_total", outcome="accepted") == 5
    assert value(after, "stream_ctx_items_total", outcome="rejected") == 2
    assert value(after, "stream_ctx_items_total", outcome="evicted") == 1
    assert value(after, "stream_ctx_conversations_held") == 7
    assert value(after, "stream_ctx_restore_duration_seconds_count") == 1
    assert value(after, "stream_ctx_restore_duration_seconds_sum") == pytest.approx(0.2)
    assert value(after, "stream_ctx_restored_conversations_total") == 4
    assert (
        value(after, "stream_ctx_consumer_lag_records", topic="ctx.retrievals", partition="2") == 42
    )


def test_every_metric_is_prefixed_and_documented() -> None:
    families = {
        family.name: family
        for family in text_string_to_metric_families(Metrics().render().decode())
        if not family.name.endswith("_created")  # prometheus_client's creation timestamps
    }
    assert {name: family.type for name, family in families.items()} == {
        "stream_ctx_events_consumed": "counter",
        "stream_ctx_bundles_published": "counter",
        "stream_ctx_dead_letters": "counter",
        "stream_ctx_dead_letters_truncated": "counter",
        "stream_ctx_items": "counter",
        "stream_ctx_tokens_naive": "counter",
        "stream_ctx_tokens_bundle": "counter",
        "stream_ctx_tokens_prefix_reused": "counter",
        "stream_ctx_finalize_to_publish_seconds": "histogram",
        "stream_ctx_conversations_held": "gauge",
        "stream_ctx_restore_duration_seconds": "histogram",
        "stream_ctx_restored_conversations": "counter",
        "stream_ctx_consumer_lag_records": "gauge",
        "stream_ctx_seconds_since_progress": "gauge",
        "stream_ctx_cache_lookups": "counter",
        "stream_ctx_cache_entries": "gauge",
        "stream_ctx_cache_limit_entries": "gauge",
    }
    assert all(family.documentation for family in families.values())


def test_metrics_instances_keep_separate_registries() -> None:
    first, second = Metrics(), Metrics()
    first.events_consumed("t", 5)
    assert b'stream_ctx_events_consumed_total{topic="t"} 5.0' in first.render()
    assert b'topic="t"' not in second.render()


def test_forget_partitions_drops_revoked_lag_series() -> None:
    metrics = Metrics()
    metrics.lag("in", 0, 3)
    metrics.lag("in", 1, 4)
    metrics.forget_partitions([("in", 0), ("in", 7)])
    text = metrics.render()
    assert b'partition="0"' not in text
    assert b'stream_ctx_consumer_lag_records{partition="1",topic="in"} 4.0' in text


def test_item_outcomes_from_the_processor_reach_the_items_counter() -> None:
    processor = ContextProcessor(BundleConfig(max_items=1))
    metrics = Metrics()
    events: list[Event] = [
        # fresh window: it-1 accepted, it-2 (more salient) evicts it-1, it-3 too weak, it-4 too
        # weak for the threshold
        make_retrieval(
            items=[
                make_item(id="it-1", salience=0.5),
                make_item(id="it-2", salience=0.9),
                make_item(id="it-3", salience=0.3),
                make_item(id="it-4", salience=0.1),
            ]
        ),
        make_retrieval(items=[make_item(id="it-2", salience=0.9)]),  # merged: accepted
        make_end(),
        make_retrieval(items=[make_item(id="it-5")]),  # a new window after the end
    ]
    for position, event in enumerate(events, start=1):
        processor.apply(event, position=position)
    processor.apply(events[-1], position=len(events))  # a replay is skipped: nothing counted
    outcomes = processor.take_item_outcomes()
    metrics.items(accepted=outcomes.accepted, rejected=outcomes.rejected, evicted=outcomes.evicted)
    assert processor.take_item_outcomes() == type(outcomes)()  # taken means reset

    text = metrics.render()
    assert b'stream_ctx_items_total{outcome="accepted"} 4.0' in text
    assert b'stream_ctx_items_total{outcome="rejected"} 2.0' in text
    assert b'stream_ctx_items_total{outcome="evicted"} 1.0' in text


async def test_readyz_flips_from_503_to_200_and_back() -> None:
    health = Health()
    with anyio.fail_after(_TEST_TIMEOUT_S):
        async with serving(Metrics(), health) as port:
            assert await get(port, "/readyz") == (503, b"not ready\n")
            health.set_ready(True)
            assert await get(port, "/readyz") == (200, b"ready\n")
            health.set_ready(False)  # a rebalance started
            assert await get(port, "/readyz") == (503, b"not ready\n")


async def test_healthz_is_ok_while_the_loop_beats_and_503_once_it_stalls() -> None:
    now = [1000.0]
    health = Health(stale_after_s=30.0, clock=lambda: now[0])
    health.set_ready(True)
    with anyio.fail_after(_TEST_TIMEOUT_S):
        async with serving(Metrics(), health) as port:
            assert await get(port, "/healthz") == (200, b"ok\n")
            now[0] += 29.0
            health.beat()
            now[0] += 29.0
            assert await get(port, "/healthz") == (200, b"ok\n")
            now[0] += 2.0
            stalled = b"stalled: the processing loop has not turned for 30 s\n"
            assert await get(port, "/healthz") == (503, stalled)
            assert (await get(port, "/readyz"))[0] == 503  # a stalled loop serves no one


async def test_healthz_is_red_with_the_watchdogs_reason_until_it_is_cleared() -> None:
    health = Health()
    health.set_ready(True)
    with anyio.fail_after(_TEST_TIMEOUT_S):
        async with serving(Metrics(), health) as port:
            health.set_stalled("no progress for 301 s with records waiting: in/0 lag 7")
            reason = b"stalled: no progress for 301 s with records waiting: in/0 lag 7\n"
            assert await get(port, "/healthz") == (503, reason)
            assert (await get(port, "/readyz"))[0] == 503
            health.set_stalled(None)
            assert await get(port, "/healthz") == (200, b"ok\n")


async def test_unknown_paths_are_404_other_methods_405_and_head_has_no_body() -> None:
    with anyio.fail_after(_TEST_TIMEOUT_S):
        async with serving(Metrics(), Health()) as port:
            assert (await get(port, "/"))[0] == 404
            assert (await get(port, "/metrics/extra"))[0] == 404
            assert (await get(port, "/metrics?name[]=x"))[0] == 200
            status, headers, body = await exchange(
                port,
                b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                b"Connection: close\r\n\r\n",
            )
            assert status == 405
            assert set(headers["allow"].split(", ")) == {"GET", "HEAD"}
            status, headers, body = await exchange(
                port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            assert status == 200
            assert int(headers["content-length"]) > 0
            assert body == b""


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        # past the 8 KiB request-head limit: complete (h11 rejects it) or still arriving
        pytest.param(b"GET /" + b"a" * 8200 + b" HTTP/1.1\r\n\r\n", 400, id="oversized"),
        pytest.param(b"X-Filler: " + b"b" * 8200, 431, id="oversized-unterminated"),
        pytest.param(b"\x00\xff\xfe garbage\r\n\r\n", 400, id="garbage"),
        pytest.param(b"GET /metrics\r\n\r\n", 400, id="no-version"),
        pytest.param(b"\n\n", 400, id="empty"),
    ],
)
async def test_bad_requests_get_an_error_and_the_server_keeps_serving(
    request_bytes: bytes, status: int
) -> None:
    with anyio.fail_after(_TEST_TIMEOUT_S):
        async with serving(Metrics(), Health()) as port:
            assert (await exchange(port, request_bytes))[0] == status
            async with await anyio.connect_tcp("127.0.0.1", port):
                pass  # connect and hang up without a byte
            assert await get(port, "/healthz") == (200, b"ok\n")


async def test_idle_client_is_dropped_while_others_are_served() -> None:
    with anyio.fail_after(_TEST_TIMEOUT_S):
        async with serving(Metrics(), Health(), idle_timeout_s=0.2) as port:
            async with await anyio.connect_tcp("127.0.0.1", port) as idle:
                assert await get(port, "/healthz") == (200, b"ok\n")
                with pytest.raises(anyio.EndOfStream):
                    await idle.receive()  # the server hangs up after idle_timeout_s


async def test_a_standard_http_client_reads_metrics_and_probe_statuses() -> None:
    metrics, health = Metrics(), Health()
    metrics.bundle_published(tokens_naive=10, tokens_bundle=4, latency_s=0.01)

    def fetch(url: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=_TEST_TIMEOUT_S) as response:  # noqa: S310
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    with anyio.fail_after(_TEST_TIMEOUT_S):
        async with serving(metrics, health) as port:
            base = f"http://127.0.0.1:{port}"
            status, text = await anyio.to_thread.run_sync(fetch, f"{base}/metrics")
            assert status == 200
            assert "stream_ctx_bundles_published_total 1.0" in text
            assert await anyio.to_thread.run_sync(fetch, f"{base}/readyz") == (503, "not ready\n")
            assert await anyio.to_thread.run_sync(fetch, f"{base}/healthz") == (200, "ok\n")


def _cache_samples(metrics: Metrics) -> Samples:
    families = text_string_to_metric_families(metrics.render().decode())
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in families
        if family.name.startswith("stream_ctx_cache")
        for sample in family.samples
    }


def test_a_chunk_two_conversations_retrieve_is_counted_once_per_process() -> None:
    metrics = Metrics()
    processor = ContextProcessor(BundleConfig(min_salience_threshold=0.0))
    counts = ("stream_ctx_cache_lookups_total", "token_counts_cl100k_base")

    def finalize(conversation: str, position: int) -> Samples:
        # A fresh text per test run: the process-wide cache may hold earlier tests' chunks.
        item = make_item(id="runbook:1", content=f"The shared runbook passage {id(metrics)}.")
        processor.apply(
            make_retrieval(conversation_id=conversation, items=[item]), position=position
        )
        processor.apply(make_finalize(conversation_id=conversation), position=position + 1)
        return _cache_samples(metrics)

    def lookups(samples: Samples, result: str) -> float:
        labels = frozenset({("cache", counts[1]), ("result", result)})
        return samples[(counts[0], labels)]

    before = _cache_samples(metrics)
    first = finalize("c-a", 1)
    second = finalize("c-b", 1)
    assert lookups(first, "miss") > lookups(before, "miss")  # the first bundle counts its text
    assert lookups(second, "miss") == lookups(first, "miss")  # the second counts nothing anew
    assert lookups(second, "hit") > lookups(first, "hit")
    entries = ("stream_ctx_cache_entries", frozenset({("cache", counts[1])}))
    limit = ("stream_ctx_cache_limit_entries", frozenset({("cache", counts[1])}))
    assert 0 < second[entries] <= second[limit]


def test_the_memo_tables_of_the_watched_processors_are_scraped() -> None:
    metrics = Metrics()
    processor = ContextProcessor(BundleConfig(min_salience_threshold=0.0))
    misses = (
        "stream_ctx_cache_lookups_total",
        frozenset({("cache", "block_ids"), ("result", "miss")}),
    )
    assert _cache_samples(metrics)[misses] == 0  # no processor watched yet
    metrics.watch_memos(processor.memos)
    processor.apply(make_retrieval(items=[make_item(content="a text to hash")]), position=1)
    processor.apply(make_finalize(), position=2)
    assert _cache_samples(metrics)[misses] > 0
