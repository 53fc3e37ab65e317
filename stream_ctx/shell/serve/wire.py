"""The HTTP API's request and error bodies, and how a refused body is described."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import msgspec
import msgspec.inspect
from msgspec import Meta

from stream_ctx.core.wire.events import BundleMode, History, RenderOrder
from stream_ctx.validation import invalid

__all__ = ("ConversationList", "ErrorBody", "FinalizeRequest", "HeldConversation", "describe_error")


class FinalizeRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """POST .../finalize: every field optional; the configured bundle settings fill the rest."""

    max_tokens: Annotated[int, Meta(ge=1)] | None = None
    order: RenderOrder | None = None
    mode: BundleMode | None = None
    history: History | None = None
    # Unique per conversation; a fresh uuid4 unless given.
    request_id: Annotated[str, Meta(min_length=1, max_length=200)] | None = None


class HeldConversation(msgspec.Struct, frozen=True):
    """A conversation the view holds, by its latest bundle."""

    conversation_id: str
    bundle_id: str
    seq: int


class ConversationList(msgspec.Struct, frozen=True):
    """GET /v1/conversations: held conversations this caller may read, by id, and whether
    `limit` cut the list short."""

    conversations: list[HeldConversation]
    is_truncated: bool


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
    """A request body msgspec refused, as one line naming the field and the value."""
    if not isinstance(exc, msgspec.ValidationError):
        return f"the request body is not valid JSON: {exc}"
    try:
        document = msgspec.json.decode(raw)
    except msgspec.DecodeError:  # refused for its type before the broken JSON was reached
        document = None
    found = invalid(exc, document)
    if found.kind == "choice" and found.path in _CHOICES:
        allowed = ", ".join(repr(c) for c in sorted(map(str, _CHOICES[found.path])))
        found = dataclasses.replace(found, problem=f"expected one of {allowed}")
    return found.describe("the request body")
