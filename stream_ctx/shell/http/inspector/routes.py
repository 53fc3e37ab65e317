"""The inspector's routes: four server-rendered pages, a live-update stream, a bearer-token gate."""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import anyio
import msgspec
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route, Router
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from stream_ctx.core.window.accumulator import RankedItem
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.errors import ConfigError
from stream_ctx.shell.http.inspector.history import InspectorHistory
from stream_ctx.shell.http.inspector.overview import Series, read_totals
from stream_ctx.shell.http.inspector.views import (
    bundle_page,
    conversation_summary,
    live_figures,
    saved_fraction,
    window_rows,
)
from stream_ctx.shell.http.metrics import Metrics

__all__ = (
    "PREFIX",
    "Inspector",
    "WindowSource",
    "inspector_routes",
    "is_local",
    "required_token",
    "sampling",
)

PREFIX = "/inspect"
# Live pages update this often; the overview's rates are per-second samples too.
_TICK_S = 1.0
# The conversations page lists at most this many (most recent first); search finds the rest.
_LIST_LIMIT = 200
_COOKIE = "stream_ctx_inspector"

WindowSource = Callable[[str], tuple[list[RankedItem], int] | None]
"""A conversation's window ranked at its partition's stream time, and that time; None if unheld."""


def is_local(host: str) -> bool:
    """Whether a bind address only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def required_token(host: str, token: str | None) -> str | None:
    """The token the inspector demands on `host`: none on loopback, else a configured one."""
    if is_local(host):
        return token or None
    if not token:
        raise ConfigError(
            f"`metrics.inspector_token` must be set when the inspector binds {host!r}, not "
            "127.0.0.1: it shows conversation content (or set STREAM_CTX_METRICS_INSPECTOR_TOKEN)"
        )
    return token


@dataclass(slots=True)
class Inspector:
    """What the pages read: the processor's registry and windows, and the bounded history."""

    metrics: Metrics
    history: InspectorHistory
    windows: WindowSource
    config: BundleConfig
    series: Series = field(default_factory=Series)

    def sample(self) -> None:
        self.series.sample(read_totals(self.metrics.registry), now_s=time.monotonic())


class _TokenGate:
    """Lets a request through with `Authorization: Bearer <token>` or the cookie a
    `?token=<token>` visit sets (browsers cannot add headers to links or EventSource)."""

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self._app, self._token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._token is None or scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        request = Request(scope)
        offered = request.query_params.get("token")
        if offered is not None and self._matches(offered):
            response: Response = RedirectResponse(request.url.remove_query_params("token"), 303)
            response.set_cookie(_COOKIE, offered, httponly=True, samesite="strict")
        elif self._matches(_bearer(request) or request.cookies.get(_COOKIE, "")):
            await self._app(scope, receive, send)
            return
        else:
            response = Response(
                "the inspector needs a bearer token\n",
                401,
                headers={"WWW-Authenticate": "Bearer"},
                media_type="text/plain",
            )
        await response(scope, receive, send)

    def _matches(self, offered: str) -> bool:
        expected = self._token
        return expected is not None and hmac.compare_digest(offered.encode(), expected.encode())


def _bearer(request: Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value if scheme.lower() == "bearer" else None


def inspector_routes(inspector: Inspector, *, token: str | None) -> list[BaseRoute]:
    """`/` redirects to the overview; everything under `/inspect` passes the token gate."""
    env = Environment(
        loader=PackageLoader("stream_ctx.shell.http.inspector"), autoescape=select_autoescape()
    )
    env.globals["prefix"] = PREFIX

    def page(name: str, *, status: int = 200, **context: object) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**context), status)

    async def overview(_: Request) -> Response:
        figures = live_figures(read_totals(inspector.metrics.registry), inspector.series)
        return page("overview.html", live=figures)

    async def conversations(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        rows = []
        for conv in inspector.history.recent(containing=query, limit=_LIST_LIMIT):
            held = inspector.windows(conv.conversation_id)
            rows.append({**conversation_summary(conv), "held": len(held[0]) if held else 0})
        return page("conversations.html", rows=rows, query=query, total=len(inspector.history))

    async def conversation(request: Request) -> Response:
        cid = request.path_params["cid"]
        conv = inspector.history.get(cid)
        held = inspector.windows(cid)
        if conv is None and held is None:
            return page("missing.html", what=f"conversation {cid!r}", status=404)
        rows = []
        if held is not None:
            ranked, now_ms = held
            half_life = inspector.config.recency_half_life_days
            rows = window_rows(ranked, now_ms=now_ms, half_life_days=half_life)
        name = "_conversation.html" if "fragment" in request.query_params else "conversation.html"
        return page(name, cid=cid, conv=conv, window=rows, max_items=inspector.config.max_items)

    async def bundle(request: Request) -> Response:
        cid, seq = request.path_params["cid"], request.path_params["seq"]
        conv = inspector.history.get(cid)
        found = conv.bundle(seq) if conv is not None else None
        if found is None:
            what = f"bundle {cid}:{seq} (only the last ones are kept)"
            return page("missing.html", what=what, status=404)
        stats = found.stats
        return page(
            "bundle.html",
            bundle=found,
            view=bundle_page(found),
            saved=saved_fraction(stats.tokens_naive, stats.tokens_bundle),
        )

    async def stream(request: Request) -> Response:
        cid = request.query_params.get("c")
        return StreamingResponse(_updates(inspector, cid), media_type="text/event-stream")

    router = Router(
        routes=[
            Route("/", overview),
            Route("/conversations", conversations),
            Route("/c/{cid:path}/b/{seq:int}", bundle),
            Route("/c/{cid:path}", conversation),
            Route("/stream", stream),
            Mount("/static", StaticFiles(packages=[("stream_ctx.shell.http.inspector", "static")])),
        ]
    )
    return [
        Route("/", lambda _: RedirectResponse(f"{PREFIX}/")),
        Mount(PREFIX, app=_TokenGate(router, token=token)),
    ]


async def _updates(inspector: Inspector, cid: str | None) -> AsyncIterator[str]:
    """Server-sent events: the overview's figures (and a conversation's version) each tick."""
    while True:
        figures = live_figures(read_totals(inspector.metrics.registry), inspector.series)
        if cid is not None:
            conv = inspector.history.get(cid)
            figures["conversation_version"] = conv.version if conv is not None else 0
        yield f"data: {msgspec.json.encode(figures).decode()}\n\n"
        await anyio.sleep(_TICK_S)


@contextlib.asynccontextmanager
async def sampling(inspector: Inspector) -> AsyncIterator[None]:
    """Sample the overview's rates every tick while the app runs (its lifespan)."""

    async def sample_forever() -> None:
        while True:
            inspector.sample()
            await anyio.sleep(_TICK_S)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(sample_forever)
        yield
        tasks.cancel_scope.cancel()
