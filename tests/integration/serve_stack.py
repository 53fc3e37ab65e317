"""A processor on fresh topics for the serve tests, shared by a module, every wait bounded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec

from stream_ctx.core.wire.events import End, Event, Retrieval
from stream_ctx.settings import ServeSettings, Settings
from stream_ctx.shell.kafka.admin import TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from stream_ctx.shell.processing.runner import Runner
from tests.factories import make_item
from tests.integration.kafka_io import event_records, produce, settings_for

# A group join (~6 s on the embedded broker) and topic creation; generous for a loaded runner.
START_TIMEOUT_S = 60.0
# Draining the processor and leaving the group.
STOP_TIMEOUT_S = 30.0


class _Started:
    """The TaskStatus a Runner reports to when it is started outside a task group."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def started(self, value: object = None) -> None:
        self.event.set()


@dataclass
class Stack:
    """A running processor: its settings, and the task to stop."""

    settings: Settings
    runner: Runner
    task: asyncio.Task[Any]

    def serve_settings(self, **serve: Any) -> Settings:
        """The processor's settings with a `[serve]` table for a serve on a free port."""
        return msgspec.structs.replace(self.settings, serve=ServeSettings(port=0, **serve))

    async def retrieve(
        self, conversation_id: str, *, turn: int = 0, items: int = 2, ts: int | None = None
    ) -> None:
        """Publish one retrieval of `items` items to the conversation, now unless `ts` says."""
        event = Retrieval(
            conversation_id=conversation_id,
            event_id=f"{conversation_id}-r{turn}",
            ts=_now_ms() if ts is None else ts,  # the finalize's ts is serve's wall clock
            items=[
                make_item(
                    id=f"doc-{turn}-{k}", content=f"passage {k} of turn {turn} on {conversation_id}"
                )
                for k in range(items)
            ],
        )
        await self._publish(event)

    async def end(self, conversation_id: str) -> None:
        """Publish the end of the conversation."""
        await self._publish(End(conversation_id=conversation_id, event_id="end", ts=_now_ms()))

    async def _publish(self, event: Event) -> None:
        kafka = self.settings.kafka
        await produce(
            {"bootstrap_servers": kafka.servers}, kafka.input_topics[0], event_records([event])
        )

    async def stop(self) -> None:
        self.runner.stop.set()
        with anyio.fail_after(STOP_TIMEOUT_S):
            await self.task


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def start_stack(broker: EmbeddedBroker, unique: Callable[[str], str]) -> Stack:
    """A Runner on fresh topics, started in its own task so a module's tests can share it."""
    source = unique("in")
    await ensure_topics(
        {"bootstrap_servers": broker.bootstrap_servers}, [TopicSpec(name=source, partitions=2)]
    )
    settings = settings_for(
        broker.bootstrap_servers,
        input_topic=source,
        output_topic=unique("out"),
        dlq_topic=unique("dlq"),
        group_id=unique("group"),
    )
    runner = Runner(settings)
    status = _Started()
    task = asyncio.create_task(runner.run(task_status=status))
    with anyio.fail_after(START_TIMEOUT_S):
        await status.event.wait()
    return Stack(settings, runner, task)
