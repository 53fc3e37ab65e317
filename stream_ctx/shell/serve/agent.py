"""The MCP server: tool `get_context`, resource template of each conversation's context, and
`resources/updated` to subscribers when a new bundle lands; over streamable HTTP or stdio."""

from __future__ import annotations

import contextvars
import enum
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal
from urllib.parse import quote, unquote

import anyio
import anyio.abc
import msgspec
from cachetools import LRUCache
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.mcpserver.resources.templates import ResourceSecurity
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated, ServerEvent
from mcp_types import (
    CallToolResult,
    EmptyResult,
    SubscribeRequestParams,
    TextContent,
    UnsubscribeRequestParams,
)
from pydantic import Field

import stream_ctx
from stream_ctx.errors import BrokerError, InvalidEventError
from stream_ctx.shell.serve.finalizer import Finalizer, FinalizeTimeoutError
from stream_ctx.shell.serve.tenant import Tenants
from stream_ctx.shell.serve.view import BundleView, DuplicateRequestError

__all__ = ("ContextServer", "context_uri")

log = logging.getLogger(__name__)

_URI_PREFIX = "stream-ctx://conversations/"
_URI_TEMPLATE = _URI_PREFIX + "{conversation_id}/context"
# What a path segment holds unencoded besides letters, digits and `-._~` (RFC 3986 pchar).
_SEGMENT_SAFE = ":@!$&'()*+,;="
# Sessions remembered as having had the reading guide; an older one forgotten gets it again.
_GUIDE_SESSIONS = 10_000
# Resource URIs with subscribers on the pre-2026 protocol; the least recently subscribed go first.
# Each holds its sessions (the SDK caps them, `max_sessions`) until a send to one fails.
_LEGACY_URIS = 10_000
_INSTRUCTIONS = (
    "Context bundles of stream-ctx conversations. Call get_context(conversation_id) before"
    " answering to get the conversation's retrieved context, deduplicated and token-counted."
)

_ConversationId = Annotated[
    str,
    Field(
        description="The conversation's id, exactly as the platform sends it with its events"
        " (any text; ids are case-sensitive)."
    ),
]
_MaxTokens = Annotated[
    int | None,
    Field(
        description="Token budget of the returned context, at least 1 (items that do not fit"
        " are left out); omit for the server's default (`bundle.max_tokens`)."
    ),
]
_Mode = Annotated[
    Literal["full", "delta"] | None,
    Field(
        description="'full': the whole context. 'delta': only what changed since the previous"
        " context of this conversation, for a history that still holds every earlier one."
        " Omit for the server's default (`bundle.mode`)."
    ),
]
_Order = Annotated[
    Literal["priority", "stable", "edges"] | None,
    Field(
        description="Item order: 'priority' (most relevant first), 'stable' (the order items"
        " arrived, so an unchanged start stays cacheable), 'edges' (the most relevant at the"
        " start and the end, the least in the middle). Omit for the server's default."
    ),
]
_IncludeGuide = Annotated[
    bool | None,
    Field(
        description="Prepend the paragraph that explains how to read references (§n, ~n, ^n,"
        " quoted spans). Omit to get it with the first context of a session only."
    ),
]


# Over stdio the caller is the local user who launched serve: every conversation is theirs.
class _Local(enum.Enum):
    USER = "the local user"


_LOCAL = _Local.USER
# The Authorization header of the HTTP request being handled, or _LOCAL.
_caller: contextvars.ContextVar[str | _Local | None] = contextvars.ContextVar(
    "stream_ctx_mcp_caller", default=_LOCAL
)


def context_uri(conversation_id: str) -> str:
    """The resource URI of a conversation's latest context; the id percent-encoded but for the
    characters a URI path segment holds as they are (`a:conv-1` stays as it is)."""
    return f"{_URI_PREFIX}{quote(conversation_id, safe=_SEGMENT_SAFE)}/context"


