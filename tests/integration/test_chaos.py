"""Chaos against the real broker: kill -9 and restart, a member killed, a rebalance mid-restore.

The kill tests run each processor as a `stream-ctx run` subprocess with its stderr in a file
under `tmp_path` (the logs to read when a test fails). Checks are on what lands in Kafka: every
finalize has a bundle, every copy of a bundle is byte-identical to `stream-ctx replay`'s, and the
state folded from the changelog equals a clean replay's, so no event was lost or applied twice.
The rebalance lands inside a restore without relying on timing: its members run in this process,
and the first one's restore is held at a known point (the `restore_hold` seam of its partitions)
until the group has revoked its partitions and handed some to a second member.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
import anyio.abc
import msgspec
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import ConsumerRecord, TopicPartition

from stream_ctx.core.conversation.changes import ConversationState
from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.window.accumulator import ContextItem, WindowCounters
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.events import Event
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.settings import ENV_PREFIX, load_settings
from stream_ctx.shell.kafka.admin import ClientKwargs, TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from stream_ctx.shell.processing.runner import Runner
from stream_ctx.shell.state.changelog import RestoredPartition
from tests.integration.kafka_io import committed_offsets, create_input, event_records, produce

STREAM_CTX = Path(sys.executable).with_name("stream-ctx")
# The runner and its parts (ownership, publisher, supervisor) log under this package's name.
PROCESSING_LOGGER = "stream_ctx.shell.processing"
# Tansu drops a dead (or departed) member only after its 6 s session timeout, then takes ~3 s
# to answer the join: one start after a kill costs ~11 s; three restarts plus the work fit here.
TEST_TIMEOUT_S = 100.0
# A join that waits out a dead member's session, plus the restore and a rebalance.
JOIN_TIMEOUT_S = 30.0
# From the last event produced to its bundle, including a takeover after a member is killed.
FLOW_TIMEOUT_S = 40.0
# service.SHUTDOWN_BOUND_S (30 s) is the processor's own bound after SIGTERM; a little beyond it.
EXIT_TIMEOUT_S = 35.0
# Reading a few thousand records back from the in-memory broker takes well under a second.
READ_TIMEOUT_S = 20.0
# Runs `stream-ctx replay` over a few hundred events (loading the tokenizer dominates).
REPLAY_TIMEOUT_S = 30.0
# Log files are small; a poll this often notices a line within a fraction of a restore.
LOG_POLL_S = 0.02
# Reading the group's offsets starts a client each time: a few times a second is plenty.
COMMIT_POLL_S = 0.1
# A fetch's wait when following a topic: short, so a kill follows the first new bundle closely.
FETCH_MS = 50
# Events arrive in small chunks with pauses, so the processor works through many batches while
# the test kills it, as it would on a live topic.
CHUNK_EVENTS = 20
CHUNK_PAUSE_S = 0.05
SESSION_TIMEOUT_MS = 6_000
# Enough of a log's end to show the exception a processor died of.
LOG_TAIL_LINES = 12
# The runner's lines, in its log file (after a prefix) or as a log record's message.
_ASSIGNED = re.compile(r"assigned (.*); restoring (\d+) partition")
_REVOKED = re.compile(r"revoked (?!nothing$|while restoring: )(.+)")
_DROPPED = re.compile(r"revoked while restoring: (.+)")
_RESTORED = re.compile(r"ownership: restored (\d+) conversation")
_HOUR_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class Names:
    """One test's topics and consumer group."""

    source: str
    sink: str
    dlq: str
    group: str

    @property
    def changelog(self) -> str:
        return f"{self.source}.{self.group}.changelog"


def names_for(unique_topic: Callable[[str], str]) -> Names:
    return Names(
        source=unique_topic("in"),
        sink=unique_topic("out"),
        dlq=unique_topic("dlq"),
        group=unique_topic("group"),
    )


