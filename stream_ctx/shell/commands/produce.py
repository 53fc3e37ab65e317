"""`stream-ctx produce`: a JSON-lines events file onto the input topic, keyed by conversation id.

Every line is checked as the processor would decode it; a bad one is reported as
`FILE:LINE:COLUMN: message` and skipped, the rest are sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TextIO

from aiokafka.errors import KafkaError

from stream_ctx.core.codec import decode_event
from stream_ctx.errors import BrokerError, InvalidEventError
from stream_ctx.settings import Settings, client_kwargs
from stream_ctx.shell.kafka import clients
from stream_ctx.shell.kafka.admin import partition_counts
from stream_ctx.shell.processing.intake import bad_line, error_column

__all__ = ("Produced", "error_column", "produce_lines")


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
                event = decode_event(value)
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