class _TenantBus(InMemorySubscriptionBus):
    """The in-process bus, each listener limited to the conversations its caller may read."""

    def __init__(self, tenants: Tenants) -> None:
        super().__init__()
        self._tenants = tenants

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        caller = _caller.get()  # called inside the listen request's handler

        def allowed(event: ServerEvent) -> None:
            if isinstance(event, ResourceUpdated):
                cid = _conversation_of(event.uri)
                if cid is None or not _may_read(self._tenants, caller, cid):
                    return  # as a subscription to an unknown URI: honored, never fires
            listener(event)

        return super().subscribe(allowed)


class _LegacySubscriptions:
    """`resources/subscribe` of hosts on protocol versions before 2026-07-28 (they have no
    `subscriptions/listen`): the sessions that asked for each URI, told of each new bundle."""

    def __init__(self, tenants: Tenants) -> None:
        self._tenants = tenants
        self._sessions: LRUCache[str, set[ServerSession]] = LRUCache(maxsize=_LEGACY_URIS)

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        """Accepted alike for an unknown or a forbidden conversation; only readable ones fire."""
        cid = _conversation_of(params.uri)
        if cid is not None and _may_read(self._tenants, _caller.get(), cid):
            self._sessions.setdefault(params.uri, set()).add(ctx.session)
        return EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        sessions = self._sessions.get(params.uri)
        if sessions is not None:
            sessions.discard(ctx.session)
        return EmptyResult()

    async def notify(self, uri: str) -> None:
        for session in list(self._sessions.get(uri, ())):
            try:
                await session.send_resource_updated(uri)
            except Exception:
                self._sessions.get(uri, set()).discard(session)


