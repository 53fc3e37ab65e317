"""Poison versus transient: which failures are retried (never dead-lettered), and how long to
wait between tries."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiokafka.errors import KafkaError, KafkaTimeoutError

from stream_ctx.errors import StreamCtxError

__all__ = ("Backoff", "Outage", "is_transient")


def is_transient(exc: BaseException) -> bool:
    """A fault of the broker or the network, not of the record being handled: our errors and
    aiokafka's say so with their `retriable` flag; timeouts and socket errors always are."""
    if isinstance(exc, KafkaTimeoutError):
        return True  # aiokafka flags it final, but it only means no answer came in time
    if isinstance(exc, StreamCtxError | KafkaError):
        return bool(exc.retriable)
    return isinstance(exc, TimeoutError | OSError)


@dataclass(slots=True)
class Backoff:
    """Delays that double from `initial_s` up to `max_s`, back to the start on `reset`."""

    initial_s: float = 0.5
    # Past this a recovered broker waits too long to be noticed.
    max_s: float = 15.0
    _next_s: float = 0.0

    def next(self) -> float:
        delay = self._next_s or self.initial_s
        self._next_s = min(delay * 2, self.max_s)
        return delay

    def reset(self) -> None:
        self._next_s = 0.0


@dataclass(slots=True)
class Outage:
    """The broker's unavailability across sessions: when it began and how long the next try
    waits. `recover` ends it, so the next outage is new: logged again, from the first delay."""

    backoff: Backoff = field(default_factory=Backoff)
    started_at: float | None = None

    def fail(self, *, now: float) -> tuple[float, bool]:
        """A session failed at `now`: the delay before the next try, and whether it begins an
        outage (True) or continues one."""
        is_new = self.started_at is None
        if is_new:
            self.started_at = now
        return self.backoff.next(), is_new

    def recover(self) -> None:
        """A session is working again (joined and restored)."""
        self.started_at = None
        self.backoff.reset()
