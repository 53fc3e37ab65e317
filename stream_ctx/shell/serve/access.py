"""The access log of serve: one line per HTTP request with its method, path, status, the tenant
its token names (never the token) and its duration, so a wrong token can be told from a
missing conversation."""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stream_ctx.shell.serve.tenant import Tenants

__all__ = ("AccessLog",)

log = logging.getLogger(__name__)


class AccessLog:
    """ASGI middleware logging each HTTP request once its response has started."""

    def __init__(self, app: ASGIApp, tenants: Tenants) -> None:
        self.app = app
        self.tenants = tenants

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def logged(message: Message) -> None:
            if message["type"] == "http.response.start":
                log.info(
                    "%s %s %d tenant=%s %.1f ms",
                    scope["method"],
                    scope["path"],
                    message["status"],
                    self._caller(scope),
                    (time.perf_counter() - started) * 1000,
                )
            await send(message)

        await self.app(scope, receive, logged)

    def _caller(self, scope: Scope) -> str:
        """The tenant's name; `-` with no tenants configured; `none` with no bearer token;
        `unknown` for a token no tenant has."""
        if self.tenants.is_open:
            return "-"
        headers = dict(scope["headers"])
        authorization = headers.get(b"authorization")
        if authorization is None:
            return "none"
        tenant = self.tenants.tenant_of(authorization.decode("latin-1"))
        return tenant.name if tenant is not None else "unknown"
