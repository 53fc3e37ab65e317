"""Turns a Kafka record into an event, or an InvalidEventError that says what is wrong."""

from __future__ import annotations

from aiokafka.structs import ConsumerRecord

from stream_ctx.core.codec import decode_event
from stream_ctx.core.events import Event
from stream_ctx.errors import InvalidEventError


def read_event(record: ConsumerRecord[bytes, bytes], *, max_bytes: int) -> Event:
    """Check size and key, decode, and check the key agrees with `conversation_id`."""
    where = f" ({record.topic}/{record.partition}@{record.offset})"
    value = record.value
    if value is None:
        raise InvalidEventError("record value is missing (null)" + where, path="$")
    if len(value) > max_bytes:
        raise InvalidEventError(
            f"record value is {len(value)} bytes, over kafka.max_event_bytes = {max_bytes}" + where,
            path="$",
        )
    if record.key is None:
        raise InvalidEventError("record key is missing; key records by conversation id" + where)
    try:
        key = record.key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEventError(f"record key is not UTF-8: {record.key!r}{where}") from exc
    try:
        event = decode_event(value)
    except InvalidEventError as exc:
        raise InvalidEventError(f"{exc}{where}", path=exc.path) from exc
    if event.conversation_id != key:
        raise InvalidEventError(
            f"`conversation_id` must equal the record key {key!r}, "
            f"got {event.conversation_id!r}{where}",
            path="$.conversation_id",
        )
    return event
