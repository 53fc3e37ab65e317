"""The commit protocol: bundles and state acknowledged before the offsets they cover.

In this order, for every input batch since the last flush:
1. bundles, dead letters and new item versions go out as the batch is processed (`add`); the
   next batch is processed while they are on the wire;
at each flush (every `state.commit_interval_ms`, on revocation, when idle, at shutdown):
   await every step-1 acknowledgement since the last flush;
2. write the conversation states (each names the input offset it reflects); await the acks;
3. write tombstones for superseded item versions; await the acks; commit the input offsets.
A crash anywhere leaves states that only point at written items and bundles already published
for every event a state reflects; restarting re-applies exactly the events states do not reflect.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from aiokafka.structs import TopicPartition

from stream_ctx.shell.state.changelog import Record

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
    """What one flush covers: step-1 acks to await, steps 2-3 to write, offsets to commit."""

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

    def add(
        self,
        tp: TopicPartition,
        *,
        sent: Iterable[asyncio.Future[object]],
        states: Iterable[Record],
        tombstones: Iterable[Record],
        next_offset: int,
    ) -> None:
        """One partition's batch: its step-1 acks, its step-2 and step-3 records, its offset."""
        self._open.in_flight.extend(sent)
        staged = self._open.staged.setdefault(tp, _Staged())
        staged.states.update(states)
        staged.tombstones.extend(tombstones)
        self._open.offsets[tp] = next_offset

    def add_sent(self, sent: Iterable[asyncio.Future[object]]) -> None:
        """Step-1 acks that belong to no partition's batch of their own (dead letters, bundles)."""
        self._open.in_flight.extend(sent)

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
        # (step 1 was sent by `add`) await its acknowledgements
        await asyncio.gather(*flush.in_flight)
        # 2. states, each naming the last input offset it reflects
        await asyncio.gather(
            *[
                f
                for tp, s in flush.staged.items()
                for f in await self._send(tp, [*s.states.items()])
            ]
        )
        # 3. tombstones for superseded versions, then the offsets
        await asyncio.gather(
            *[f for tp, s in flush.staged.items() for f in await self._send(tp, s.tombstones)]
        )
        if flush.offsets:
            await self._commit(flush.offsets)
