"""`stream-ctx tail`: bundles from the output topic as they arrive, one line each, with savings."""

from __future__ import annotations

from typing import TextIO

import msgspec
from aiokafka.errors import KafkaError

from stream_ctx.core.bundle import Bundle
from stream_ctx.errors import BrokerError, MissingTopicError
from stream_ctx.shell import clients
from stream_ctx.shell.admin import partition_counts
from stream_ctx.shell.connection import client_kwargs
from stream_ctx.shell.settings import Settings

__all__ = ("bundle_line", "tail_bundles")

# Short enough that Ctrl-C and --count answer at once; an idle poll costs one fetch.
_POLL_MS = 500
_decoder = msgspec.json.Decoder(Bundle)


def bundle_line(bundle: Bundle) -> str:
    """One bundle as a line: id, items, blocks, tokens before and after dedup, share saved."""
    stats = bundle.stats
    saved = 1 - stats.tokens_bundle / stats.tokens_naive if stats.tokens_naive else 0.0
    return (
        f"{bundle.bundle_id:<12} {stats.items_included:>2} items "
        f"{stats.blocks:>3} blocks ({stats.shared_blocks} shared)  tokens "
        f"{stats.tokens_naive:>5} -> {stats.tokens_bundle:>5}  saved {saved:6.1%}\n"
    )


async def tail_bundles(
    settings: Settings,
    *,
    out: TextIO,
    err: TextIO,
    from_beginning: bool = False,
    max_bundles: int | None = None,
) -> int:
    """Print bundles until `max_bundles` came (or forever); returns how many were printed."""
    kwargs, topic = client_kwargs(settings.kafka), settings.kafka.output_topic
    try:
        await partition_counts(kwargs, [topic])
    except MissingTopicError:
        raise MissingTopicError(
            f"output topic {topic!r} does not exist on {settings.kafka.servers!r} yet;"
            " `stream-ctx run` creates it (so does `stream-ctx broker`)"
        ) from None
    # A watcher outside any group: it must not take partitions from anyone or commit.
    consumer = clients.reader(
        settings.kafka, topic, auto_offset_reset="earliest" if from_beginning else "latest"
    )
    shown = 0
    try:
        await consumer.start()
        err.write(f"tailing {topic!r} on {', '.join(settings.kafka.servers)}; Ctrl-C stops\n")
        err.flush()
        while max_bundles is None or shown < max_bundles:
            batch = await consumer.getmany(timeout_ms=_POLL_MS)
            for partition, records in batch.items():
                for record in records:
                    try:
                        bundle = _decoder.decode(record.value or b"")
                    except msgspec.DecodeError as exc:
                        where = f"{partition.topic}/{partition.partition}@{record.offset}"
                        err.write(f"not a bundle ({where}): {exc}\n")
                        continue
                    out.write(bundle_line(bundle))
                    out.flush()
                    shown += 1
                    if shown == max_bundles:
                        return shown
    except KafkaError as exc:
        raise BrokerError(f"reading {topic!r} failed: {exc!r}") from exc
    finally:
        await consumer.stop()
    return shown
