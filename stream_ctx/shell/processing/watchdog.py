"""Progress watchdog: a member with records behind its position that moves none of them for a
while is stalled, however alive its loop looks; a member with nothing to read never is."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aiokafka.structs import TopicPartition

__all__ = ("Progress", "Stall")


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
class Progress:
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
