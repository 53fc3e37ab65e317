"""Bytes in, bytes out: events decoded with errors naming field and value; bundles encoded."""

from __future__ import annotations

import re

import msgspec

from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.events import Event
from stream_ctx.errors import InvalidEventError
from stream_ctx.validation import without_type

__all__ = ("decode_event", "encode_bundle")

_event_decoder = msgspec.json.Decoder(Event)
_raw_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()
_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_PATH_STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]+)`")
# Long values are cut in messages so a dead-letter header stays readable.
_VALUE_REPR_LIMIT = 120


def decode_event(data: bytes) -> Event:
    """Decode one JSON event, or raise InvalidEventError naming the bad field and its value."""
    try:
        return _event_decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise _describe(str(exc), data) from exc
    except msgspec.DecodeError as exc:
        raise InvalidEventError(f"invalid JSON: {exc}", path="$") from exc


def encode_bundle(bundle: Bundle) -> bytes:
    """The bundle's canonical JSON bytes (field order fixed, floats shortest round-trip)."""
    return _encoder.encode(bundle)


def _describe(message: str, data: bytes) -> InvalidEventError:
    """Rewrite msgspec's message as "`items[2].salience` ..., got 7" using the raw document."""
    found = _PATH.search(message)
    path = found.group("path") if found else ""
    reason = without_type(message[: found.start()] if found else message)
    missing = _MISSING.match(reason)
    if missing:
        field = f"{path}.{missing.group('field')}".lstrip(".")
        return InvalidEventError(f"`{field}` is required but missing", path=f"$.{field}")
    try:
        document = _raw_decoder.decode(data)
    except msgspec.DecodeError as exc:
        # msgspec rejects a bad tag before it reaches the end of a truncated document.
        return InvalidEventError(f"invalid JSON: {exc}", path="$")
    shown, value = _lookup(document, path)
    text = repr(value)
    if len(text) > _VALUE_REPR_LIMIT:
        text = text[:_VALUE_REPR_LIMIT] + "..."
    # A document that is not an object at all is wrong at the root, `$` itself.
    return InvalidEventError(
        f"`{shown}`: {reason}, got {text}", path="$" if shown == "$" else f"$.{shown}"
    )


def _lookup(document: object, path: str) -> tuple[str, object]:
    """The field path as shown to people, and the value found there (None if not found).

    msgspec writes `[...]` for "some value of this mapping"; the only mapping values events have
    are strings, so the offending one is the first value that is not a string.
    """
    value, shown = document, ""
    for key, index in _PATH_STEP.findall(path):
        if key and isinstance(value, dict):
            value, shown = value.get(key), f"{shown}.{key}"
        elif index == "..." and isinstance(value, dict):
            bad = next(((k, v) for k, v in value.items() if not isinstance(v, str)), None)
            if bad is None:
                return f"{shown}[...]".lstrip("."), None
            value, shown = bad[1], f"{shown}[{msgspec.json.encode(bad[0]).decode()}]"
        elif index.isdigit() and isinstance(value, list) and int(index) < len(value):
            value, shown = value[int(index)], f"{shown}[{index}]"
        else:
            return path.lstrip("."), None
    return shown.lstrip(".") or "$", value