def write_config(path: Path, bootstrap: str, names: Names, *, max_poll_records: int) -> Path:
    """A `stream-ctx run` config file; topic names are TOML-safe ([a-zA-Z0-9._-])."""
    path.write_text(
        "[kafka]\n"
        f'bootstrap_servers = "{bootstrap}"\n'
        f'group_id = "{names.group}"\n'
        f'input_topics = ["{names.source}"]\n'
        f'output_topic = "{names.sink}"\n'
        f'dlq_topic = "{names.dlq}"\n'
        f"session_timeout_ms = {SESSION_TIMEOUT_MS}\n"
        f"max_poll_records = {max_poll_records}\n",
        encoding="utf-8",
    )
    return path


async def create_topics(client_kwargs: ClientKwargs, names: Names, partitions: int) -> None:
    """The input, and the output too so a reader can follow it before the processor starts."""
    await create_input(client_kwargs, names.source, partitions=partitions)
    await ensure_topics(client_kwargs, [TopicSpec(name=names.sink, partitions=partitions)])


class Member:
    """One `stream-ctx run` subprocess; its stderr (the log lines) goes to `log_path`."""

    def __init__(self, process: anyio.abc.Process, log_path: Path) -> None:
        self.process = process
        self.log_path = log_path

    @property
    def is_alive(self) -> bool:
        return self.process.returncode is None

    def lines(self) -> list[str]:
        return self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()

    def status(self) -> str:
        """How the process stands, with the end of its log (where a traceback ends)."""
        tail = "\n".join(self.lines()[-LOG_TAIL_LINES:])
        return f"{self.log_path.name}: exit status {self.process.returncode}, log ends:\n{tail}"

    async def wait_for_line(
        self, predicate: Callable[[list[str]], bool], *, timeout_s: float = JOIN_TIMEOUT_S
    ) -> list[str]:
        """Poll the log until `predicate(lines)` holds; fails if the process exits first."""
        with anyio.fail_after(timeout_s):
            for _ in range(int(timeout_s / LOG_POLL_S) + 1):
                lines = self.lines()
                if predicate(lines):
                    return lines
                assert self.is_alive, self.status()
                await anyio.sleep(LOG_POLL_S)
        raise AssertionError("unreachable: the deadline is shorter than the polls")

    async def kill(self) -> None:
        """kill -9: no drain, no commit, no goodbye to the group."""
        self.process.kill()
        with anyio.fail_after(EXIT_TIMEOUT_S):
            await self.process.wait()

    async def stop(self) -> int:
        """SIGTERM, then the exit status."""
        self.process.terminate()
        with anyio.fail_after(EXIT_TIMEOUT_S):
            return await self.process.wait()


