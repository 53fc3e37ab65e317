"""`stream-ctx tail`: bundles from the output topic as they arrive, one line each, with savings;
or any topic's records (`--topic`), a dead letter as its error and origin."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import TextIO

import anyio
import anyio.abc
import msgspec
from aiokafka import ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from stream_ctx.client import rewind_emptied
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.errors import BrokerError, MissingTopicError
from stream_ctx.settings import Settings, client_kwargs, load_settings
from stream_ctx.shell.commands.subcommand import (
    Commands,
    add_command,
    cancel_on_signal,
    log_options,
    run_async,
)
from stream_ctx.shell.kafka import clients
from stream_ctx.shell.kafka.admin import partition_counts

__all__ = ("add_to", "bundle_line", "record_line", "tail_bundles")

# Short enough that Ctrl-C and --count answer at once; an idle poll costs one fetch.
_POLL_MS = 500
_decoder = msgspec.json.Decoder(Bundle)
_MESSAGE = "__streams.errors.message"
# A record that is neither a bundle nor a dead letter shows this much of its value.
_SHOWN_CHARS = 200


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
    topic: str | None = None,
) -> int:
    """Print records of `topic` (the output topic by default) until `max_bundles` came (or
    forever); returns how many were printed."""
    kwargs = client_kwargs(settings.kafka)
    topic = topic or settings.kafka.output_topic
    try:
        await partition_counts(kwargs, [topic])
    except MissingTopicError:
        raise MissingTopicError(
            f"topic {topic!r} does not exist on {settings.kafka.servers!r} yet;"
            " `stream-ctx run` creates its output and dead-letter topics (so does"
            " `stream-ctx broker`)"
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
        async with anyio.create_task_group() as tasks:
            # Ctrl-C cancels through anyio's scope, which keeps cancelling until the loop
            # leaves it: a cancellation aiokafka swallows once cannot keep the tail running.
            await tasks.start(cancel_on_signal, tasks.cancel_scope)
            while max_bundles is None or shown < max_bundles:
                batch = await consumer.getmany(timeout_ms=_POLL_MS)
                shown += _show(batch, out, shown, max_bundles)
                if not batch:
                    await rewind_emptied(consumer)
            tasks.cancel_scope.cancel()
    except KafkaError as exc:
        raise BrokerError(f"reading {topic!r} failed: {exc!r}") from exc
    finally:
        with anyio.CancelScope(shield=True):
            await consumer.stop()
    return shown


def record_line(record: ConsumerRecord[bytes, bytes]) -> str:
    """A bundle's line; a dead letter's error and where it came from; else the value's start."""
    where = f"{record.topic}/{record.partition}@{record.offset}"
    headers = {name: value.decode("utf-8", "replace") for name, value in record.headers or ()}
    error = headers.get("__streams.errors.exception")
    if error is not None:
        origin = "/".join(headers.get(f"__streams.errors.{k}", "?") for k in ("topic", "partition"))
        origin += "@" + headers.get("__streams.errors.offset", "?")
        return f"{where} dead letter from {origin}: {error}: {headers.get(_MESSAGE, '')}\n"
    try:
        return bundle_line(_decoder.decode(record.value or b""))
    except msgspec.DecodeError:
        value = (record.value or b"").decode("utf-8", "replace")
        cut = value[:_SHOWN_CHARS] + ("…" if len(value) > _SHOWN_CHARS else "")
        return f"{where} {cut}\n"


def _show(
    batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]],
    out: TextIO,
    shown: int,
    max_bundles: int | None,
) -> int:
    """Print a fetch's records, up to `max_bundles` in all; returns how many it printed."""
    printed = 0
    for records in batch.values():
        for record in records:
            if max_bundles is not None and shown + printed == max_bundles:
                return printed
            out.write(record_line(record))
            out.flush()
            printed += 1
    return printed


def add_to(commands: Commands) -> None:
    """`stream-ctx tail [--config FILE] [--topic NAME] [--from-beginning] [--count N]`."""
    command = add_command(
        commands,
        "tail",
        parents=[log_options()],
        summary="print bundles from kafka.output_topic as they arrive",
    )
    command.add_argument("--config", type=Path, help="TOML config file")
    command.add_argument(
        "--topic",
        help="the topic to read (default kafka.output_topic); kafka.dlq_topic shows each dead"
        " letter's error and origin",
    )
    command.add_argument(
        "--from-beginning", action="store_true", help="start at the oldest record, not the next"
    )
    command.add_argument("--count", type=int, help="exit after this many records")
    command.set_defaults(handler=_tail, is_broker_client=True)


def _tail(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    tail = partial(
        tail_bundles,
        settings,
        out=sys.stdout,
        err=sys.stderr,
        from_beginning=args.from_beginning,
        max_bundles=args.count,
        topic=args.topic,
    )
    try:
        run_async(tail)
    except KeyboardInterrupt:  # Ctrl-C is how a tail ends
        return 0
    return 0
