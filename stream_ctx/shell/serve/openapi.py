"""The OpenAPI document of the HTTP API: schemas generated from the msgspec types."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import msgspec

from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.shell.serve.wire import ConversationList, ErrorBody, FinalizeRequest

__all__ = ("openapi_document",)

_REF = "#/components/schemas/{name}"
_ID = {"name": "conversation_id", "in": "path", "required": True, "schema": {"type": "string"}}
_ERRORS = {
    "400": "a query or body field is wrong; the message names it and its value",
    "404": "no such conversation, or not one this token may read (the two look alike; a"
    " finalize of a conversation with no events is refused so)",
    "413": "the body is larger than `serve.max_body_bytes`",
    "503": "serve is rebuilding its view, or the broker cannot be reached",
}


def openapi_document() -> dict[str, Any]:
    """OpenAPI 3.1: the routes of stream_ctx.shell.serve.api with the wire types' schemas."""
    (bundle, request, error, listing), components = msgspec.json.schema_components(
        (Bundle, FinalizeRequest, ErrorBody, ConversationList), ref_template=_REF
    )
    etag = {"ETag": {"description": "the bundle id", "schema": {"type": "string"}}}
    paths = {
        "/v1/conversations": {
            "get": {
                "summary": "Held conversations this token may read, by id, with their latest"
                " bundle's id",
                "parameters": [
                    {"name": "prefix", "in": "query", "schema": {"type": "string"}},
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 10_000},
                    },
                ],
                "responses": {
                    "200": _json(listing, "the conversations, sorted by id"),
                    "400": _json(error, _ERRORS["400"]),
                },
            }
        },
        "/v1/conversations/{conversation_id}/bundle": {
            "get": _operation(
                "The latest bundle (`?format=context`: its context text only)",
                {
                    "200": _json(bundle, "the latest bundle", etag, text=True),
                    "304": {"description": "`If-None-Match` names the latest bundle"},
                },
                error,
                params=[
                    _ID,
                    {
                        "name": "format",
                        "in": "query",
                        "schema": {"enum": ["json", "context"], "default": "json"},
                    },
                ],
            )
        },
        "/v1/conversations/{conversation_id}/bundles/{seq}": {
            "get": _operation(
                "One kept bundle by its sequence number",
                {"200": _json(bundle, "the bundle", etag)},
                error,
                params=[
                    _ID,
                    {"name": "seq", "in": "path", "required": True, "schema": {"type": "integer"}},
                ],
            )
        },
        "/v1/conversations/{conversation_id}/finalize": {
            "post": {
                **_operation(
                    "Publish a finalize; answers with its bundle once it is on the output topic",
                    {
                        "200": _json(bundle, "the bundle answering this finalize", etag),
                        "409": _json(
                            error,
                            "the conversation ended or expired (refused, saying which), or this"
                            " `request_id` is already waiting",
                        ),
                        "504": _json(error, "no bundle within `serve.finalize_timeout_s`"),
                    },
                    error,
                    params=[_ID],
                ),
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": request}},
                },
            }
        },
        "/v1/conversations/{conversation_id}/bundles/stream": {
            "get": _operation(
                "Server-sent events: one `bundle` event per new bundle, its JSON as data",
                {"200": {"description": "an event stream", "content": {"text/event-stream": {}}}},
                error,
                params=[_ID],
            )
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "stream-ctx serve", "version": importlib.metadata.version("stream-ctx")},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
    }


def _operation(
    summary: str, responses: dict[str, Any], error: dict[str, Any], *, params: list[Any]
) -> dict[str, Any]:
    errors = {code: _json(error, text) for code, text in _ERRORS.items()}
    return {"summary": summary, "parameters": params, "responses": {**responses, **errors}}


def _json(
    schema: dict[str, Any],
    description: str,
    headers: dict[str, Any] | None = None,
    *,
    text: bool = False,
) -> dict[str, Any]:
    content: dict[str, Any] = {"application/json": {"schema": schema}}
    if text:
        content["text/plain"] = {"schema": {"type": "string"}}
    return {
        "description": description,
        "content": content,
        **({"headers": headers} if headers else {}),
    }
