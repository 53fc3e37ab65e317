"""The topics a processor reads and writes, and how the ones it creates are configured."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stream_ctx.settings import Settings
from stream_ctx.shell.kafka.admin import TopicSpec

__all__ = (
    "DLQ_MAX_MESSAGE_BYTES",
    "OUTPUT_RETENTION_MS",
    "Topics",
    "topics_to_create",
)

# Output and dead-letter topics we create keep a week: bundles are consumed within seconds, and
# a week leaves time to inspect and re-drive dead letters. Existing topics are left as they are.
OUTPUT_RETENTION_MS = 7 * 24 * 3_600_000
# The dead-letter topic takes any record an input topic could: no produce request is larger than
# Kafka's socket.request.max.bytes (100 MiB by default), so no input record is either.
DLQ_MAX_MESSAGE_BYTES = 104_857_600


@dataclass(frozen=True, slots=True)
class Topics:
    """The names a member writes to: bundles, dead letters, and each input topic's changelog,
    which is named after the input, the group and the changelog suffix."""

    output: str
    dead_letter: str
    changelog_tag: str  # "<group id>.<changelog suffix>"

    @classmethod
    def of(cls, settings: Settings) -> Topics:
        kafka, suffix = settings.kafka, settings.state.changelog_suffix
        return cls(kafka.output_topic, kafka.dlq_topic, f"{kafka.group_id}.{suffix}")

    def changelog(self, input_topic: str) -> str:
        """The compacted topic holding the state of `input_topic`'s conversations."""
        return f"{input_topic}.{self.changelog_tag}"


def topics_to_create(settings: Settings, input_partitions: Mapping[str, int]) -> list[TopicSpec]:
    """Output and dead-letter topics as wide as the widest input; a compacted changelog per
    input topic with its partition count (co-partitioned), kept without time or size limit."""
    topics, factor = Topics.of(settings), settings.state.replication_factor
    widest = max(input_partitions.values())
    specs = [
        TopicSpec(
            name=topic,
            partitions=widest,
            retention_ms=OUTPUT_RETENTION_MS,
            replication_factor=factor,
            max_message_bytes=DLQ_MAX_MESSAGE_BYTES if topic == topics.dead_letter else None,
        )
        for topic in (topics.output, topics.dead_letter)
    ]
    specs += [
        TopicSpec(
            name=topics.changelog(topic),
            partitions=partitions,
            is_compacted=True,
            replication_factor=factor,
        )
        for topic, partitions in input_partitions.items()
    ]
    return specs