class ContextServer:
    """Wires an MCPServer to the view: reads, finalizes and subscriptions, per tenant."""

    def __init__(self, view: BundleView, finalizer: Finalizer, tenants: Tenants) -> None:
        self.view = view
        self.finalizer = finalizer
        self.tenants = tenants
        self.bus = _TenantBus(tenants)
        self._guided: LRUCache[tuple[str, ...], bool] = LRUCache(maxsize=_GUIDE_SESSIONS)
        self.server: MCPServer = MCPServer(
            "stream-ctx",
            instructions=_INSTRUCTIONS,
            version=_version(),
            subscriptions=self.bus,
            middleware=[self._bind_caller],
            log_level="WARNING",  # basicConfig otherwise, when no handler is set yet
        )
        self.server.tool(
            name="get_context",
            description=(
                "Request a fresh context bundle for a conversation and return its context: the"
                " items retrieved for it, each repeated stretch written once and referred to, as"
                " the part the previous bundle sent too and the rest; exact token counts and the"
                " cache breakpoint come as structured content. Call it before answering a turn."
                " Use mode 'delta' when every earlier context this tool returned for the"
                " conversation is still in your history: you get only what changed since the"
                " last one (new and updated items, and which earlier ones to drop). Otherwise"
                " (first call, a trimmed or summarized history) use 'full'. An unknown or ended"
                " conversation is an error saying so."
            ),
        )(self.get_context)
        self.legacy = _LegacySubscriptions(tenants)
        # MCPServer serves only the 2026-07-28 `subscriptions/listen`; earlier hosts subscribe.
        lowlevel = self.server._lowlevel_server
        lowlevel.add_request_handler(
            "resources/subscribe", SubscribeRequestParams, self.legacy.subscribe
        )
        lowlevel.add_request_handler(
            "resources/unsubscribe", UnsubscribeRequestParams, self.legacy.unsubscribe
        )
        self.server.resource(
            _URI_TEMPLATE,
            name="conversation-context",
            description="The latest context of a conversation; subscribe for each new bundle.",
            mime_type="text/plain",
            # An id is not a file path: `..`, `a:b` or `/x` are ids like any other.
            security=ResourceSecurity(exempt_params={"conversation_id"}),
        )(self.read_context)

    async def get_context(
        self,
        conversation_id: _ConversationId,
        ctx: Context,
        max_tokens: _MaxTokens = None,
        mode: _Mode = None,
        order: _Order = None,
        include_guide: _IncludeGuide = None,
    ) -> CallToolResult:
        """Publish a finalize and return the context of the bundle answering it, after the
        reading guide when `include_guide` is true, or when None and this session lacks it."""
        if not _may_read(self.tenants, _caller.get(), conversation_id):
            raise ToolError(_unknown(conversation_id))
        try:
            kept = await self.finalizer.finalize(
                conversation_id, max_tokens=max_tokens, mode=mode, order=order
            )
        except (InvalidEventError, BrokerError, FinalizeTimeoutError, DuplicateRequestError) as exc:
            raise ToolError(str(exc)) from exc
        bundle = kept.bundle()
        # The part the previous bundle sent too, then the rest: a host caches up to the first.
        texts = [TextContent(type="text", text=part) for part in bundle.cache_blocks()]
        session = _session_of(ctx, conversation_id)
        if include_guide or (include_guide is None and session not in self._guided):
            texts.insert(0, TextContent(type="text", text=stream_ctx.READING_GUIDE))
        self._guided[session] = True
        stats: dict[str, Any] = {
            "bundle_id": bundle.bundle_id,
            "seq": bundle.seq,
            "mode": bundle.mode,
            **msgspec.structs.asdict(bundle.stats),
            "cache_breakpoint": msgspec.structs.asdict(bundle.cache_breakpoint),
        }
        return CallToolResult(content=list(texts), structured_content=stats)

    async def read_context(self, conversation_id: str) -> str:
        """The context text of the conversation's latest bundle."""
        is_allowed = _may_read(self.tenants, _caller.get(), conversation_id)
        kept = self.view.store.latest(conversation_id) if is_allowed else None
        if kept is None and is_allowed and not self.view.is_ready:
            done = self.view.progress
            raise ResourceError(
                f"serve is rebuilding its view ({done.records_read}/{done.records_total}"
                " records); retry shortly"
            )
        if kept is None:
            raise ResourceNotFoundError(_unknown(conversation_id))
        return kept.bundle().context

    async def run_notifier(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Publish `resources/updated` for each new bundle until cancelled (under a flood of
        bundles some updates are skipped rather than this task stopping)."""
        with self.view.subscribe(None, is_lossy=True) as bundles:
            task_status.started()
            async for kept in bundles:
                uri = context_uri(kept.head.conversation_id)
                await self.bus.publish(ResourceUpdated(uri=uri))
                await self.legacy.notify(uri)

    async def _bind_caller(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Each MCP request runs knowing its caller's Authorization header (HTTP only)."""
        headers = getattr(ctx.request, "headers", None)
        if headers is None:  # stdio: no HTTP request behind it
            return await call_next(ctx)
        token = _caller.set(headers.get("authorization"))
        try:
            return await call_next(ctx)
        finally:
            _caller.reset(token)


def _session_of(ctx: Context, conversation_id: str) -> tuple[str, ...]:
    """What "a session" is on each transport: the stdio process; an HTTP session's id; and on
    the sessionless 2026-07-28 HTTP wire, one caller's requests about one conversation."""
    headers = getattr(ctx.request_context.request, "headers", None)
    if headers is None:
        return ("stdio",)
    session_id = headers.get("mcp-session-id")
    if session_id:
        return ("session", session_id)
    return ("caller", headers.get("authorization") or "", conversation_id)


def _may_read(tenants: Tenants, caller: str | _Local | None, conversation_id: str) -> bool:
    """The local user reads everything; an HTTP caller what its token allows."""
    return isinstance(caller, _Local) or tenants.may_read(caller, conversation_id)


def _conversation_of(uri: str) -> str | None:
    if not (uri.startswith(_URI_PREFIX) and uri.endswith("/context")):
        return None
    return unquote(uri[len(_URI_PREFIX) : -len("/context")]) or None


def _unknown(conversation_id: str) -> str:
    return f"no bundle of conversation {conversation_id!r} is held here"


def _version() -> str:
    import importlib.metadata

    return importlib.metadata.version("stream-ctx")
