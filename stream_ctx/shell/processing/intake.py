"""Turns a Kafka record or a replay line into an event, or an InvalidEventError that says what
is wrong: `run` and `replay` apply the same limits and checks through `read_value`."""

from __future__ import annotations

import datetime

import msgspec
from aiokafka.structs import ConsumerRecord
from msgspec import inspect

from stream_ctx.core.wire.codec import decode_event
from stream_ctx.core.wire.events import End, Event, Finalize, Retrieval
from stream_ctx.errors import InvalidEventError
from stream_ctx.validation import byte_offset, is_truncated, path_steps

__all__ = ("bad_line", "read_event", "read_value")

# Bytes shown either side of an invalid UTF-8 sequence in the error message.
_CONTEXT_BYTES = 12
_EVENT_TYPES = {cls.__struct_config__.tag: cls for cls in (Retrieval, Finalize, End)}
_EPOCH_MS_FIELDS = ("ts", "created_at")


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
        if not value.isascii():  # ASCII is UTF-8: the common case skips decoding a copy
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
    try:
        event = read_value(record.value, max_bytes=max_bytes)
    except InvalidEventError as exc:
        raise InvalidEventError(f"{exc}{_where(record)}", path=exc.path) from exc
    if record.key is None:
        raise InvalidEventError(
            "record key is missing; key records by conversation id" + _where(record)
        )
    try:
        key = record.key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEventError(f"record key is not UTF-8: {record.key!r}{_where(record)}") from exc
    if event.conversation_id != key:
        raise InvalidEventError(
            f"`conversation_id` must equal the record key {key!r}, "
            f"got {event.conversation_id!r}{_where(record)}",
            path="$.conversation_id",
        )
    return event


def _where(record: ConsumerRecord[bytes, bytes]) -> str:
    """Where a bad record is, for its error message (built only when there is one)."""
    return f" ({record.topic}/{record.partition}@{record.offset})"


def bad_line(source: str, number: int, line: bytes, error: InvalidEventError) -> str:
    """`FILE:LINE:COLUMN: message`, with the allowed values of an enum field, or what a date
    string in an epoch-milliseconds field would have been."""
    return f"{source}:{number}:{_error_column(line, error)}: {error}{_hint(line, error)}"


def _error_column(line: bytes, error: InvalidEventError) -> int:
    """1-based byte column of a bad line's fault: where the JSON breaks, or the bad field's key."""
    offset = byte_offset(str(error))
    if offset is not None:
        return offset + 1
    if error.path in (None, "$"):
        return len(line) + 1 if is_truncated(str(error)) else 1
    position, skip = 0, 0
    for step in path_steps(error.path):
        if isinstance(step, int):
            skip = step
            continue
        for _ in range(skip + 1):
            hit = line.find(msgspec.json.encode(step), position)
            if hit < 0:  # a missing field: the object it belongs in
                return position + 1
            position = hit + 1
        skip = 0
    return position


def _hint(line: bytes, error: InvalidEventError) -> str:
    if not error.path or error.path == "$":
        return ""
    try:
        document = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return ""
    if error.path == "$.type":
        return f"; allowed: {', '.join(map(repr, _EVENT_TYPES))}"
    event_type = _EVENT_TYPES.get(document.get("type")) if isinstance(document, dict) else None
    if event_type is None:
        return ""
    info: inspect.Type = inspect.type_info(event_type)
    value: object = document
    name = ""
    for step in path_steps(error.path):
        info = _without_none(info)
        name = step if isinstance(step, str) else ""
        if isinstance(step, int) and isinstance(info, inspect.ListType) and isinstance(value, list):
            info, value = info.item_type, value[step] if step < len(value) else None
        elif isinstance(info, inspect.StructType) and isinstance(value, dict):
            fields = {f.encode_name: f.type for f in info.fields}
            if name not in fields:
                return ""
            info, value = fields[name], value.get(name)
        else:
            return ""
    info = _without_none(info)
    if isinstance(info, inspect.LiteralType):
        return f"; allowed: {', '.join(map(repr, info.values))}"
    if name in _EPOCH_MS_FIELDS and isinstance(value, str):
        return f"; `{name}` is epoch milliseconds (an integer){_as_epoch_ms(value)}"
    return ""


def _without_none(info: inspect.Type) -> inspect.Type:
    if isinstance(info, inspect.UnionType):
        rest = [t for t in info.types if not isinstance(t, inspect.NoneType)]
        if len(rest) == 1:
            return rest[0]
    return info


def _as_epoch_ms(text: str) -> str:
    """ ", e.g. 1735689600000 for '2025-01-01T00:00:00Z'" when `text` reads as a date."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return ""
    zone = "" if moment.tzinfo else " read as UTC"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return f", e.g. {int(moment.timestamp() * 1000)} for {text!r}{zone}"
