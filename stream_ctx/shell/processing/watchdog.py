"""Progress watchdog: a member with records behind its position that moves none of them for a
while is stalled, however alive its loop looks; a member with nothing to read never is.

`ProgressWatch` is the judgement alone (time passed in); `Watchdog` feeds it what the member sees.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from stream_ctx.shell.http.metrics import Health

__all__ = ("ProgressWatch", "Stall", "WaitReason", "Watchdog")

log = logging.getLogger(__name__)

# Progress is judged this often: a stall is measured in minutes, the loop turns every 100 ms.
_WATCH_INTERVAL_S = 1.0


@dataclass(frozen=True, slots=True)
class Stall:
    """Partitions with records waiting, none moved for `seconds`; each with its lag and what it
    waits on."""

    seconds: float
    lags: Mapping[TopicPartition, int]
    waiting_on: Mapping[TopicPartition, str]

    def describe(self) -> str:
        parts = ", ".join(
            f"{tp.topic}/{tp.partition} lag {lag} (waiting on {self.waiting_on.get(tp, '?')})"
            for tp, lag in sorted(self.lags.items())
        )
        return f"no progress for {self.seconds:.0f} s with records waiting: {parts}"


@dataclass(slots=True)
class ProgressWatch:
    """When the member last moved a partition that had records waiting; `observe` it often.

    Progress is any such partition's position moving, or having no records waiting at all
    (idle). Time is a monotonic `now` in seconds, passed in."""

    stall_after_s: float  # `metrics.stall_after_s`
    _positions: dict[TopicPartition, int] = field(default_factory=dict)
    _progress_at: float | None = None
    _is_stalled: bool = False

    def observe(
        self,
        positions: Mapping[TopicPartition, int],
        highwaters: Mapping[TopicPartition, int],
        *,
        now: float,
    ) -> tuple[dict[TopicPartition, int], bool]:
        """Record positions (next offset to process) and high watermarks; returns each partition's
        lag and whether this observation ends progress (the stall just began)."""
        lags = {
            tp: max(0, highwaters[tp] - offset)
            for tp, offset in positions.items()
            if tp in highwaters
        }
        moved = any(self._positions.get(tp) != offset for tp, offset in positions.items())
        self._positions = dict(positions)
        if self._progress_at is None or moved or not any(lags.values()):
            self._progress_at = now
            self._is_stalled = False
            return lags, False
        is_new = not self._is_stalled and now - self._progress_at >= self.stall_after_s
        self._is_stalled = self._is_stalled or is_new
        return lags, is_new

    @property
    def is_stalled(self) -> bool:
        return self._is_stalled

    def seconds_since(self, now: float) -> float:
        """Seconds since the last progress (0 before the first observation)."""
        return 0.0 if self._progress_at is None else max(0.0, now - self._progress_at)

    def stall(self, lags: Mapping[TopicPartition, int], *, now: float, why: WaitReason) -> Stall:
        """The current stall, naming the partitions with records waiting."""
        waiting = {tp: lag for tp, lag in lags.items() if lag > 0}
        return Stall(
            seconds=self.seconds_since(now),
            lags=waiting,
            waiting_on={tp: why(tp) for tp in waiting},
        )


WaitReason = Callable[[TopicPartition], str]
"""What a partition with records waiting is waiting on, in a few words."""


class Watchdog:
    """Judges the member's progress at most once a second: one WARNING and a red /healthz when a
    stall begins, one INFO when a partition moves again."""

    def __init__(self, health: Health, *, stall_after_s: float, fetch_max_wait_ms: int) -> None:
        self._progress = ProgressWatch(stall_after_s=stall_after_s)
        self._health = health
        self._fetch_max_wait_s = fetch_max_wait_ms / 1000
        self._next_at = time.monotonic()

    @property
    def is_due(self) -> bool:
        return time.monotonic() >= self._next_at

    def seconds_since_progress(self) -> float:
        return self._progress.seconds_since(time.monotonic())

    def observe(
        self, consumer: AIOKafkaConsumer, positions: Mapping[TopicPartition, int], *, in_flight: int
    ) -> None:
        """Judge `positions` (each owned partition's next offset) against the high watermarks;
        `in_flight` counts the writes not yet acknowledged."""
        now = time.monotonic()
        self._next_at = now + _WATCH_INTERVAL_S
        highwaters = {tp: consumer.highwater(tp) for tp in positions}
        was_stalled = self._progress.is_stalled
        lags, is_new = self._progress.observe(
            positions, {tp: mark for tp, mark in highwaters.items() if mark is not None}, now=now
        )
        if is_new:
            why = partial(self._waiting_on, consumer, in_flight=in_flight)
            reason = self._progress.stall(lags, now=now, why=why).describe()
            log.warning("%s; /healthz reports stalled until one moves", reason)
            self._health.set_stalled(reason)
        elif was_stalled and not self._progress.is_stalled:
            log.info("progressing again")
            self._health.set_stalled(None)

    def _waiting_on(self, consumer: AIOKafkaConsumer, tp: TopicPartition, *, in_flight: int) -> str:
        """What a partition with records waiting waits on, from what the member can see."""
        if tp in consumer.paused():
            return "its undecodable batch, paused: see the error logged for it"
        answered_ms = consumer.last_poll_timestamp(tp)
        if not answered_ms:
            return "a first fetch response from the broker"
        answered_s = time.time() - answered_ms / 1000
        if answered_s >= _WATCH_INTERVAL_S + self._fetch_max_wait_s:
            return f"a fetch response from the broker (the last came {answered_s:.0f} s ago)"
        if in_flight:
            return f"acknowledgements of {in_flight} writes"
        return "records the broker's fetch responses do not hold"