class Fleet:
    """The processors one test starts; any still running at the end is killed."""

    def __init__(self, config: Path, log_dir: Path) -> None:
        self.config = config
        self.log_dir = log_dir
        self.members: list[Member] = []

    async def start(self, name: str) -> Member:
        log_path = self.log_dir / f"{name}.log"
        with log_path.open("wb") as log:
            process = await anyio.open_process(
                [str(STREAM_CTX), "run", "--config", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=_environment(),
            )
        member = Member(process, log_path)
        self.members.append(member)
        return member

    async def aclose(self) -> None:
        for member in self.members:
            if member.is_alive:
                await member.kill()
            await member.process.aclose()


def _environment() -> dict[str, str]:
    """This environment without `STREAM_CTX_` overrides: only the config file configures."""
    return {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}


@asynccontextmanager
async def fleet(config: Path, log_dir: Path) -> AsyncIterator[Fleet]:
    members = Fleet(config, log_dir)
    try:
        yield members
    finally:
        with anyio.CancelScope(shield=True):
            await members.aclose()


class TopicFollower:
    """Reads every partition of a topic from the start and keeps every record it sees."""

    def __init__(self, client_kwargs: ClientKwargs, topic: str, partitions: int) -> None:
        self.partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self.records: list[ConsumerRecord[bytes, bytes]] = []
        self._consumer = AIOKafkaConsumer(
            **client_kwargs, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=FETCH_MS
        )

    async def __aenter__(self) -> TopicFollower:
        await self._consumer.start()
        self._consumer.assign(self.partitions)
        await self._consumer.seek_to_beginning(*self.partitions)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with anyio.CancelScope(shield=True):
            await self._consumer.stop()

    async def poll(self) -> None:
        batch = await self._consumer.getmany(timeout_ms=FETCH_MS)
        for records in batch.values():
            self.records.extend(records)

    async def wait_until(
        self,
        predicate: Callable[[list[ConsumerRecord[bytes, bytes]]], bool],
        *,
        timeout_s: float = FLOW_TIMEOUT_S,
    ) -> None:
        with anyio.fail_after(timeout_s):
            for _ in range(int(timeout_s * 1000 / FETCH_MS) + 1):
                if predicate(self.records):
                    return
                await self.poll()
        raise AssertionError("unreachable: the deadline is shorter than the polls")

    async def read_to_end(self, *, timeout_s: float = READ_TIMEOUT_S) -> None:
        """Read up to each partition's high watermark (as of a fetch made after writers stop)."""
        with anyio.fail_after(timeout_s):
            for _ in range(int(timeout_s * 1000 / FETCH_MS) + 1):
                await self.poll()
                done = [
                    self._consumer.highwater(tp) is not None
                    and await self._consumer.position(tp) >= self._consumer.highwater(tp)
                    for tp in self.partitions
                ]
                if all(done):
                    return
        raise AssertionError("unreachable: the deadline is shorter than the polls")


async def read_topic(
    client_kwargs: ClientKwargs, topic: str, partitions: int
) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record of a topic whose writers have stopped."""
    async with TopicFollower(client_kwargs, topic, partitions) as follower:
        await follower.read_to_end()
    return follower.records


async def produce_paced(client_kwargs: ClientKwargs, topic: str, events: Sequence[Event]) -> None:
    """Send events in order, a chunk at a time with a pause, every chunk acknowledged."""
    producer = AIOKafkaProducer(**client_kwargs, acks="all", enable_idempotence=False, linger_ms=5)
    await producer.start()
    try:
        for start in range(0, len(events), CHUNK_EVENTS):
            chunk = event_records(events[start : start + CHUNK_EVENTS])
            futures = [await producer.send(topic, value, key=key) for key, value in chunk]
            for future in futures:
                await future
            await anyio.sleep(CHUNK_PAUSE_S)
    finally:
        await producer.stop()


async def replay_cli(config: Path, events: Sequence[Event], work_dir: Path) -> dict[str, bytes]:
    """bundle_id -> bundle bytes from `stream-ctx replay` over the same events."""
    events_path = work_dir / "events.jsonl"
    events_path.write_bytes(b"".join(msgspec.json.encode(e) + b"\n" for e in events))
    with anyio.fail_after(REPLAY_TIMEOUT_S):
        result = await anyio.run_process(
            [str(STREAM_CTX), "replay", "--config", str(config), str(events_path)],
            env=_environment(),
        )
    bundles: dict[str, bytes] = {}
    for line in result.stdout.splitlines():
        bundle_id = msgspec.json.decode(line)["bundle_id"]
        assert bundle_id not in bundles, f"replay gave {bundle_id!r} twice"
        bundles[bundle_id] = line
    return bundles


def bundle_ids(config: BundleConfig, events: Sequence[Event]) -> set[str]:
    """The bundle ids a clean replay of `events` produces."""
    processor = ContextProcessor(config)
    found = set()
    for position, event in enumerate(events, start=1):
        bundle = processor.apply(event, position=position)
        if bundle is not None:
            found.add(bundle.bundle_id)
    return found


def has_bundles(ids: set[str]) -> Callable[[list[ConsumerRecord[bytes, bytes]]], bool]:
    def check(records: list[ConsumerRecord[bytes, bytes]]) -> bool:
        return ids <= {msgspec.json.decode(r.value)["bundle_id"] for r in records}

    return check


def more_than(count: int) -> Callable[[list[ConsumerRecord[bytes, bytes]]], bool]:
    return lambda records: len(records) > count


def check_bundles(records: list[ConsumerRecord[bytes, bytes]], expected: dict[str, bytes]) -> int:
    """Every copy of a bundle equals the first and replay's; returns how many were repeats."""
    first: dict[str, bytes] = {}
    for record in records:
        bundle = msgspec.json.decode(record.value)
        bundle_id = bundle["bundle_id"]
        assert record.key == bundle["conversation_id"].encode()
        copy = first.setdefault(bundle_id, record.value)
        assert record.value == copy, f"a repeat of {bundle_id!r} differs from its first copy"
    missing = sorted(expected.keys() - first.keys())
    unexpected = sorted(first.keys() - expected.keys())
    assert not missing, f"finalizes without a bundle: {missing}"
    assert not unexpected, f"bundles replay does not produce: {unexpected}"
    differing = sorted(b for b in expected if first[b] != expected[b])
    assert not differing, (
        f"{len(differing)} bundle(s) differ from replay's, first {differing[0]!r}: "
        f"{_difference(first[differing[0]], expected[differing[0]])}"
    )
    return len(records) - len(first)


def _difference(got: bytes, want: bytes) -> str:
    """The top-level fields where a bundle differs from replay's."""
    mine, theirs = msgspec.json.decode(got), msgspec.json.decode(want)
    return "; ".join(
        f"{key}: kafka {mine.get(key)!r} != replay {theirs.get(key)!r}"
        for key in theirs.keys() | mine.keys()
        if mine.get(key) != theirs.get(key)
    )


@dataclass(frozen=True, slots=True)
class Restored:
    """One conversation as the changelog holds it, with its last bundle's packed context."""

    state: ConversationState
    items: list[ContextItem]
    context: bytes | None


async def changelog_state(
    client_kwargs: ClientKwargs, topic: str, partitions: int
) -> dict[str, Restored]:
    """Live conversations folded from the whole changelog, as a restore would see them."""
    folds = {p: RestoredPartition() for p in range(partitions)}
    for record in await read_topic(client_kwargs, topic, partitions):
        folds[record.partition].fold([record])
    live: dict[str, Restored] = {}
    for fold in folds.values():
        for cid, state, items, context in fold.conversations():
            assert cid not in live, f"{cid!r} has state in two changelog partitions"
            assert len(items) == len(state.window), (
                f"{cid!r}: the state points at item versions the changelog lacks: {state.window}"
            )
            if not state.is_ended:
                live[cid] = Restored(state, items, context)
    return live


def _counters(counters: WindowCounters) -> tuple[int, ...]:
    return (counters.seq, counters.accepted, counters.rejected, counters.evicted, counters.entered)


def _by_id(items: Sequence[ContextItem]) -> dict[str, tuple[object, ...]]:
    """Items keyed by id, without `revision` (the input position: an offset, or a line)."""
    return {
        item.id: (
            item.content,
            item.salience,
            item.created_at,
            item.kind,
            item.attributes,
            item.tags,
            item.entered,
        )
        for item in items
    }


def check_state(
    restored: dict[str, Restored], config: BundleConfig, events: Sequence[Event]
) -> None:
    """The changelog's state equals a clean replay's: nothing lost, nothing applied twice."""
    clean = ContextProcessor(config)
    for position, event in enumerate(events, start=1):
        clean.apply(event, position=position)
    assert sorted(restored) == sorted(clean.conversations)
    for cid, found in restored.items():
        want, conversation = clean.state_of(cid), clean.conversations[cid]
        assert want is not None
        assert (cid, _counters(found.state.counters)) == (cid, _counters(want.counters))
        assert (cid, found.state.last_ts) == (cid, want.last_ts)
        assert _by_id(found.items) == _by_id(list(conversation.window.items.values())), cid
        assert found.context == conversation.previous_context, cid


def assignments(lines: list[str]) -> list[set[str]]:
    """Each `assigned ...` log line's partitions, in order."""
    found = []
    for line in lines:
        match = _ASSIGNED.search(line)
        if match is not None:
            names = match.group(1)
            found.append(set() if names == "nothing" else set(names.split(", ")))
    return found


def is_restored_after_assignment(lines: list[str]) -> bool:
    """The last non-empty assignment in `lines` has been restored."""
    last = max(
        (
            n
            for n, line in enumerate(lines)
            if (m := _ASSIGNED.search(line)) and int(m.group(2)) > 0
        ),
        default=None,
    )
    return last is not None and any("ownership: restored " in line for line in lines[last:])


def restored_counts(lines: list[str]) -> list[int]:
    """Conversations each restore in `lines` brought back."""
    return [int(m.group(1)) for line in lines if (m := _RESTORED.search(line))]


async def group_members(client_kwargs: ClientKwargs, group: str) -> set[str]:
    admin = AIOKafkaAdminClient(**client_kwargs)
    await admin.start()
    try:
        (response,) = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    (described,) = response.to_object()["groups"]
    return {member["member_id"] for member in described["members"]}


async def wait_for_commit_past(client_kwargs: ClientKwargs, names: Names, floor: int) -> int:
    """The group's committed offsets summed over the input, once past `floor`."""
    partitions = [TopicPartition(names.source, n) for n in range(3)]
    with anyio.fail_after(FLOW_TIMEOUT_S):
        for _ in range(int(FLOW_TIMEOUT_S / COMMIT_POLL_S)):
            offsets = await committed_offsets(client_kwargs, names.group, partitions)
            total = sum(offset or 0 for offset in offsets.values())
            if total > floor:
                return total
            await anyio.sleep(COMMIT_POLL_S)
    raise AssertionError("unreachable: the deadline is shorter than the polls")


async def test_kill_9_restart_three_times_output_and_state_exact(
    broker: EmbeddedBroker,
    client_kwargs: ClientKwargs,
    unique_topic: Callable[[str], str],
    tmp_path: Path,
) -> None:
    kills = 3
    # No `end` events, so every conversation still has state to compare at the end; a finalize
    # every second retrieval spreads bundles over every wave.
    shape = WorkloadShape(
        conversations=60,
        finalize_every=2,
        is_ending=False,
        chunk_chars=(100, 400),
        items_per_retrieval=(2, 4),
    )
    events = generate(31, shape)
    wave = -(-len(events) // (kills + 1))
    waves = [events[n : n + wave] for n in range(0, len(events), wave)]
    names = names_for(unique_topic)
    config = write_config(
        tmp_path / "run.toml", broker.bootstrap_servers, names, max_poll_records=20
    )
    expected = await replay_cli(config, events, tmp_path)
    with anyio.fail_after(TEST_TIMEOUT_S):
        await create_topics(client_kwargs, names, partitions=3)
        async with (
            fleet(config, tmp_path) as members,
            TopicFollower(client_kwargs, names.sink, 3) as bundles,
        ):
            committed = 0
            for n, events_of_wave in enumerate(waves):
                member = await members.start(f"run{n}")
                lines = await member.wait_for_line(is_restored_after_assignment)
                if n > 0:
                    assert restored_counts(lines)[0] > 0, f"state lost across kill {n}: {lines}"
                seen = len(bundles.records)
                # A wave at once: a backlog of batches, so the kill lands while the processor is
                # between the steps of a batch rather than idle.
                await produce(client_kwargs, names.source, event_records(events_of_wave))
                if n < kills:
                    await bundles.wait_until(more_than(seen))
                    # A bundle goes out before the states it follows from (step 1 before step 2),
                    # so a kill right after it may find no state written yet, and the next
                    # restore rightly finds none. Kill once this wave has a commit, which
                    # follows its states: from then on a restore finding nothing is lost state.
                    committed = await wait_for_commit_past(client_kwargs, names, committed)
                    await member.kill()
            await bundles.wait_until(has_bundles(set(expected)))
            assert await member.stop() == 0
            assert any("runner: stopped:" in line for line in member.lines())
        output = await read_topic(client_kwargs, names.sink, 3)
        restored = await changelog_state(client_kwargs, names.changelog, 3)
    duplicates = check_bundles(output, expected)
    print(
        f"kill -9 x{kills}: {len(output)} bundles for {len(expected)} finalizes, "
        f"{duplicates} byte-identical repeat(s)"
    )
    check_state(restored, load_settings(config).bundle, events)


async def test_survivor_completes_the_stream_after_peer_killed(
    broker: EmbeddedBroker,
    client_kwargs: ClientKwargs,
    unique_topic: Callable[[str], str],
    tmp_path: Path,
) -> None:
    partitions = 4
    events = generate(
        47, WorkloadShape(conversations=40, chunk_chars=(100, 400), items_per_retrieval=(2, 4))
    )
    names = names_for(unique_topic)
    config = write_config(
        tmp_path / "run.toml", broker.bootstrap_servers, names, max_poll_records=20
    )
    expected = await replay_cli(config, events, tmp_path)
    everything = {f"{names.source}/{p}" for p in range(partitions)}

    def is_split(first: Member, second: Member) -> bool:
        held = [assignments(m.lines()) for m in (first, second)]
        if not all(held) or not all(
            is_restored_after_assignment(m.lines()) for m in (first, second)
        ):
            return False
        mine, theirs = held[0][-1], held[1][-1]
        return bool(mine) and bool(theirs) and mine | theirs == everything and not mine & theirs

    with anyio.fail_after(TEST_TIMEOUT_S):
        await create_topics(client_kwargs, names, partitions=partitions)
        async with (
            fleet(config, tmp_path) as members,
            TopicFollower(client_kwargs, names.sink, partitions) as bundles,
        ):
            survivor, victim = await members.start("survivor"), await members.start("victim")
            await survivor.wait_for_line(lambda _: is_split(survivor, victim))
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(produce_paced, client_kwargs, names.source, events)
                await bundles.wait_until(lambda records: len(records) >= len(expected) // 8)
                await victim.kill()
            await bundles.wait_until(has_bundles(set(expected)))
            assert survivor.is_alive, survivor.status()
            assert assignments(survivor.lines())[-1] == everything
            assert await survivor.stop() == 0
        output = await read_topic(client_kwargs, names.sink, partitions)
    duplicates = check_bundles(output, expected)
    print(
        f"member killed: {len(output)} bundles for {len(expected)} finalizes, "
        f"{duplicates} byte-identical repeat(s)"
    )


def _numbers(partitions: set[str]) -> list[int]:
    return sorted(int(name.rpartition("/")[2]) for name in partitions)


def runner_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The log lines of the runner and its parts so far (every in-process runner's, in order)."""
    return [r.getMessage() for r in caplog.records if r.name.startswith(PROCESSING_LOGGER)]


def revocation_then_assignments(lines: list[str]) -> tuple[set[str], set[str], set[str]] | None:
    """The partitions of the first revocation of something in `lines` and of the two
    assignments logged after it (one per member), once both are there, else None."""
    for n, line in enumerate(lines):
        if (match := _REVOKED.fullmatch(line)) is not None:
            later = assignments(lines[n + 1 :])
            if len(later) < 2:
                return None
            return set(match.group(1).split(", ")), later[0], later[1]
    return None


async def wait_for_rebalance(
    caplog: pytest.LogCaptureFixture, since: int
) -> tuple[set[str], set[str], set[str]]:
    """`revocation_then_assignments` of the runner's lines after the first `since`."""
    with anyio.fail_after(JOIN_TIMEOUT_S):
        for _ in range(int(JOIN_TIMEOUT_S / LOG_POLL_S) + 1):
            found = revocation_then_assignments(runner_lines(caplog)[since:])
            if found is not None:
                return found
            await anyio.sleep(LOG_POLL_S)
    raise AssertionError("unreachable: the deadline is shorter than the polls")


async def test_rebalance_during_restore_keeps_state_and_members(
    broker: EmbeddedBroker,
    client_kwargs: ClientKwargs,
    unique_topic: Callable[[str], str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    shape = WorkloadShape(
        conversations=120,
        retrievals_per_conversation=4,
        finalize_every=2,
        is_ending=False,
        chunk_chars=(100, 300),
        items_per_retrieval=(2, 3),
    )
    before = generate(53, shape)
    # The same conversation ids two hours on (inside the 24 h TTL): their windows and seqs must
    # continue from the restored state.
    after = generate(59, replace(shape, start_ms=shape.start_ms + 2 * _HOUR_MS))
    names = names_for(unique_topic)
    config = write_config(
        tmp_path / "run.toml", broker.bootstrap_servers, names, max_poll_records=50
    )
    settings = load_settings(config, environ={})
    expected = await replay_cli(config, before + after, tmp_path)
    everything = {f"{names.source}/{p}" for p in range(3)}
    caplog.set_level(logging.INFO, logger=PROCESSING_LOGGER)
    # `first` holds its restore after folding the first fetch (the seam in
    # recovery.read_changelogs) until the group has revoked its partitions and handed some to
    # `second`: the revocation reaches a restore in progress in every run, whatever the timing.
    held, go = anyio.Event(), anyio.Event()

    async def hold() -> None:
        held.set()
        await go.wait()

    with anyio.fail_after(TEST_TIMEOUT_S):
        await create_topics(client_kwargs, names, partitions=3)
        async with TopicFollower(client_kwargs, names.sink, 3) as bundles:
            async with anyio.create_task_group() as building:
                builder = Runner(settings)
                building.start_soon(builder.run)
                await produce(client_kwargs, names.source, event_records(before))
                await bundles.wait_until(
                    has_bundles(bundle_ids(settings.bundle, before)), timeout_s=JOIN_TIMEOUT_S
                )
                builder.stop.set()
            first, second = Runner(settings), Runner(settings)
            first.partitions.restore_hold = hold
            async with anyio.create_task_group() as members:
                members.start_soon(first.run)
                with anyio.fail_after(JOIN_TIMEOUT_S):
                    await held.wait()
                since = len(runner_lines(caplog))
                members.start_soon(second.run)
                revoked, one, other = await wait_for_rebalance(caplog, since)
                go.set()
                await produce_paced(client_kwargs, names.source, after)
                await bundles.wait_until(has_bundles(set(expected)))
                in_group = await group_members(client_kwargs, names.group)
                restores = [r.stats.restored_conversations for r in (first, second)]
                first.stop.set()
                second.stop.set()
        output = await read_topic(client_kwargs, names.sink, 3)
        restored = await changelog_state(client_kwargs, names.changelog, 3)
    assert revoked == everything  # eager rebalancing: every partition, mid-restore
    assert one and other and one | other == everything and not one & other, (one, other)
    lines = runner_lines(caplog)[since:]
    dropped = [_DROPPED.fullmatch(line) for line in lines]
    (hit,) = [set(match.group(1).split(", ")) for match in dropped if match is not None]
    # Dropped from the restore in progress: what went to the other member, nothing more.
    assert hit in (one, other), (hit, one, other)
    assert len(in_group) == 2, in_group
    # Each conversation restored once, by the member that kept its partition.
    assert all(restores) and sum(restores) == shape.conversations, restores
    duplicates = check_bundles(output, expected)
    print(
        f"rebalance mid-restore: dropped partition(s) {_numbers(hit)} of {_numbers(everything)}"
        f" from the restore in progress; {duplicates} byte-identical repeat(s)"
    )
    check_state(restored, settings.bundle, before + after)
