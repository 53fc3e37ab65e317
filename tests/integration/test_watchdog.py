"""The progress watchdog against the real broker: a member that stops moving a partition with
records waiting, while it stays in its group, says so once and turns /healthz red; an idle member
stays green."""

from __future__ import annotations

import logging
from collections.abc import Callable

import aiokafka.codec
import anyio
import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from stream_ctx.core.wire.events import Finalize
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.settings import Settings
from stream_ctx.shell.kafka.admin import ClientKwargs
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from stream_ctx.shell.processing.runner import Runner
from tests.integration.kafka_io import (
    collect,
    create_input,
    event_records,
    produce,
    settings_for,
)
from tests.integration.test_codecs import events_of, produce_compressed
from tests.shell.http.test_metrics import get, serving

# A join (~3 s here), the events, the stall time and a few watchdog turns.
RUN_TIMEOUT_S = 60.0
POLL_S = 0.1
# Short for the test; the default is minutes.
STALL_AFTER_S = 2.0
STALL_LINE = "no progress for"
SHAPE = WorkloadShape(conversations=3, retrievals_per_conversation=4, is_ending=False)


def runner_for(settings: Settings) -> Runner:
    # Our own output must not need the codec taken away below.
    kafka = msgspec.structs.replace(settings.kafka, compression_type="gzip")
    return Runner(msgspec.structs.replace(settings, kafka=kafka), stall_after_s=STALL_AFTER_S)


def seconds_since_progress(text: str) -> float:
    for family in text_string_to_metric_families(text):
        if family.name == "stream_ctx_seconds_since_progress":
            return float(family.samples[0].value)
    raise AssertionError(f"no stream_ctx_seconds_since_progress in {text!r}")


def stall_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if STALL_LINE in r.getMessage()]


async def test_member_stuck_on_a_partition_warns_once_and_turns_healthz_red(
    broker: EmbeddedBroker,
    client_kwargs: ClientKwargs,
    unique_topic: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Partition 0 holds a zstd batch this member cannot decode (the library is taken away, as
    the broker only stores batches it can decode): it is parked, its records wait, and the member
    stays joined and keeps partition 1 going."""
    source = unique_topic("in")
    await create_input(client_kwargs, source, partitions=2)
    await produce_compressed(client_kwargs, source, 1, "gzip", events_of("gzip"))
    stuck = events_of("zstd")
    await produce_compressed(client_kwargs, source, 0, "zstd", stuck)
    monkeypatch.setattr(aiokafka.codec, "has_zstd", lambda: False)
    runner = runner_for(
        settings_for(
            broker.bootstrap_servers,
            input_topic=source,
            output_topic=unique_topic("out"),
            dlq_topic=unique_topic("dlq"),
            group_id=unique_topic("group"),
        )
    )
    caplog.set_level(logging.INFO, logger="stream_ctx")
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with (
            anyio.create_task_group() as tasks,
            serving(runner.metrics, runner.health) as port,
        ):
            await tasks.start(runner.run)
            for _ in range(int(RUN_TIMEOUT_S / POLL_S)):
                if stall_lines(caplog):
                    break
                await anyio.sleep(POLL_S)
            for _ in range(int(2 * STALL_AFTER_S / POLL_S)):
                await anyio.sleep(POLL_S)  # more watchdog turns: the stall is told once
            healthz = await get(port, "/healthz")
            status, metrics = await get(port, "/metrics")
            is_joined = runner.partitions.is_ready
            runner.stop.set()
    lines = stall_lines(caplog)
    assert len(lines) == 1, caplog.text
    assert lines[0].levelno == logging.WARNING
    line = lines[0].getMessage()
    assert f"{source}/0 lag {len(stuck)} (waiting on its undecodable batch, paused" in line
    assert f"{source}/1" not in line  # caught up: nothing waits there
    assert healthz[0] == 503
    assert (
        healthz[1].decode()
        == f"stalled: {line.removesuffix('; /healthz reports stalled until one moves')}\n"
    )
    assert status == 200
    assert seconds_since_progress(metrics.decode()) >= STALL_AFTER_S
    assert is_joined


async def test_idle_member_with_nothing_to_read_stays_green(
    broker: EmbeddedBroker,
    client_kwargs: ClientKwargs,
    unique_topic: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    source, sink = unique_topic("in"), unique_topic("out")
    await create_input(client_kwargs, source, partitions=2)
    events = generate(5, SHAPE)
    await produce(client_kwargs, source, event_records(events))
    runner = runner_for(
        settings_for(
            broker.bootstrap_servers,
            input_topic=source,
            output_topic=sink,
            dlq_topic=unique_topic("dlq"),
            group_id=unique_topic("group"),
        )
    )
    caplog.set_level(logging.INFO, logger="stream_ctx")
    finalizes = sum(isinstance(e, Finalize) for e in events)
    healthy: list[int] = []
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with (
            anyio.create_task_group() as tasks,
            serving(runner.metrics, runner.health) as port,
        ):
            await tasks.start(runner.run)
            await collect(client_kwargs, sink, finalizes, timeout_s=RUN_TIMEOUT_S)
            for _ in range(int(3 * STALL_AFTER_S / POLL_S)):  # idle, well past the stall time
                healthy.append((await get(port, "/healthz"))[0])
                await anyio.sleep(POLL_S)
            _, metrics = await get(port, "/metrics")
            runner.stop.set()
    assert not stall_lines(caplog), caplog.text
    assert set(healthy) == {200}
    assert seconds_since_progress(metrics.decode()) < STALL_AFTER_S
