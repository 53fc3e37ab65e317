"""Every exception stream-ctx raises derives from StreamCtxError."""

from __future__ import annotations

__all__ = (
    "BrokerError",
    "ConfigError",
    "ConversationReleasedError",
    "FinalizeRefusedError",
    "InvalidEventError",
    "MissingTopicError",
    "ShutdownTimeoutError",
    "StreamCtxError",
    "UndecodableBatchError",
)


class StreamCtxError(Exception):
    """Base class. `retriable` tells the runner whether to retry or to dead-letter."""

    retriable: bool = False


class ConfigError(StreamCtxError):
    """A configuration key holds a bad value; the message names the TOML key."""


class InvalidEventError(StreamCtxError):
    """An input record cannot be applied; it is dead-lettered, never dropped."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class FinalizeRefusedError(InvalidEventError):
    """A finalize of a conversation with no window at its time: never seen, ended or expired.

    No bundle answers it (an empty one would replace the last good context) and no state is
    created; `reason` is "unknown", "ended" or "expired" (dead-letter header
    `stream-ctx.errors.refused`).
    """

    def __init__(self, conversation_id: str, reason: str) -> None:
        what = {
            "unknown": "has no events",
            "ended": "has ended (an `end` event, or it expired before a restart)",
            "expired": "expired (no event within `bundle.conversation_ttl_hours`)",
        }.get(reason, f"was refused ({reason})")
        super().__init__(
            f"finalize refused: conversation {conversation_id!r} {what}; send a retrieval to"
            " start it",
            path="$.conversation_id",
        )
        self.conversation_id = conversation_id
        self.reason = reason


class ConversationReleasedError(StreamCtxError):
    """A late event for a conversation released from memory: restore it, then apply again."""

    retriable = True

    def __init__(self, conversation_id: str) -> None:
        super().__init__(
            f"conversation {conversation_id!r} was released from memory as idle and got a late "
            "event within its TTL; restore it from the changelog and apply the event again"
        )
        self.conversation_id = conversation_id


class BrokerError(StreamCtxError):
    """The Kafka cluster refused or failed an operation we cannot work around."""

    retriable = True


class MissingTopicError(BrokerError):
    """An input topic does not exist: a configuration mistake, not a transient failure."""

    retriable = False


class ShutdownTimeoutError(StreamCtxError):
    """A graceful shutdown did not finish within its bound and was cut short."""


class UndecodableBatchError(StreamCtxError):
    """A fetched record batch cannot be decompressed or parsed; its partition stops there."""

    def __init__(self, *, topic: str, partition: int, offset: int, codec: str, cause: str) -> None:
        super().__init__(
            f"record batch of {topic}/{partition} from offset {offset} cannot be decoded "
            f"(codec {codec!r}): {cause}; the partition is paused there, nothing past it is "
            "read or committed until the batch is readable (fix it, then restart)"
        )
        self.topic, self.partition, self.offset, self.codec = topic, partition, offset, codec
