"""Topic administration over the plain Kafka protocol: create what is missing, count partitions."""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code

from stream_ctx.errors import BrokerError, ConfigError, MissingTopicError

__all__ = ("ADMIN_TIMEOUT_S", "ClientKwargs", "TopicSpec", "ensure_topics", "partition_counts")

ClientKwargs = Mapping[str, object]
"""aiokafka connection settings: bootstrap_servers, security_protocol, sasl_*, ssl_context, ..."""

# Each call is a few metadata round trips; past 30 s the cluster is unreachable, not slow.
ADMIN_TIMEOUT_S = 30.0
# Closing only drops sockets; bounded so a timed-out call cannot hang in its cleanup.
_CLOSE_TIMEOUT_S = 5.0
# Kafka's controller spreads a new topic to the brokers' metadata within milliseconds to seconds.
_VISIBLE_POLL_INTERVAL_S = 0.1
# Kafka's rule for topic names; Tansu accepts anything, so checking here keeps both alike.
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


@dataclass(frozen=True, kw_only=True, slots=True)
class TopicSpec:
    """A topic to create, with every retention config explicit so no broker default decides it."""

    name: str
    partitions: int
    is_compacted: bool = False
    # -1 keeps records forever (by age, by size): what a changelog needs.
    retention_ms: int = -1
    retention_bytes: int = -1
    # aiokafka speaks CreateTopics v0-v3, which cannot ask for the broker's default factor.
    replication_factor: int = 1
    # Largest record batch the topic accepts; None leaves it to the broker's default.
    max_message_bytes: int | None = None

    def __post_init__(self) -> None:
        if not _TOPIC_NAME.fullmatch(self.name):
            raise ConfigError(
                f"topic name must match {_TOPIC_NAME.pattern} (Kafka's rule), got {self.name!r}"
            )
        for field, value in (
            ("partitions", self.partitions),
            ("replication_factor", self.replication_factor),
        ):
            if value < 1:
                raise ConfigError(f"topic {self.name!r}: `{field}` must be >= 1, got {value!r}")

    @property
    def configs(self) -> dict[str, str]:
        """The topic configs sent at creation."""
        configs = {
            "cleanup.policy": "compact" if self.is_compacted else "delete",
            "retention.ms": str(self.retention_ms),
            "retention.bytes": str(self.retention_bytes),
        }
        if self.max_message_bytes is not None:
            configs["max.message.bytes"] = str(self.max_message_bytes)
        return configs


async def ensure_topics(
    client_kwargs: ClientKwargs,
    specs: Sequence[TopicSpec],
    *,
    timeout_s: float = ADMIN_TIMEOUT_S,
) -> None:
    """Create the topics that do not exist yet, then wait until all of them show in metadata.

    Existing topics are left as they are, even when their partitions or configs differ.
    """
    if not specs:
        return
    names = ", ".join(repr(spec.name) for spec in specs)
    async with _admin_client(
        client_kwargs, timeout_s=timeout_s, action=f"creating {names}"
    ) as admin:
        response = await admin.create_topics(
            [
                NewTopic(
                    spec.name,
                    spec.partitions,
                    spec.replication_factor,
                    topic_configs=spec.configs,
                )
                for spec in specs
            ],
            timeout_ms=int(timeout_s * 1000),
        )
        # The entries are (topic, error_code) in v0 and gain an error_message from v1 on.
        for topic, code, *detail in response.topic_errors:
            if code not in (0, TopicAlreadyExistsError.errno):
                reason = for_code(code).__name__
                if detail and detail[0]:
                    reason = f"{reason}: {detail[0]}"
                raise BrokerError(f"cannot create topic {topic!r}: {reason}")
        max_polls = math.ceil(timeout_s / _VISIBLE_POLL_INTERVAL_S) + 1
        for _ in range(max_polls):
            counts = await _all_partition_counts(admin)
            if all(spec.name in counts for spec in specs):
                return
            await anyio.sleep(_VISIBLE_POLL_INTERVAL_S)
        # The polls outlast the deadline, which turns this into a BrokerError naming the topics.
        raise TimeoutError


async def partition_counts(
    client_kwargs: ClientKwargs,
    topics: Sequence[str],
    *,
    timeout_s: float = ADMIN_TIMEOUT_S,
) -> dict[str, int]:
    """Partition count of each topic; MissingTopicError names every topic the cluster lacks."""
    async with _admin_client(
        client_kwargs, timeout_s=timeout_s, action="reading topic metadata"
    ) as admin:
        counts = await _all_partition_counts(admin)
    missing = [topic for topic in topics if topic not in counts]
    if missing:
        names = ", ".join(repr(topic) for topic in missing)
        subject = f"input topic {names} does" if len(missing) == 1 else f"input topics {names} do"
        raise MissingTopicError(
            f"{subject} not exist on {client_kwargs.get('bootstrap_servers')!r}"
            " (or this client may not describe it); create it or fix the topic name"
        )
    return {topic: counts[topic] for topic in topics}


async def _all_partition_counts(admin: Any) -> dict[str, int]:
    """Partition count of every topic that has a usable listing in the cluster's metadata."""
    # All topics, not the ones we want: naming a topic in a metadata request makes brokers with
    # auto.create.topics.enable (Kafka's default; Tansu too) create it.
    listings = await admin.describe_topics(None)
    return {
        listing["topic"]: len(listing["partitions"])
        for listing in listings
        if listing["error_code"] == 0 and listing["partitions"]
    }


@asynccontextmanager
async def _admin_client(
    client_kwargs: ClientKwargs, *, timeout_s: float, action: str
) -> AsyncIterator[Any]:
    """A started admin client, its whole use bounded by `timeout_s`; errors become BrokerError."""
    bootstrap = client_kwargs.get("bootstrap_servers")
    try:
        with anyio.fail_after(timeout_s):
            admin = AIOKafkaAdminClient(**client_kwargs)
            try:
                await admin.start()
                yield admin
            finally:
                with anyio.move_on_after(_CLOSE_TIMEOUT_S, shield=True):
                    await admin.close()
    except TimeoutError as exc:
        raise BrokerError(
            f"Kafka at {bootstrap!r} did not finish {action} within {timeout_s} s"
        ) from exc
    except KafkaError as exc:
        raise BrokerError(f"Kafka at {bootstrap!r} failed {action}: {exc}") from exc
