"""`stream-ctx serve`: the view, the finalizer, the HTTP API and the MCP server, wired."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TextIO
from urllib.parse import quote

import anyio
import anyio.abc
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount

from stream_ctx.errors import BrokerError, ConfigError, StreamCtxError
from stream_ctx.settings import Settings
from stream_ctx.shell.http.server import run_http_server
from stream_ctx.shell.serve.access import AccessLog
from stream_ctx.shell.serve.agent import ContextServer
from stream_ctx.shell.serve.api import HttpApi
from stream_ctx.shell.serve.finalizer import Finalizer
from stream_ctx.shell.serve.store import BundleStore
from stream_ctx.shell.serve.tenant import Tenants
from stream_ctx.shell.serve.view import BundleView

__all__ = ("Serving", "run_serve", "serve_for_demo", "serving")

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
# An idle keep-alive connection is closed after this long: agents pause for a model's answer
# (seconds to tens of seconds) between requests, and reconnecting each turn costs a handshake.
_IDLE_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Serving:
    """A running serve: its parts, and the HTTP port (None over stdio)."""

    view: BundleView
    finalizer: Finalizer
    mcp: ContextServer
    port: int | None
    host: str = "127.0.0.1"

    @property
    def base_url(self) -> str:
        """Where the HTTP API and the MCP endpoint (`/mcp`) answer."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


@contextlib.asynccontextmanager
async def serving(
    settings: Settings,
    *,
    stdio: bool = False,
    environ: Mapping[str, str] | None = None,
    is_rebuilt_first: bool = True,
) -> AsyncIterator[Serving]:
    """Start serve and yield, once the view has caught up with the topic unless told not to
    wait (an MCP host launching serve over stdio times out on a long rebuild); stop on exit."""
    config = settings.serve
    tenants = Tenants.from_table(config.tenants, environ=os.environ if environ is None else environ)
    if not stdio:
        tenants.check_host(config.host)
    store = BundleStore(max_conversations=config.max_conversations, max_bundles=config.max_bundles)
    view = BundleView(settings.kafka, store)
    async with anyio.create_task_group() as tasks:
        await tasks.start(view.run)
        async with Finalizer(view, timeout_s=config.finalize_timeout_s) as finalizer:
            agent = ContextServer(view, finalizer, tenants)
            await tasks.start(agent.run_notifier)
            port = None
            if not stdio:
                port = await tasks.start(_serve_http, view, finalizer, agent, settings, tenants)
            if is_rebuilt_first:
                await _rebuilt(view, timeout_s=settings.state.restore_timeout_s)
            try:
                yield Serving(view, finalizer, agent, port, config.host)
            finally:
                tasks.cancel_scope.cancel()


async def run_serve(settings: Settings, *, stdio: bool = False) -> None:
    """Serve until SIGTERM or SIGINT (or, over stdio, until the host closes the pipe)."""
    try:
        await _run(settings, stdio=stdio)
    except BaseExceptionGroup as group:
        # One failure (a missing topic, an unreachable broker) is reported as itself.
        lone = _lone(group)
        if isinstance(lone, StreamCtxError):
            raise lone from None
        raise


async def _run(settings: Settings, *, stdio: bool) -> None:
    if stdio:
        async with serving(settings, stdio=True, is_rebuilt_first=False) as running:
            await running.mcp.server.run_stdio_async()
        return
    # Watched from the start: a SIGTERM during the rebuild stops serve as cleanly as after it.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_cancel_on_signal, signals, tasks.cancel_scope)
            async with serving(settings) as running:
                log.info(
                    "serving %d conversations: HTTP API on %s/v1, MCP on %s%s; %s",
                    len(running.view.store),
                    running.base_url,
                    running.base_url,
                    MCP_PATH,
                    _access(running.mcp.tenants),
                )
                await anyio.sleep_forever()


def _lone(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception inside nested groups of one, if that is what `group` is."""
    inner: BaseException = group
    for _ in range(10):  # task groups nest a few deep here
        if not isinstance(inner, BaseExceptionGroup) or len(inner.exceptions) != 1:
            break
        inner = inner.exceptions[0]
    return None if isinstance(inner, BaseExceptionGroup) else inner


async def _cancel_on_signal(signals: AsyncIterator[int], scope: anyio.CancelScope) -> None:
    async for signum in signals:
        log.info("%s: stopping", signal.Signals(signum).name)
        scope.cancel()
        return


def _access(tenants: Tenants) -> str:
    """Who may read what, for the start line: tenant names and prefixes, never tokens."""
    if tenants.is_open:
        return "open to anyone on this machine (no tenants)"
    return "tenants " + ", ".join(f"{t.name} {list(t.prefixes)}" for t in tenants.tenants)


async def _rebuilt(view: BundleView, *, timeout_s: float) -> None:
    """Wait until the view holds every bundle that was on the topic at start."""
    with anyio.move_on_after(timeout_s):
        await view.rebuilt.wait()
    if not view.is_ready:
        done = view.progress
        raise BrokerError(
            f"the view of {view.kafka.output_topic!r} was not rebuilt within {timeout_s} s"
            f" (`state.restore_timeout_s`): {done.records_read}/{done.records_total} records"
        )


async def _serve_http(
    view: BundleView,
    finalizer: Finalizer,
    agent: ContextServer,
    settings: Settings,
    tenants: Tenants,
    *,
    task_status: anyio.abc.TaskStatus[int],
) -> None:
    config = settings.serve
    api = HttpApi(view, finalizer, tenants, max_body_bytes=config.max_body_bytes)
    mcp_app = agent.server.streamable_http_app(
        streamable_http_path="/",
        max_request_body_size=config.max_body_bytes,
        host=config.host,
    )

    async def not_found(_: Request, __: Exception) -> Response:
        return Response(
            b'{"error":"not found: see /v1/openapi.json"}', 404, media_type="application/json"
        )

    app = Starlette(
        routes=[*api.routes(), Mount(MCP_PATH, app=mcp_app)],
        exception_handlers={404: not_found},
        middleware=[Middleware(AccessLog, tenants=tenants)],
    )
    async with agent.server.session_manager.run():
        try:
            await run_http_server(
                app,
                host=config.host,
                port=config.port,
                idle_timeout_s=_IDLE_TIMEOUT_S,
                what="serve listening on http://{}",
                task_status=task_status,
            )
        except OSError as exc:
            raise ConfigError(
                f"`serve.port` {config.port} on `serve.host` {config.host!r} cannot be served:"
                f" {exc.strerror or exc}"
            ) from exc


async def serve_for_demo(
    settings: Settings, *, conversation_id: str, out: TextIO, until: anyio.Event
) -> None:
    """`stream-ctx demo --serve`: serve the demo's bundles, print how to reach them, wait."""
    async with serving(settings) as running:
        url = f"{running.base_url}/v1/conversations/{quote(conversation_id, safe='')}/bundle"
        out.write(
            f"serve: HTTP API on {running.base_url}/v1 (described at /v1/openapi.json),"
            f" MCP (streamable HTTP) on {running.base_url}{MCP_PATH}\n"
            f"try:   curl -s '{url}?format=context'\n"
            "Ctrl-C to stop\n"
        )
        out.flush()
        await until.wait()
