"""The commit protocol in order, with a fake producer whose acknowledgements the test releases:
nothing is committed before the bundles and states it covers are acknowledged."""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel
import pytest
from aiokafka.errors import RequestTimedOutError
from aiokafka.structs import TopicPartition

from stream_ctx.shell.state.changelog import ChangelogWrites, Record
from stream_ctx.shell.state.checkpoint import Checkpoint

TP = TopicPartition("in", 0)
TIMEOUT_S = 5.0


class FakeProducer:
    """Records every write and commit in order; acks resolve only when the test says."""

    def __init__(self) -> None:
        self.log: list[tuple[str, object]] = []
        self.acks: list[asyncio.Future[object]] = []

    async def send(self, tp: TopicPartition, records: list[Record]) -> list[asyncio.Future[object]]:
        futures = []
        for record in records:
            self.log.append(("send", record))
            futures.append(asyncio.get_running_loop().create_future())
        self.acks += futures
        return futures

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.log.append(("commit", offsets))

    def ack_all(self) -> None:
        for ack in self.acks:
            if not ack.done():
                ack.set_result(None)


def writes(states: list[Record], tombstones: list[Record]) -> ChangelogWrites:
    """A partition's batch with no step-1 records."""
    return ChangelogWrites(states=states, tombstones=tombstones)


async def settle() -> None:
    """Let the flush run as far as the acks so far allow."""
    for _ in range(20):
        await anyio.lowlevel.checkpoint()


async def test_states_wait_for_step_1_tombstones_for_states_commit_for_everything() -> None:
    fake = FakeProducer()
    checkpoint = Checkpoint(send=fake.send, commit=fake.commit, interval_s=0.1)
    bundle: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    checkpoint.cover([bundle])
    with anyio.fail_after(TIMEOUT_S):
        await checkpoint.add(
            TP, writes([(b"s", b"v1")], [(b"i1", None)]), orphans=[], next_offset=5
        )
        await checkpoint.add(
            TP, writes([(b"s", b"v2")], [(b"i2", None)]), orphans=[], next_offset=9
        )
        checkpoint.start_background()
        await settle()
        assert fake.log == []  # 1. the bundle is not acknowledged: nothing else goes
        bundle.set_result(None)
        await settle()
        assert fake.log == [("send", (b"s", b"v2"))]  # 2. one state write, the later one
        fake.ack_all()
        await settle()
        assert fake.log[1:] == [("send", (b"i1", None)), ("send", (b"i2", None))]  # 3.
        fake.ack_all()
        await checkpoint.flush()
    assert fake.log[-1] == ("commit", {TP: 9})
    assert not checkpoint.has_work


async def test_failed_acknowledgement_commits_nothing_and_fails_the_flush() -> None:
    fake = FakeProducer()
    checkpoint = Checkpoint(send=fake.send, commit=fake.commit, interval_s=0.1)
    bundle: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    checkpoint.cover([bundle])
    await checkpoint.add(TP, writes([(b"s", b"v")], []), orphans=[], next_offset=3)
    bundle.set_exception(RequestTimedOutError())
    with anyio.fail_after(TIMEOUT_S), pytest.raises(RequestTimedOutError):
        await checkpoint.flush()
    assert fake.log == []
    checkpoint.abandon()
    assert not checkpoint.has_work


async def one_batch_unacked() -> tuple[FakeProducer, Checkpoint, asyncio.Future[object]]:
    """A checkpoint holding one batch (a state, offset 4) whose bundle is not acknowledged."""
    fake = FakeProducer()
    checkpoint = Checkpoint(send=fake.send, commit=fake.commit, interval_s=60.0)
    bundle: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    checkpoint.cover([bundle])
    await checkpoint.add(TP, writes([(b"s", b"v")], []), orphans=[], next_offset=4)
    return fake, checkpoint, bundle


async def test_idle_flush_runs_in_the_background_and_is_reaped_when_done() -> None:
    fake, checkpoint, bundle = await one_batch_unacked()
    with anyio.fail_after(TIMEOUT_S):
        checkpoint.start_idle()  # returns at once, long before the bundle's ack
        await settle()
        assert fake.log == []
        assert checkpoint.has_work
        bundle.set_result(None)
        await settle()
        fake.ack_all()
        await settle()
        assert fake.log == [("send", (b"s", b"v")), ("commit", {TP: 4})]
        assert checkpoint.has_work  # finished, not yet reaped
        checkpoint.start_idle()
    assert not checkpoint.has_work


async def test_idle_reaping_raises_what_the_background_flush_failed_with() -> None:
    fake, checkpoint, bundle = await one_batch_unacked()
    with anyio.fail_after(TIMEOUT_S):
        checkpoint.start_idle()
        bundle.set_exception(RequestTimedOutError())
        await settle()
        with pytest.raises(RequestTimedOutError):
            checkpoint.start_idle()
    assert fake.log == []
    assert not checkpoint.has_work


async def test_step_1_sends_orphan_tombstones_then_new_items_at_once_states_at_the_flush() -> None:
    fake = FakeProducer()
    checkpoint = Checkpoint(send=fake.send, commit=fake.commit, interval_s=60.0)
    batch = ChangelogWrites(items=[(b"i2", b"item")], states=[(b"s", b"v")])
    with anyio.fail_after(TIMEOUT_S):
        await checkpoint.add(TP, batch, orphans=[(b"i1", None)], next_offset=2)
        assert fake.log == [("send", (b"i1", None)), ("send", (b"i2", b"item"))]
        checkpoint.start_background()
        await settle()
        assert fake.log[2:] == []  # 2. waits for step 1's acknowledgements
        fake.ack_all()
        await settle()
        assert fake.log[2:] == [("send", (b"s", b"v"))]
        fake.ack_all()
        await checkpoint.flush()
    assert fake.log[-1] == ("commit", {TP: 2})  # 4.
