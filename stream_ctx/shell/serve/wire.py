"""The HTTP API's request and error bodies, and the one adapter from msgspec's error text."""

from __future__ import annotations

import re
from typing import Annotated

import msgspec
import msgspec.inspect
from msgspec import Meta

from stream_ctx.core.events import BundleMode, History, RenderOrder

__all__ = ("ErrorBody", "FinalizeRequest", "describe_error")

_PATH = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]+)`")
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<field>[^`]+)`")
_GOT_TYPE = re.compile(r", got `[^`]+`$")
# Long values are cut in messages, so an error never echoes a whole oversized body.
_VALUE_REPR_LIMIT = 120


class FinalizeRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """POST .../finalize: every field optional; the configured bundle settings fill the rest."""

    max_tokens: Annotated[int, Meta(ge=1)] | None = None
    order: RenderOrder | None = None
    mode: BundleMode | None = None
    history: History | None = None
    # Unique per conversation; a fresh uuid4 unless given.
    request_id: Annotated[str, Meta(min_length=1, max_length=200)] | None = None


class ErrorBody(msgspec.Struct, frozen=True):
    """Every 4xx and 5xx: what was wrong, naming the field and the value."""

    error: str


def _choices() -> dict[str, tuple[object, ...]]:
    """The allowed values of each enumerated field of FinalizeRequest, from its type."""
    info = msgspec.inspect.type_info(FinalizeRequest)
    assert isinstance(info, msgspec.inspect.StructType)  # noqa: S101 - a Struct's info is one
    found: dict[str, tuple[object, ...]] = {}
    for field in info.fields:
        kinds = field.type.types if isinstance(field.type, msgspec.inspect.UnionType) else ()
        for kind in kinds:
            if isinstance(kind, msgspec.inspect.LiteralType):
                found[field.name] = kind.values
    return found


_CHOICES = _choices()


def describe_error(exc: msgspec.ValidationError | msgspec.DecodeError, raw: bytes) -> str:
    """msgspec's message for a request body, rewritten as "`max_tokens`: ..., got 0"."""
    message = str(exc)
    if isinstance(exc, msgspec.DecodeError) and not isinstance(exc, msgspec.ValidationError):
        return f"the request body is not valid JSON: {message}"
    found = _PATH.search(message)
    path = found.group("path") if found else ""
    reason = _GOT_TYPE.sub("", message[: found.start()] if found else message)
    for pattern, says in ((_MISSING, "is required"), (_UNKNOWN, "is not a field of the body")):
        match = pattern.match(reason)
        if match:
            return f"`{'.'.join(p for p in (path, match.group('field')) if p)}` {says}"
    try:
        document = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        document = None
    if not path:
        return f"the request body {reason[0].lower()}{reason[1:]}, got {_shown(document)}"
    value = document.get(path) if isinstance(document, dict) else None
    if reason.startswith("Invalid enum value") and path in _CHOICES:
        reason = "expected one of " + ", ".join(repr(c) for c in sorted(map(str, _CHOICES[path])))
    return f"`{path}`: {reason}, got {_shown(value)}"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _VALUE_REPR_LIMIT else text[:_VALUE_REPR_LIMIT] + "..."
