"""Metrics and health of a running processor, scraped over HTTP against the real broker."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable
from functools import partial

import anyio
from prometheus_client.parser import text_string_to_metric_families

from stream_ctx.core.wire.events import Finalize
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.shell.http.server import http_app, run_http_server
from stream_ctx.shell.kafka.admin import ClientKwargs
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from stream_ctx.shell.processing.runner import Runner
from tests.integration.kafka_io import collect, create_input, event_records, produce, settings_for

# Joining the group takes ~3 s on this broker; a restart waits out the old member (~6 s more).
RUN_TIMEOUT_S = 60.0
# Readiness is polled this often while the second processor joins and restores.
POLL_S = 0.02
MAX_POLLS = int(RUN_TIMEOUT_S / POLL_S)


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _samples(text: str) -> dict[str, float]:
    """Sample name (with labels) -> value, for the families stream-ctx exports."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}"] = sample.value
    return found


async def test_metrics_move_and_readiness_waits_for_restore(
    broker: EmbeddedBroker, client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    shape = WorkloadShape(conversations=6, retrievals_per_conversation=4, is_ending=False)
    events = generate(5, shape)
    finalizes = sum(isinstance(e, Finalize) for e in events)
    source, sink = unique_topic("in"), unique_topic("out")
    await create_input(client_kwargs, source, partitions=2)
    await produce(client_kwargs, source, event_records(events))
    settings = settings_for(
        broker.bootstrap_servers,
        input_topic=source,
        output_topic=sink,
        dlq_topic=unique_topic("dlq"),
        group_id=unique_topic("group"),
    )

    first = Runner(settings)
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with anyio.create_task_group() as tasks:
            app = http_app(first.metrics, first.health)
            port = await tasks.start(partial(run_http_server, app, host="127.0.0.1", port=0))
            await tasks.start(first.run)
            await collect(client_kwargs, sink, finalizes, timeout_s=RUN_TIMEOUT_S)
            _, text = await anyio.to_thread.run_sync(_get, port, "/metrics")
            first.stop.set()
            tasks.cancel_scope.cancel()
    moved = _samples(text)
    assert moved[f"stream_ctx_events_consumed_total{{topic={source}}}"] == len(events)
    assert moved["stream_ctx_bundles_published_total{}"] == finalizes
    assert moved["stream_ctx_finalize_to_publish_seconds_count{}"] == finalizes
    assert moved["stream_ctx_tokens_bundle_total{}"] <= moved["stream_ctx_tokens_naive_total{}"]
    assert moved["stream_ctx_tokens_bundle_total{}"] > 0
    assert moved["stream_ctx_items_total{outcome=accepted}"] > 0
    assert moved["stream_ctx_conversations_held{}"] == shape.conversations
    assert moved[f"stream_ctx_consumer_lag_records{{partition=0,topic={source}}}"] == 0

    # A second processor in the same group restores the six windows before it is ready.
    second = Runner(settings)
    seen: list[tuple[int, float]] = []
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with anyio.create_task_group() as tasks:
            app = http_app(second.metrics, second.health)
            port = await tasks.start(partial(run_http_server, app, host="127.0.0.1", port=0))
            tasks.start_soon(second.run)
            for _ in range(MAX_POLLS):
                status, _ = await anyio.to_thread.run_sync(_get, port, "/readyz")
                _, text = await anyio.to_thread.run_sync(_get, port, "/metrics")
                restores = _samples(text)["stream_ctx_restore_duration_seconds_count{}"]
                seen.append((status, restores))
                if status == 200:
                    break
                await anyio.sleep(POLL_S)
            assert (await anyio.to_thread.run_sync(_get, port, "/healthz"))[0] == 200
            second.stop.set()
            tasks.cancel_scope.cancel()
    assert seen[0] == (503, 0.0)  # not ready before joining and restoring
    assert seen[-1][0] == 200
    assert all(restores >= 1 for status, restores in seen if status == 200)
    assert second.stats.restored_conversations == shape.conversations
