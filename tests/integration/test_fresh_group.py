"""Groups over the same input: a fresh group reproduces the bundles, a restarted one continues."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import anyio
import msgspec
from aiokafka.structs import ConsumerRecord

from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.events import Event, Finalize
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.settings import Settings
from stream_ctx.shell.kafka.admin import ClientKwargs
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from stream_ctx.shell.processing.runner import Runner
from stream_ctx.shell.processing.stats import RunnerStats
from tests.integration.kafka_io import (
    bundles_by_id,
    collect,
    create_input,
    event_records,
    produce,
    settings_for,
)
from tests.integration.test_runner import replay_bundles

# Group join on this broker takes ~3 s; processing a hundred events well under a second.
RUN_TIMEOUT_S = 30.0


async def run_until_bundles(
    client_kwargs: ClientKwargs, settings: Settings, count: int
) -> tuple[list[ConsumerRecord[bytes, bytes]], RunnerStats]:
    """Run a Runner until its output topic holds `count` records, then stop it gracefully."""
    runner = Runner(settings)
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with anyio.create_task_group() as tasks:
            await tasks.start(runner.run)
            records = await collect(
                client_kwargs, settings.kafka.output_topic, count, timeout_s=RUN_TIMEOUT_S
            )
            runner.stop.set()
    return records, runner.stats


async def test_fresh_group_reproduces_the_same_bundle_values(
    broker: EmbeddedBroker, client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    events = generate(31, WorkloadShape(conversations=8, retrievals_per_conversation=8))
    finalizes = sum(isinstance(e, Finalize) for e in events)
    source, dlq = unique_topic("in"), unique_topic("dlq")
    await create_input(client_kwargs, source, partitions=3)
    await produce(client_kwargs, source, event_records(events))
    outputs = []
    for run in ("first", "second"):
        settings = settings_for(
            broker.bootstrap_servers,
            input_topic=source,
            output_topic=unique_topic(f"out-{run}"),
            dlq_topic=dlq,
            group_id=unique_topic(f"group-{run}"),
        )
        records, stats = await run_until_bundles(client_kwargs, settings, finalizes)
        assert len(records) == finalizes
        # A new group's changelog is its own: nothing to restore, everything read from offset 0.
        assert stats.restored_conversations == 0
        outputs.append(bundles_by_id(records))
    first, second = outputs
    assert first == second
    assert first == replay_bundles(events)


def split_per_conversation(events: list[Event], *, head: int) -> tuple[list[Event], list[Event]]:
    """Each conversation's first `head` events, then the rest, keeping the stream's order."""
    seen: Counter[str] = Counter()
    early: list[Event] = []
    late: list[Event] = []
    for event in events:
        seen[event.conversation_id] += 1
        (early if seen[event.conversation_id] <= head else late).append(event)
    return early, late


async def test_restarted_group_restores_state_and_continues_seq_without_reapplying(
    broker: EmbeddedBroker, client_kwargs: ClientKwargs, unique_topic: Callable[[str], str]
) -> None:
    # No `end`: every conversation's state must survive the restart. Each conversation is
    # 4 retrievals + finalize, twice; both halves end on a finalize, so all of a half's bundles
    # arriving means the whole half was processed. Delta mode: the second bundles are deltas
    # against what the first ones held, which only the changelog remembers across the restart.
    shape = WorkloadShape(
        conversations=6, retrievals_per_conversation=8, finalize_every=4, is_ending=False
    )
    events = generate(37, shape)
    early, late = split_per_conversation(events, head=5)
    assert all(isinstance(e, Finalize) for e in early[-shape.conversations :])
    early_finalizes = sum(isinstance(e, Finalize) for e in early)
    finalizes = sum(isinstance(e, Finalize) for e in events)
    source, sink, dlq = unique_topic("in"), unique_topic("out"), unique_topic("dlq")
    settings = settings_for(
        broker.bootstrap_servers,
        input_topic=source,
        output_topic=sink,
        dlq_topic=dlq,
        group_id=unique_topic("group"),
        mode="delta",
    )
    config = BundleConfig(mode="delta")
    await create_input(client_kwargs, source, partitions=3)

    await produce(client_kwargs, source, event_records(early))
    before, first = await run_until_bundles(client_kwargs, settings, early_finalizes)
    await produce(client_kwargs, source, event_records(late))
    records, second = await run_until_bundles(client_kwargs, settings, finalizes)

    assert bundles_by_id(before) == replay_bundles(early, config)
    # A graceful stop committed everything: nothing published twice, nothing read twice.
    assert len(records) == finalizes
    assert second.events == len(late)
    assert second.restored_conversations == shape.conversations
    new = {bid for bid in bundles_by_id(records) if bid not in bundles_by_id(before)}
    decoded = [msgspec.json.decode(bundles_by_id(records)[bid]) for bid in new]
    assert sorted(bundle["seq"] for bundle in decoded) == [2] * shape.conversations
    assert any(bundle["mode"] == "delta" for bundle in decoded)
    # Restored windows, counters and delta state plus the new events give exactly what a clean
    # replay gives.
    assert bundles_by_id(records) == replay_bundles(events, config)
    assert first.dead_letters == second.dead_letters == 0
