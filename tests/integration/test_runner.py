"""The processor against the real broker: output equals replay, state and offsets are exact."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

import anyio
import msgspec
import pytest
from aiokafka.structs import TopicPartition

from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.events import Event, Finalize
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.shell.commands.replay import replay
from stream_ctx.shell.kafka.admin import ClientKwargs, TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import EmbeddedBroker, embedded_broker
from stream_ctx.shell.kafka.topology import Topics, topics_to_create
from stream_ctx.shell.processing.runner import Runner
from tests.integration.kafka_io import (
    collect,
    commit,
    create_input,
    event_records,
    produce,
    settings_for,
)

# Group join on this broker takes ~3 s; processing a few hundred events well under a second.
RUN_TIMEOUT_S = 60.0


def replay_bundles(events: Sequence[Event], config: BundleConfig | None = None) -> dict[str, bytes]:
    """bundle_id -> bundle bytes, as `stream-ctx replay` writes them."""
    lines = [msgspec.json.encode(e) for e in events]
    out = io.BytesIO()
    config = config or BundleConfig()
    assert replay(config, io.BytesIO(b"\n".join(lines)), out, io.StringIO()) == 0
    bundles = {}
    for line in out.getvalue().splitlines():
        bundles[msgspec.json.decode(line)["bundle_id"]] = line
    return bundles


async def test_stream_gives_one_bundle_per_finalize_identical_to_replay(
    broker: EmbeddedBroker, client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    events = generate(11, WorkloadShape(conversations=12, retrievals_per_conversation=8))
    finalizes = sum(isinstance(e, Finalize) for e in events)
    source, sink, dlq = unique_topic("in"), unique_topic("out"), unique_topic("dlq")
    await create_input(client_kwargs, source, partitions=3)
    await produce(client_kwargs, source, event_records(events))
    settings = settings_for(
        broker.bootstrap_servers,
        input_topic=source,
        output_topic=sink,
        dlq_topic=dlq,
        group_id=unique_topic("group"),
    )
    runner = Runner(settings)
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with anyio.create_task_group() as tasks:
            await tasks.start(runner.run)
            records = await collect(client_kwargs, sink, finalizes, timeout_s=RUN_TIMEOUT_S)
            runner.stop.set()
    got = {msgspec.json.decode(r.value)["bundle_id"]: r.value for r in records}
    assert len(records) == finalizes
    assert got == replay_bundles(events)
    assert all(r.key == msgspec.json.decode(r.value)["conversation_id"].encode() for r in records)
    assert runner.stats.dead_letters == 0


@pytest.mark.parametrize("is_position_committed", [True, False], ids=["committed", "uncommitted"])
async def test_after_the_broker_restarts_empty_windows_start_over_with_the_emptied_input(
    is_position_committed: bool,
) -> None:
    before = generate(5, WorkloadShape(conversations=2, retrievals_per_conversation=12))
    ids = {e.conversation_id for e in before}
    # Fewer events with the same conversation ids and other items, as a restarted broker's
    # input holds fewer than the member's position: applied to the old windows, or skipped as
    # already applied at offsets the old events took, they would give other bundles.
    after = [
        e
        for e in generate(6, WorkloadShape(conversations=2, retrievals_per_conversation=4))
        if e.conversation_id in ids
    ]
    async with embedded_broker() as broker:
        client = {"bootstrap_servers": broker.bootstrap_servers}
        settings = settings_for(
            broker.bootstrap_servers,
            input_topic="in",
            output_topic="out",
            dlq_topic="dlq",
            group_id="group",
        )
        topics = [TopicSpec(name="in", partitions=1), *topics_to_create(settings, {"in": 1})]
        changelog = Topics.of(settings).changelog("in")
        await ensure_topics(client, topics)
        await produce(client, "in", event_records(before))
        runner = Runner(settings)
        with anyio.fail_after(3 * RUN_TIMEOUT_S):
            async with anyio.create_task_group() as tasks:
                await tasks.start(runner.run)
                finalizes = sum(isinstance(e, Finalize) for e in before)
                await collect(client, "out", finalizes, timeout_s=RUN_TIMEOUT_S)
                written = await collect(client, changelog, 1, timeout_s=RUN_TIMEOUT_S)
                runner.stop.set()
            await broker.restart()
            await ensure_topics(client, topics)
            # What a member flushes as it meets the emptied broker: its states, naming the old
            # input offsets, and its old input position when that commit lands (the restored
            # states alone tell otherwise).
            await produce(client, changelog, [(r.key, r.value) for r in written])
            if is_position_committed:
                await commit(client, "group", {TopicPartition("in", 0): len(before)})
            await produce(client, "in", event_records(after))
            runner = Runner(settings)
            async with anyio.create_task_group() as tasks:
                await tasks.start(runner.run)
                finalizes = sum(isinstance(e, Finalize) for e in after)
                records = await collect(client, "out", finalizes, timeout_s=RUN_TIMEOUT_S)
                runner.stop.set()
    assert {msgspec.json.decode(r.value)["bundle_id"]: r.value for r in records} == replay_bundles(
        after
    )
