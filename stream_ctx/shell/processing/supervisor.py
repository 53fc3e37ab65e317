"""Sessions of a group member, one after another until it is stopped, with a backoff between
them while the broker is unavailable."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from stream_ctx.shell.processing.retry import Outage, is_transient

__all__ = ("Session", "Supervisor")

log = logging.getLogger(__name__)

Session = Callable[[anyio.abc.TaskStatus[None]], Awaitable[None]]
"""One group membership: returns when stopped and drained, raises when a fault ends it."""


class Supervisor:
    """Runs sessions until `stop` is set. A transient broker fault after the first start ends a
    session and the next begins after a backoff; a broker unreachable at startup is an error for
    whoever started us. Each outage is logged at WARNING when it begins and when it ends, and a
    session that recovers resets the backoff, so the next outage starts from the first delay."""

    def __init__(self, stop: anyio.Event) -> None:
        self._stop = stop
        self._outage = Outage()
        self._has_started = False

    async def run(
        self,
        session: Session,
        *,
        on_fault: Callable[[], None],
        task_status: anyio.abc.TaskStatus[None],
    ) -> None:
        """Run `session` until stopped; `on_fault` is called as soon as a fault ends one."""
        while True:
            try:
                await session(task_status)
                break
            except Exception as exc:
                if not is_transient(exc) or not self._has_started:
                    raise
                on_fault()
                if self._stop.is_set():
                    log.warning("could not drain (%s); unflushed events are re-read", exc)
                    break
                delay = self._fail(exc)
            task_status = anyio.TASK_STATUS_IGNORED
            with anyio.move_on_after(delay):
                await self._stop.wait()
            if self._stop.is_set():
                break

    def started(self) -> None:
        """A session's clients are up and joining: from now on broker faults are retried."""
        self._has_started = True
        if self._outage.started_at is not None:
            log.warning(
                "Kafka available again after %.1f s; rejoining the group",
                time.monotonic() - self._outage.started_at,
            )

    def recovered(self) -> None:
        """A session is working again (joined and restored): a later fault is a new outage."""
        self._outage.recover()

    def _fail(self, exc: Exception) -> float:
        """The delay before the next session; the outage's first fault is warned about."""
        delay, is_new = self._outage.fail(now=time.monotonic())
        if is_new:
            log.warning(
                "Kafka unavailable (%s: %s); retrying with backoff from %.1f s, "
                "then resuming from the last commit",
                type(exc).__name__,
                exc,
                delay,
            )
        else:
            log.debug("Kafka still unavailable (%s); next try in %.1f s", exc, delay)
        return delay
