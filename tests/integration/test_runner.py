"""The processor against the real broker: output equals replay, state and offsets are exact."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

import anyio
import msgspec

from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.events import Event, Finalize
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.shell.commands.replay import replay
from stream_ctx.shell.kafka.admin import ClientKwargs
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from stream_ctx.shell.processing.runner import Runner
from tests.integration.kafka_io import collect, create_input, event_records, produce, settings_for

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
