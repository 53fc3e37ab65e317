"""stream-ctx: retrieval events in, small, lossless, token-counted prompt context out.

These names are the API, with `stream_ctx.settings` (the config file). Every other module
(`stream_ctx.core`, `stream_ctx.shell`, `stream_ctx.corpora`) is internal and may change in any
release. `import stream_ctx` loads no Kafka client: `ContextClient` is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stream_ctx.core.assembly.rebuild import rebuild_full
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.entries.reader import read_context
from stream_ctx.core.entries.render import READING_GUIDE
from stream_ctx.core.window.config import PRESETS, BundleConfig
from stream_ctx.core.wire.bundle import Bundle
from stream_ctx.core.wire.codec import decode_event
from stream_ctx.core.wire.events import End, Event, Finalize, Retrieval, RetrievedItem
from stream_ctx.errors import ConfigError, InvalidEventError, StreamCtxError

__all__ = (
    "PRESETS",
    "READING_GUIDE",
    "Bundle",
    "BundleConfig",
    "ConfigError",
    "ContextClient",
    "ContextProcessor",
    "End",
    "Event",
    "Finalize",
    "InvalidEventError",
    "Retrieval",
    "RetrievedItem",
    "StreamCtxError",
    "decode_event",
    "read_context",
    "rebuild_full",
)


if TYPE_CHECKING:
    from stream_ctx.client import ContextClient
else:
    # Out of mypy's sight, so a name outside the API stays a type error, not an `object`.
    def __getattr__(name: str) -> object:
        """`ContextClient` on first use: the client imports aiokafka; the core never needs it."""
        if name == "ContextClient":
            from stream_ctx.client import ContextClient

            return ContextClient
        raise AttributeError(f"module 'stream_ctx' has no attribute {name!r}")
