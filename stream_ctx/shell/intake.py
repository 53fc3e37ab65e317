"""Turns a Kafka record or a replay line into an event, or an InvalidEventError that says what
is wrong: `run` and `replay` apply the same limits and checks through `read_value`."""

from __future__ import annotations

from aiokafka.structs import ConsumerRecord

from stream_ctx.core.codec import decode_event
from stream_ctx.core.events import Event
from stream_ctx.errors import InvalidEventError

# Bytes shown either side of an invalid UTF-8 sequence in the error message.
_CONTEXT_BYTES = 12


def read_value(value: bytes | None, *, max_bytes: int, size: int | None = None) -> Event:
    """Check size and UTF-8 (all of it, ignored fields too: JSON is UTF-8), then decode.
    `size` is the whole value's length when `value` holds only its head."""
    if value is None:
        raise InvalidEventError("record value is missing (null)", path="$")
    size = len(value) if size is None else size
    if size > max_bytes:
        raise InvalidEventError(
            f"record value is {size} bytes, over kafka.max_event_bytes = {max_bytes}",
            path="$",
        )
    try:
        value.decode("utf-8")
    except UnicodeDecodeError as exc:
        around = value[max(0, exc.start - _CONTEXT_BYTES) : exc.end + _CONTEXT_BYTES]
        raise InvalidEventError(
            f"record value is not valid UTF-8: byte {exc.start} ({exc.reason}) in {around!r}",
            path="$",
        ) from exc
    return decode_event(value)


def read_event(record: ConsumerRecord[bytes, bytes], *, max_bytes: int) -> Event:
    """`read_value`, plus the key: present, UTF-8, equal to `conversation_id`."""
    where = f" ({record.topic}/{record.partition}@{record.offset})"
    try:
        event = read_value(record.value, max_bytes=max_bytes)
    except InvalidEventError as exc:
        raise InvalidEventError(f"{exc}{where}", path=exc.path) from exc
    if record.key is None:
        raise InvalidEventError("record key is missing; key records by conversation id" + where)
    try:
        key = record.key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEventError(f"record key is not UTF-8: {record.key!r}{where}") from exc
    if event.conversation_id != key:
        raise InvalidEventError(
            f"`conversation_id` must equal the record key {key!r}, "
            f"got {event.conversation_id!r}{where}",
            path="$.conversation_id",
        )
    return event
