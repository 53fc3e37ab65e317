"""Changelog recovery: read changelog partitions from the start to their high watermarks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager

import anyio
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from stream_ctx.errors import BrokerError
from stream_ctx.shell.state.changelog import RestoredPartition

__all__ = ("read_changelogs",)

# How long one fetch waits before the loop checks what is left to read.
_POLL_MS = 100


async def read_changelogs(
    restorer: AIOKafkaConsumer,
    sources: Mapping[TopicPartition, TopicPartition],
    *,
    is_wanted: Callable[[TopicPartition], bool],
    timeout_s: float,
    beat: Callable[[], None],
    only: str | None = None,
    hold: Callable[[], Awaitable[None]] | None = None,
) -> dict[TopicPartition, RestoredPartition]:
    """Fold each changelog partition of `sources` (changelog -> input partition) into a
    RestoredPartition keyed by input partition, dropping one as soon as it is no longer wanted
    (revoked while restoring). The end is the high watermark from fetch responses, which some
    brokers report correctly where ListOffsets does not.

    `hold`, a test seam (None in production), is awaited once, after the first fetch that
    returned records has been folded and before anything is checked for being wanted: a test
    holds a restore there, in progress, while the group rebalances."""
    restored = {tp: RestoredPartition(only=only) for tp in sources.values()}
    restorer.assign(list(sources))
    for changelog_tp in sources:
        restorer.seek(changelog_tp, 0)
    remaining = set(sources)
    with _bounded(timeout_s, remaining):
        while remaining:
            beat()
            fetched = await restorer.getmany(*remaining, timeout_ms=_POLL_MS)
            for changelog_tp, records in fetched.items():
                restored[sources[changelog_tp]].fold(records)
            if hold is not None and fetched:
                await hold()
                hold = None
            for changelog_tp in list(remaining):
                highwater = restorer.highwater(changelog_tp)
                if not is_wanted(sources[changelog_tp]) or (
                    highwater is not None and await restorer.position(changelog_tp) >= highwater
                ):
                    remaining.discard(changelog_tp)
    return restored


@contextmanager
def _bounded(timeout_s: float, remaining: set[TopicPartition]) -> Iterator[None]:
    """`fail_after`, raised as a retriable BrokerError naming what was left to read."""
    try:
        with anyio.fail_after(timeout_s):
            yield
    except TimeoutError as exc:
        left = ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(remaining))
        raise BrokerError(
            f"changelog restore did not reach the end of {left} within "
            f"state.restore_timeout_s = {timeout_s}"
        ) from exc
