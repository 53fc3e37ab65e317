"""The HTTP API over the view: the latest bundle, a kept one, finalize, a stream of new ones."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import quote

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from stream_ctx.errors import BrokerError, FinalizeRefusedError, InvalidEventError, StreamCtxError
from stream_ctx.shell.serve.finalizer import Finalizer, FinalizeTimeoutError
from stream_ctx.shell.serve.openapi import openapi_document
from stream_ctx.shell.serve.store import Kept
from stream_ctx.shell.serve.tenant import Tenants
from stream_ctx.shell.serve.view import BundleView, DuplicateRequestError
from stream_ctx.shell.serve.wire import (
    ConversationList,
    ErrorBody,
    FinalizeRequest,
    HeldConversation,
    describe_error,
)

__all__ = ("HttpApi", "RequestError")

log = logging.getLogger(__name__)

# An event stream ends after this long (EventSource reconnects), so no connection lives forever.
_STREAM_MAX_S = 3600.0
# A comment line this often keeps proxies from cutting an idle event stream.
_KEEPALIVE_S = 15.0
# Frames one stream may send before it ends: at one per keepalive, more than _STREAM_MAX_S holds.
_STREAM_MAX_FRAMES = 100_000
# Conversations one GET /v1/conversations lists by default, and at most (`?limit=`).
_LIST_DEFAULT, _LIST_MAX = 100, 10_000
_encoder = msgspec.json.Encoder()
_request_decoder = msgspec.json.Decoder(FinalizeRequest)
_BASE = "/v1/conversations/{conversation_id:path}"
# Printable ASCII an entity tag may hold as it is (not `"`, `%`, a space or a backslash).
_ID_SAFE = "!#$&'()*+,/:;=?@[]^`{|}~<>"
_Handler = Callable[[Request, str], Awaitable[Response]]
_Endpoint = Callable[[Request], Awaitable[Response]]


class RequestError(StreamCtxError):
    """A request answered with `status` and a message naming the field and value."""

    def __init__(self, status: int, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class HttpApi:
    """The routes of `stream-ctx serve`; every one checks the tenant before it looks anything up."""

    def __init__(
        self, view: BundleView, finalizer: Finalizer, tenants: Tenants, *, max_body_bytes: int
    ) -> None:
        self.view = view
        self.finalizer = finalizer
        self.tenants = tenants
        self.max_body_bytes = max_body_bytes
        self._openapi = _encoder.encode(openapi_document())

    def routes(self) -> list[BaseRoute]:
        """Stream before the seq route: both match `.../bundles/<something>`."""
        return [
            Route("/v1/openapi.json", self._openapi_json, methods=["GET"]),
            Route("/healthz", self._healthz, methods=["GET", "HEAD"]),
            Route("/readyz", self._readyz, methods=["GET", "HEAD"]),
            Route("/v1/conversations", self._list, methods=["GET"]),
            Route(f"{_BASE}/bundle", self._guarded(self._latest), methods=["GET", "HEAD"]),
            Route(f"{_BASE}/bundles/stream", self._guarded(self._stream), methods=["GET"]),
            Route(f"{_BASE}/bundles/{{seq}}", self._guarded(self._by_seq), methods=["GET"]),
            Route(f"{_BASE}/finalize", self._guarded(self._finalize), methods=["POST"]),
        ]

    def _guarded(self, handler: _Handler) -> _Endpoint:
        async def endpoint(request: Request) -> Response:
            cid: str = request.path_params["conversation_id"]
            try:
                if not cid:
                    raise RequestError(400, "`conversation_id` must not be empty, got ''")
                if not self.tenants.may_read(request.headers.get("authorization"), cid):
                    raise _unknown(cid)
                return await handler(request, cid)
            except RequestError as exc:
                return _error(exc.status, str(exc), exc.headers)

        return endpoint

    async def _openapi_json(self, _: Request) -> Response:
        return Response(self._openapi, media_type="application/json")

    async def _healthz(self, _: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def _readyz(self, _: Request) -> Response:
        done = self.view.progress
        if self.view.is_ready:
            return PlainTextResponse("ready\n")
        text = f"rebuilding: {done.records_read}/{done.records_total} records\n"
        return PlainTextResponse(text, 503, headers={"Retry-After": "1"})

    async def _list(self, request: Request) -> Response:
        """Held conversations the caller may read, by id: an unknown token sees none."""
        try:
            prefix = request.query_params.get("prefix", "")
            limit = _limit(request.query_params.get("limit"))
        except RequestError as exc:
            return _error(exc.status, str(exc), exc.headers)
        authorization = request.headers.get("authorization")
        held = sorted(
            (
                HeldConversation(h.conversation_id, h.bundle_id, h.seq)
                for h in self.view.store.heads()
                if h.conversation_id.startswith(prefix)
                and self.tenants.may_read(authorization, h.conversation_id)
            ),
            key=lambda h: h.conversation_id,
        )
        body = ConversationList(held[:limit], is_truncated=len(held) > limit)
        return Response(_encoder.encode(body), media_type="application/json")

    async def _latest(self, request: Request, cid: str) -> Response:
        shape = request.query_params.get("format", "json")
        if shape not in ("json", "context"):
            raise RequestError(400, f"`format` must be 'json' or 'context', got {shape!r}")
        kept = self._held(cid, self.view.store.latest(cid))
        etag = _etag(kept)
        if _matches(request.headers.get("if-none-match"), etag):
            return Response(status_code=304, headers={"ETag": etag})
        if shape == "context":
            bundle = kept.bundle()
            point = bundle.cache_breakpoint
            headers = _cache_headers(etag)
            headers["X-Cache-Breakpoint"] = f"chars={point.chars}, tokens={point.tokens}"
            return PlainTextResponse(bundle.context, headers=headers)
        return _bundle_response(kept)

    async def _by_seq(self, request: Request, cid: str) -> Response:
        text = request.path_params["seq"]
        if not text.isdigit():
            raise RequestError(400, f"`seq` must be an integer >= 0, got {text!r}")
        return _bundle_response(self._held(cid, self.view.store.by_seq(cid, int(text))))

    async def _finalize(self, request: Request, cid: str) -> Response:
        raw = await self._body(request)
        try:
            body = _request_decoder.decode(raw) if raw.strip() else FinalizeRequest()
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise RequestError(400, describe_error(exc, raw)) from exc
        try:
            kept = await self.finalizer.finalize(
                cid,
                max_tokens=body.max_tokens,
                order=body.order,
                mode=body.mode,
                history=body.history,
                request_id=body.request_id,
            )
        except FinalizeRefusedError as exc:
            raise RequestError(404 if exc.reason == "unknown" else 409, str(exc)) from exc
        except InvalidEventError as exc:
            raise RequestError(400, str(exc)) from exc
        except DuplicateRequestError as exc:
            raise RequestError(409, str(exc)) from exc
        except BrokerError as exc:
            raise RequestError(503, str(exc), headers={"Retry-After": "1"}) from exc
        except FinalizeTimeoutError as exc:
            raise RequestError(504, str(exc)) from exc
        return _bundle_response(kept)

    async def _stream(self, _: Request, cid: str) -> Response:
        return StreamingResponse(
            self._events(cid),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _events(self, cid: str) -> AsyncIterator[bytes]:
        """One `bundle` event per new bundle, keepalive comments between; ends with the view."""
        with self.view.subscribe(cid) as bundles, anyio.move_on_after(_STREAM_MAX_S):
            yield b": stream-ctx bundles of this conversation\n\n"
            for _ in range(_STREAM_MAX_FRAMES):
                with anyio.move_on_after(_KEEPALIVE_S) as idle:
                    try:
                        kept = await bundles.receive()
                    except anyio.EndOfStream:
                        return
                if idle.cancelled_caught:
                    yield b": keepalive\n\n"
                    continue
                yield b"id: %s\nevent: bundle\ndata: %s\n\n" % (
                    _encoded_id(kept).encode(),
                    kept.raw,
                )

    async def _body(self, request: Request) -> bytes:
        """The body, refused with a 413 past `max_body_bytes` without reading the rest."""
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                raise RequestError(
                    413,
                    f"the request body is over {self.max_body_bytes} bytes"
                    " (`serve.max_body_bytes`)",
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _held(self, cid: str, kept: Kept | None) -> Kept:
        if kept is not None:
            return kept
        if not self.view.is_ready:
            progress = self.view.progress
            raise RequestError(
                503,
                f"serve is rebuilding its view ({progress.records_read}/"
                f"{progress.records_total} records); retry shortly",
                headers={"Retry-After": "1"},
            )
        raise _unknown(cid)


def _limit(text: str | None) -> int:
    if text is None:
        return _LIST_DEFAULT
    if not text.isdigit() or not 1 <= int(text) <= _LIST_MAX:
        raise RequestError(400, f"`limit` must be an integer in [1, {_LIST_MAX}], got {text!r}")
    return int(text)


def _unknown(cid: str) -> RequestError:
    """The one answer for a conversation that is not here or not this token's to see."""
    return RequestError(404, f"no bundle of conversation {cid!r} is held here")


def _matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    tags = [t.strip().removeprefix("W/") for t in if_none_match.split(",")]
    return "*" in tags or etag in tags


def _encoded_id(kept: Kept) -> str:
    """The bundle id percent-encoded past printable ASCII, quotes and percent signs: headers
    and event-stream lines carry any Unicode id this way (`c-1:2` stays as it is)."""
    return quote(kept.head.bundle_id, safe=_ID_SAFE)


def _etag(kept: Kept) -> str:
    return f'"{_encoded_id(kept)}"'


def _cache_headers(etag: str) -> dict[str, str]:
    return {"ETag": etag, "Cache-Control": "no-cache"}


def _bundle_response(kept: Kept) -> Response:
    headers = _cache_headers(_etag(kept))
    return Response(kept.raw, media_type="application/json", headers=headers)


def _error(status: int, message: str, headers: dict[str, str]) -> Response:
    return Response(
        _encoder.encode(ErrorBody(message)),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )
