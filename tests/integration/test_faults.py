"""Transient faults are retried, never parked: a good record never reaches the dead-letter topic
because the broker (or a restore) failed while it was handled."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Iterator

import anyio
import msgspec
import pytest
from aiokafka.structs import ConsumerRecord

from stream_ctx.core.wire.events import Finalize
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.settings import Settings
from stream_ctx.shell.kafka.admin import ClientKwargs
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from stream_ctx.shell.processing.runner import Runner
from tests.integration.kafka_io import (
    bundles_by_id,
    collect,
    collect_until,
    create_input,
    event_records,
    high_watermarks,
    produce,
    settings_for,
)
from tests.integration.test_runner import replay_bundles

# Two group joins (~3 s each on this broker) and a few retries.
RUN_TIMEOUT_S = 60.0
POLL_S = 0.1
# Noticing the first bundle while the rest of a backlog is still being worked through.
FAST_POLL_S = 0.005
SHAPE = WorkloadShape(conversations=4, retrievals_per_conversation=4, is_ending=False)
# Shorter than any changelog read can take: every restore times out.
HOPELESS_RESTORE_S = 1e-4
RETRY_LINE = "Kafka unavailable (BrokerError: changelog restore did not reach the end"


def with_restore_timeout(settings: Settings, timeout_s: float) -> Settings:
    state = msgspec.structs.replace(settings.state, restore_timeout_s=timeout_s)
    return msgspec.structs.replace(settings, state=state)


async def test_restore_timeout_is_retried_never_dead_letters_and_loses_nothing(
    broker: EmbeddedBroker,
    client_kwargs: ClientKwargs,
    unique_topic: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    events = generate(8, SHAPE)
    source, sink, dlq = unique_topic("in"), unique_topic("out"), unique_topic("dlq")
    await create_input(client_kwargs, source, partitions=2)
    await produce(client_kwargs, source, event_records(events))
    settings = settings_for(
        broker.bootstrap_servers,
        input_topic=source,
        output_topic=sink,
        dlq_topic=dlq,
        group_id=unique_topic("group"),
    )
    caplog.set_level(logging.INFO, logger="stream_ctx")
    failing = Runner(with_restore_timeout(settings, HOPELESS_RESTORE_S))
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with anyio.create_task_group() as tasks:
            await tasks.start(failing.run)
            for _ in range(int(RUN_TIMEOUT_S / POLL_S)):
                if RETRY_LINE in caplog.text and "rejoining the group" in caplog.text:
                    break  # failed, backed off, and came back for another try
                await anyio.sleep(POLL_S)
            failing.stop.set()
    assert RETRY_LINE in caplog.text
    assert caplog.text.count("Kafka unavailable") == 1  # one line for the outage, not one a try
    assert failing.stats.dead_letters == 0
    marks = await high_watermarks(client_kwargs, dlq, timeout_s=RUN_TIMEOUT_S)
    assert sum(marks.values()) == 0
    healthy = Runner(settings)
    finalizes = sum(isinstance(e, Finalize) for e in events)
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with anyio.create_task_group() as tasks:
            await tasks.start(healthy.run)
            found = await collect(client_kwargs, sink, finalizes, timeout_s=RUN_TIMEOUT_S)
            healthy.stop.set()
    assert bundles_by_id(found) == replay_bundles(events)
    assert healthy.stats.dead_letters == 0


# The clients give up on a request after this long: the pause below outlasts it, so every
# request in flight when the broker froze fails, as in an outage longer than Kafka's defaults.
# aiokafka bounds a JoinGroup by it too, and Tansu answers a join after ~half the session.
SESSION_TIMEOUT_MS = 3_000
REQUEST_TIMEOUT_MS = 4_000
PAUSE_S = 2 * REQUEST_TIMEOUT_MS / 1000
# Join, a backlog, the pause, the session timeout of the dead membership, a rejoin.
PAUSE_TEST_TIMEOUT_S = 90.0
PAUSE_SHAPE = WorkloadShape(conversations=30, retrievals_per_conversation=8, is_ending=False)


@pytest.fixture
def own_broker() -> Iterator[EmbeddedBroker]:
    """A broker of this test's own: pausing the session's would stall its other users."""
    running = EmbeddedBroker.start()
    try:
        yield running
    finally:
        os.kill(running.pid, signal.SIGCONT)
        running.stop()


def outage_runner(bootstrap: str, source: str, sink: str, dlq: str, *, group: str) -> Runner:
    """A runner whose requests time out and retry quickly, for the broker-outage tests."""
    settings = settings_for(
        bootstrap, input_topic=source, output_topic=sink, dlq_topic=dlq, group_id=group
    )
    kafka = msgspec.structs.replace(
        settings.kafka,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        client={"request_timeout_ms": REQUEST_TIMEOUT_MS, "retry_backoff_ms": 100},
    )
    return Runner(msgspec.structs.replace(settings, kafka=kafka))


async def test_broker_paused_past_the_request_timeout_member_stays_up_and_loses_nothing(
    own_broker: EmbeddedBroker,
    unique_topic: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    client_kwargs: ClientKwargs = {"bootstrap_servers": own_broker.bootstrap_servers}
    events = generate(21, PAUSE_SHAPE)
    before, after = events[: len(events) // 2], events[len(events) // 2 :]
    source, sink, dlq = unique_topic("in"), unique_topic("out"), unique_topic("dlq")
    await create_input(client_kwargs, source, partitions=2)
    runner = outage_runner(
        own_broker.bootstrap_servers, source, sink, dlq, group=unique_topic("group")
    )
    caplog.set_level(logging.INFO, logger="stream_ctx")
    expected = replay_bundles(events)
    with anyio.fail_after(PAUSE_TEST_TIMEOUT_S):
        async with anyio.create_task_group() as tasks:
            await tasks.start(runner.run)
            await produce(client_kwargs, source, event_records(before))
            # Freeze the broker mid-backlog: bundles, state writes and a commit on the wire.
            for _ in range(int(PAUSE_TEST_TIMEOUT_S / FAST_POLL_S)):
                if runner.stats.bundles > 0:
                    break
                await anyio.sleep(FAST_POLL_S)
            os.kill(own_broker.pid, signal.SIGSTOP)
            await anyio.sleep(PAUSE_S)
            os.kill(own_broker.pid, signal.SIGCONT)
            await produce(client_kwargs, source, event_records(after))
            is_done = _has_every_bundle(set(expected))
            timeout_s = PAUSE_TEST_TIMEOUT_S
            found = await collect_until(client_kwargs, sink, is_done, timeout_s=timeout_s)
            runner.stop.set()
    # Every finalize has its bundle; a repeat (re-applied after the outage) is byte-identical.
    assert bundles_by_id(found) == expected
    assert runner.stats.dead_letters == 0
    assert caplog.text.count("Kafka unavailable") == 1, caplog.text
    assert "Kafka available again after" in caplog.text


def _has_every_bundle(ids: set[str]) -> Callable[[list[ConsumerRecord[bytes, bytes]]], bool]:
    """Whether every bundle id in `ids` arrived (repeats included)."""
    return lambda found: ids <= {msgspec.json.decode(r.value)["bundle_id"] for r in found}


async def test_second_outage_is_new_warned_and_backs_off_from_the_first_delay(
    own_broker: EmbeddedBroker,
    unique_topic: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    client_kwargs: ClientKwargs = {"bootstrap_servers": own_broker.bootstrap_servers}
    events = generate(22, PAUSE_SHAPE)
    halves = [events[: len(events) // 2], events[len(events) // 2 :]]
    source = unique_topic("in")
    await create_input(client_kwargs, source, partitions=2)
    runner = outage_runner(
        own_broker.bootstrap_servers,
        source,
        unique_topic("out"),
        unique_topic("dlq"),
        group=unique_topic("group"),
    )
    caplog.set_level(logging.INFO, logger="stream_ctx")
    with anyio.fail_after(2 * PAUSE_TEST_TIMEOUT_S):
        async with anyio.create_task_group() as tasks:
            await tasks.start(runner.run)
            for outage, half in enumerate(halves, start=1):
                bundles = runner.stats.bundles
                await produce(client_kwargs, source, event_records(half))
                for _ in range(int(PAUSE_TEST_TIMEOUT_S / FAST_POLL_S)):
                    if runner.stats.bundles > bundles:
                        break
                    await anyio.sleep(FAST_POLL_S)
                os.kill(own_broker.pid, signal.SIGSTOP)  # mid-backlog: sends and a commit fail
                await anyio.sleep(PAUSE_S)
                os.kill(own_broker.pid, signal.SIGCONT)
                for _ in range(int(PAUSE_TEST_TIMEOUT_S / POLL_S)):
                    is_back = caplog.text.count("Kafka available again") == outage
                    if is_back and runner.partitions.is_ready:
                        break  # noticed, recovered, and joined and restored again
                    await anyio.sleep(POLL_S)
            runner.stop.set()
    starts = _outage_starts(caplog)
    assert len(starts) == 2, caplog.text
    assert all(r.levelno == logging.WARNING for r in starts)
    assert all("retrying with backoff from 0.5 s" in r.getMessage() for r in starts)


def _outage_starts(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("Kafka unavailable")]
