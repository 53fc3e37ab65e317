"""Every exception stream-ctx raises derives from StreamCtxError."""

from __future__ import annotations


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


class BrokerError(StreamCtxError):
    """The Kafka cluster refused or failed an operation we cannot work around."""

    retriable = True


class MissingTopicError(BrokerError):
    """An input topic does not exist: a configuration mistake, not a transient failure."""

    retriable = False


class ShutdownTimeoutError(StreamCtxError):
    """A graceful shutdown did not finish within its bound and was cut short."""
