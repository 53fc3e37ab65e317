"""The commit protocol: every input offset is committed only after what it covers, bundles and
state, is acknowledged. Its steps, in order, for every input batch since the last flush:

1. as the batch is processed, bundles and dead letters go out (`cover`), then each partition's
   tombstones for records a crash left behind, its new item versions and packed contexts
   (`add`); the next batch is processed while they are on the wire;
at each flush (every `state.commit_interval_ms`, on revocation, when idle, at shutdown):
   await every step-1 acknowledgement since the last flush;
2. write the conversation states (each names the input offset it reflects); await the acks;
3. write tombstones for item versions and contexts no state points at any more; await the acks;
4. commit the input offsets.

A crash anywhere leaves states that only point at written records, and bundles already published
for every event a state reflects; restarting re-applies exactly the events states do not reflect,
and restore drops the orphans. No transactions are needed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from aiokafka.structs import TopicPartition

from stream_ctx.shell.state.changelog import ChangelogWrites, Record

__all__ = ("Checkpoint", "Commit", "Send")

# Step-1 sends on the wire before processing waits for them: bounds memory in flight when
# publishing falls behind.
_MAX_IN_FLIGHT_SENDS = 20_000

Send = Callable[[TopicPartition, list[Record]], Awaitable[list[asyncio.Future[object]]]]
"""Writes changelog records of an input partition; returns their acknowledgements."""
Commit = Callable[[dict[TopicPartition, int]], Awaitable[None]]
"""Commits the next input offset of each partition."""


@dataclass(slots=True)
class _Staged:
    """Steps 2 and 3 of one partition waiting for the next flush; a later state wins."""

    states: dict[bytes, bytes | None] = field(default_factory=dict)
    tombstones: list[Record] = field(default_factory=list)


@dataclass(slots=True)
class _Flush:
    """What one flush covers: step-1 acks to await, steps 2-3 to write, step-4 offsets."""

    in_flight: list[asyncio.Future[object]] = field(default_factory=list)
    staged: dict[TopicPartition, _Staged] = field(default_factory=dict)
    offsets: dict[TopicPartition, int] = field(default_factory=dict)


class Checkpoint:
    """Collects what each batch sent and staged; `flush` writes it all in protocol order. One
    flush runs at a time; states of a conversation touched in several batches are written once."""

    def __init__(self, *, send: Send, commit: Commit, interval_s: float) -> None:
        self._send, self._commit, self._interval_s = send, commit, interval_s
        self._open = _Flush()
        self._running: asyncio.Future[None] | None = None
        self._due = 0.0

    @property
    def in_flight(self) -> int:
        """Step-1 sends not yet covered by a flush."""
        return len(self._open.in_flight)

    @property
    def has_work(self) -> bool:
        """Whether anything is unflushed or a flush is still running."""
        flush = self._open
        return bool(flush.in_flight or flush.staged or flush.offsets) or self._running is not None

    @property
    def is_due(self) -> bool:
        return time.monotonic() >= self._due

    def cover(self, sent: Iterable[asyncio.Future[object]]) -> None:
        """Step 1's acknowledgements of bundles and dead letters, sent as records were processed."""
        self._open.in_flight.extend(sent)

    async def add(
        self,
        tp: TopicPartition,
        writes: ChangelogWrites,
        *,
        orphans: Iterable[Record],
        next_offset: int,
    ) -> None:
        """One partition's batch: send its step-1 records now (`orphans`, tombstones for what a
        restore found a crash left behind, ahead of the same keys written again), stage its
        steps 2 and 3, and note its next input offset for step 4."""
        self._open.in_flight.extend(await self._send(tp, [*orphans, *writes.items]))
        staged = self._open.staged.setdefault(tp, _Staged())
        staged.states.update(writes.states)
        staged.tombstones.extend(writes.tombstones)
        self._open.offsets[tp] = next_offset

    async def end_batch(self) -> None:
        """After each batch: flush now if publishing fell behind (before fetching more), else in
        the background once the commit interval has passed."""
        if self.in_flight > _MAX_IN_FLIGHT_SENDS:
            await self.flush()
        elif self.is_due:
            self.start_background()

    def start_background(self) -> None:
        """Flush what is open while later batches are processed; never two at once."""
        running = self._running
        if running is not None:
            if not running.done():
                return
            running.result()  # a failed flush fails its caller here
        self._running = asyncio.ensure_future(self._write(self._take()))

    def start_idle(self) -> None:
        """Nothing to process: flush what is open in the background, fetching going on meanwhile,
        and reap a finished flush (raising its failure), so an idle member has no work left."""
        running = self._running
        if running is not None and running.done():
            self._running = None
            running.result()
        flush = self._open
        if flush.in_flight or flush.staged or flush.offsets:
            self.start_background()

    async def flush(self) -> None:
        """Flush everything now, after the flush already running (if any)."""
        running, self._running = self._running, None
        if running is not None:
            await running
        await self._write(self._take())

    def abandon(self) -> None:
        """Drop everything (a failed session): a restart re-reads from the last commit."""
        for future in [*self._open.in_flight, self._running]:
            if future is None:
                continue
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # retrieved: the failure ended the session
        self._open, self._running = _Flush(), None

    def _take(self) -> _Flush:
        """Everything open, taken at once so later batches go to the next flush."""
        flush, self._open = self._open, _Flush()
        self._due = time.monotonic() + self._interval_s
        return flush

    async def _write(self, flush: _Flush) -> None:
        # 1. (sent by `cover` and `add`) await the acknowledgements
        await asyncio.gather(*flush.in_flight)
        # 2. states, each naming the last input offset it reflects
        await asyncio.gather(
            *[
                f
                for tp, s in flush.staged.items()
                for f in await self._send(tp, [*s.states.items()])
            ]
        )
        # 3. tombstones for superseded versions
        await asyncio.gather(
            *[f for tp, s in flush.staged.items() for f in await self._send(tp, s.tombstones)]
        )
        # 4. the input offsets
        if flush.offsets:
            await self._commit(flush.offsets)
