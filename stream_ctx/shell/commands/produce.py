"""`stream-ctx produce`: a JSON-lines events file onto the input topic, keyed by conversation id.

Every line is checked as the processor would read it (size, UTF-8, schema); a bad one is reported as
`FILE:LINE:COLUMN: message` and skipped, the rest are sent.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TextIO

from aiokafka.errors import KafkaError

from stream_ctx.errors import BrokerError, InvalidEventError
from stream_ctx.settings import Settings, client_kwargs, load_settings
from stream_ctx.shell.commands.subcommand import Commands, add_command, log_options, run_async
from stream_ctx.shell.kafka import clients
from stream_ctx.shell.kafka.admin import partition_counts
from stream_ctx.shell.processing.intake import bad_line, read_value

__all__ = ("Produced", "add_to", "produce_lines")


@dataclass(frozen=True, slots=True)
class Produced:
    """What a `produce` run did: events sent, conversations they belong to, lines refused."""

    sent: int
    conversations: int
    bad: int


async def produce_lines(
    settings: Settings, lines: Iterable[bytes], *, source: str, topic: str, err: TextIO
) -> Produced:
    """Send each valid line to `topic` (key: its conversation id); report bad lines on `err`."""
    kwargs = client_kwargs(settings.kafka)
    await partition_counts(kwargs, [topic])  # a missing topic is an error, not an auto-create
    producer = clients.producer(settings.kafka)
    sent, bad, conversations = [], 0, set()
    try:
        await producer.start()
        for number, line in enumerate(lines, start=1):
            value = line.rstrip(b"\r\n")
            if not value.strip():
                continue
            try:
                event = read_value(value, max_bytes=settings.kafka.max_event_bytes)
            except InvalidEventError as exc:
                bad += 1
                err.write(bad_line(source, number, value, exc) + "\n")
                continue
            conversations.add(event.conversation_id)
            key = event.conversation_id.encode()
            sent.append(await producer.send(topic, value, key=key))
        await producer.flush()
        for delivery in sent:
            await delivery
    except KafkaError as exc:
        raise BrokerError(f"producing to {topic!r} failed: {exc!r}") from exc
    finally:
        await producer.stop()
    return Produced(sent=len(sent), conversations=len(conversations), bad=bad)


def add_to(commands: Commands) -> None:
    """`stream-ctx produce [--config FILE] [--topic TOPIC] EVENTS`."""
    command = add_command(
        commands,
        "produce",
        parents=[log_options()],
        summary="send a JSON-lines events file, keyed by conversation id",
    )
    command.add_argument("--config", type=Path, help="TOML config file")
    command.add_argument("--topic", help="default: the first of kafka.input_topics")
    command.add_argument("events", help="events file (JSON lines), or - for stdin")
    command.set_defaults(handler=_produce, is_broker_client=True)


def _produce(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    topic = args.topic or settings.kafka.input_topics[0]
    try:
        with (
            open(sys.stdin.fileno(), "rb", closefd=False)
            if args.events == "-"
            else Path(args.events).open("rb")
        ) as lines:
            source = "<stdin>" if args.events == "-" else args.events
            produce = partial(
                produce_lines, settings, lines, source=source, topic=topic, err=sys.stderr
            )
            done = run_async(produce)
    except OSError as exc:
        print(f"stream-ctx: cannot read {args.events!r}: {exc.strerror}", file=sys.stderr)
        return 2
    print(
        f"sent {done.sent} event(s) of {done.conversations} conversation(s) to {topic!r}"
        + (f"; {done.bad} bad line(s) skipped" if done.bad else ""),
        file=sys.stderr,
    )
    return 1 if done.bad else 0
