"""One ASGI app (Starlette) for /metrics, the probes and the inspector, served by Hypercorn."""

from __future__ import annotations

import logging
import socket
from typing import cast

import anyio
import anyio.abc
from hypercorn.asyncio import serve
from hypercorn.config import Config
from hypercorn.typing import ASGIFramework
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from stream_ctx.shell.http.inspector.routes import (
    Inspector,
    inspector_routes,
    sampling,
)
from stream_ctx.shell.http.metrics import Health, Metrics

__all__ = ("http_app", "run_http_server")

log = logging.getLogger(__name__)

# A client that sends no request in this long is dropped (Hypercorn's keep-alive timeout
# counts from the connection's start), so idle sockets do not pile up.
_IDLE_TIMEOUT_S = 5.0
# A probe or scrape request is one short line and a few headers; 8 KiB is what most servers allow.
_MAX_REQUEST_HEAD_BYTES = 8192
# On shutdown, open requests (live-update streams) get this long to finish before being cut.
_GRACEFUL_TIMEOUT_S = 1.0


def _probe_routes(metrics: Metrics, health: Health) -> list[BaseRoute]:
    """GET /metrics, /healthz and /readyz: open to anyone, they hold no conversation content."""

    async def scrape(_: Request) -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    async def healthz(_: Request) -> Response:
        reason = health.stalled_reason
        if reason is None:
            return PlainTextResponse("ok\n")
        return PlainTextResponse(f"stalled: {reason}\n", 503)

    async def readyz(_: Request) -> Response:
        is_ok = health.is_ready
        return PlainTextResponse("ready\n" if is_ok else "not ready\n", 200 if is_ok else 503)

    return [
        Route("/metrics", scrape, methods=["GET", "HEAD"]),
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Route("/readyz", readyz, methods=["GET", "HEAD"]),
    ]


def http_app(
    metrics: Metrics,
    health: Health,
    *,
    inspector: Inspector | None = None,
    token: str | None = None,
) -> Starlette:
    """The probes, and the inspector if given (behind `token` if set); anything else is a 404."""

    async def not_found(_: Request, __: Exception) -> Response:
        return PlainTextResponse("not found: try /metrics, /healthz or /readyz\n", 404)

    routes: list[BaseRoute] = _probe_routes(metrics, health)
    if inspector is None:
        return Starlette(routes=routes, exception_handlers={404: not_found})
    return Starlette(
        routes=[*routes, *inspector_routes(inspector, token=token)],
        exception_handlers={404: not_found},
        lifespan=lambda _: sampling(inspector),
    )


async def run_http_server(
    app: Starlette,
    *,
    host: str,
    port: int,
    idle_timeout_s: float = _IDLE_TIMEOUT_S,
    what: str = "metrics and health on http://{}/metrics",
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` until cancelled, then shut down gracefully; `port=0` picks a free port.

    Hypercorn is given the shutdown trigger, so it installs no signal handlers: SIGTERM stays
    the service's to drain the processor.
    """
    listener = socket.create_server((host, port), family=_family(host))
    bound: int = listener.getsockname()[1]
    config = Config()
    config.bind = [f"fd://{listener.detach()}"]  # Hypercorn owns and closes the socket
    config.keep_alive_timeout = idle_timeout_s
    config.h11_max_incomplete_size = _MAX_REQUEST_HEAD_BYTES
    config.graceful_timeout = _GRACEFUL_TIMEOUT_S
    config.accesslog = None  # request lines may carry conversation ids: no content in logs
    config.errorlog = log
    stopping = anyio.Event()

    async def run_to_completion() -> None:
        with anyio.CancelScope(shield=True):  # a cancelled serve would leak its connections
            # Starlette's ASGI types are looser than Hypercorn's; the protocol is the same.
            asgi = cast(ASGIFramework, app)
            await serve(asgi, config, shutdown_trigger=stopping.wait, mode="asgi")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run_to_completion)
        log.info(what.format(f"{host}:{bound}"))
        task_status.started(bound)
        try:
            await anyio.sleep_forever()
        finally:
            stopping.set()


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
