"""Rolling restart under load: three `stream-ctx run` members of one group, each stopped with
SIGTERM and started again in turn while events keep arriving.

Run: .venv/bin/python benchmarks/rolling_restart.py [--conversations 60] [--feed-s 150]
A fixed workload is fed at an even pace; once the group has settled, member 1, 2 and 3 are restarted
one after another, each once the group has settled (every member ready on /readyz). Prints each
restart (drain time, exit status, time until the group settled), then checks that every finalize
got its bundle, that every repeat is byte-identical to the offline replay, and that no member
exited on its own.
"""

from __future__ import annotations

import argparse
import io
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.events import Event
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.shell.commands.replay import replay
from stream_ctx.shell.kafka.admin import TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import embedded_broker

MEMBERS = 3
PARTITIONS = 6
# A member drains and leaves within service.SHUTDOWN_BOUND_S (30 s); past this it is hung.
DRAIN_TIMEOUT_S = 40.0
# A join on the embedded broker takes about half the session timeout, a rebalance two of them.
SETTLE_TIMEOUT_S = 120.0
# After the feed: the bundles of the last events, a backlog left by the last rebalance.
COLLECT_TIMEOUT_S = 300.0
POLL_S = 0.2


@dataclass(slots=True)
class Restart:
    member: int
    drain_s: float
    exit_code: int
    settle_s: float
    is_under_feed: bool


class Member:
    """One `stream-ctx run` process; started again with `restart`."""

    def __init__(self, index: int, workdir: Path, servers: str, topic: str, group: str) -> None:
        self.index, self._workdir = index, workdir
        self._servers, self._topic, self._group = servers, topic, group
        self.incarnation = 0
        self.process, self.port = self._start()

    def _start(self) -> tuple[subprocess.Popen[bytes], int]:
        self.incarnation += 1
        port = _free_port()
        name = f"member{self.index}-{self.incarnation}"
        config = self._workdir / f"{name}.toml"
        config.write_text(
            "[kafka]\n"
            f'bootstrap_servers = "{self._servers}"\n'
            f'group_id = "{self._group}"\n'
            f'input_topics = ["{self._topic}"]\n'
            f'output_topic = "{self._topic}.out"\n'
            f'dlq_topic = "{self._topic}.dlq"\n'
            "session_timeout_ms = 6000\n"
            "[metrics]\n"
            f"port = {port}\n",
            encoding="utf-8",
        )
        with (self._workdir / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "stream_ctx.shell.commands.cli",
                    "run",
                    "--config",
                    str(config),
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        return process, port

    def is_ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.port}/readyz", timeout=1
            ) as answer:
                return bool(answer.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def stop(self) -> tuple[float, int]:
        """SIGTERM; seconds until it exited and its exit status."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=DRAIN_TIMEOUT_S)
        return time.monotonic() - started, code

    def restart(self) -> tuple[float, int]:
        drained = self.stop()
        self.process, self.port = self._start()
        return drained


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def replay_bundles(events: list[Event]) -> dict[str, bytes]:
    """bundle_id -> bundle bytes, as `stream-ctx replay` writes them."""
    out = io.BytesIO()
    lines = io.BytesIO(b"\n".join(msgspec.json.encode(e) for e in events))
    replay(BundleConfig(), lines, out, io.StringIO())
    return {msgspec.json.decode(line)["bundle_id"]: line for line in out.getvalue().splitlines()}


async def settle(members: list[Member]) -> float:
    """Seconds until every member answers ready at once."""
    started = time.monotonic()
    with anyio.fail_after(SETTLE_TIMEOUT_S):
        while True:
            ready = [await anyio.to_thread.run_sync(m.is_ready) for m in members]
            if all(ready):
                return time.monotonic() - started
            await anyio.sleep(POLL_S)


async def feed(
    servers: str, topic: str, events: list[Event], seconds: float, done: anyio.Event
) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=servers, acks="all", enable_idempotence=False, linger_ms=5
    )
    await producer.start()
    try:
        started = time.monotonic()
        for index, event in enumerate(events):
            due = started + seconds * index / len(events)
            await anyio.sleep(max(0.0, due - time.monotonic()))
            await producer.send(
                topic, msgspec.json.encode(event), key=event.conversation_id.encode()
            )
        await producer.flush()
    finally:
        await producer.stop()
        done.set()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=60)
    parser.add_argument("--feed-s", type=float, default=150.0)
    args = parser.parse_args()
    events = generate(2026, WorkloadShape(conversations=args.conversations, is_ending=False))
    expected = replay_bundles(events)
    print(f"{len(events)} events, {len(expected)} finalizes, fed over {args.feed_s:.0f} s")
    with tempfile.TemporaryDirectory() as tmp:
        async with embedded_broker() as broker:
            servers, topic = broker.bootstrap_servers, f"rolling-{time.monotonic_ns()}"
            await ensure_topics(
                {"bootstrap_servers": servers}, [TopicSpec(name=topic, partitions=PARTITIONS)]
            )
            members = [Member(i, Path(tmp), servers, topic, f"{topic}-group") for i in (1, 2, 3)]
            restarts: list[Restart] = []
            try:
                print(f"three members started; group settled after {await settle(members):.1f} s")
                fed = anyio.Event()
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(feed, servers, topic, events, args.feed_s, fed)
                    for member in members:
                        is_under_feed = not fed.is_set()
                        drain_s, code = await anyio.to_thread.run_sync(member.restart)
                        settle_s = await settle(members)
                        restart = Restart(member.index, drain_s, code, settle_s, is_under_feed)
                        restarts.append(restart)
                        print(
                            f"member {restart.member}: SIGTERM -> exit {restart.exit_code} in"
                            f" {restart.drain_s:.1f} s; group settled {restart.settle_s:.1f} s"
                            " after the new start"
                            + ("" if restart.is_under_feed else " (the feed had ended)"),
                            flush=True,
                        )
                found = await collect(servers, f"{topic}.out", set(expected))
                exits = [m.process.poll() for m in members]  # None: still running
            finally:
                for member in members:
                    if member.process.poll() is None:
                        member.stop()
    report(expected, found, restarts, exits)


async def collect(servers: str, topic: str, ids: set[str]) -> list[bytes]:
    """Every bundle on `topic` until each id in `ids` arrived at least once."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=servers, group_id=None, auto_offset_reset="earliest"
    )
    await consumer.start()
    found: list[bytes] = []
    seen: set[str] = set()
    try:
        with anyio.move_on_after(COLLECT_TIMEOUT_S):
            while not ids <= seen:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    found += [r.value for r in records if r.value is not None]
                    seen.update(msgspec.json.decode(r.value)["bundle_id"] for r in records)
    finally:
        await consumer.stop()
    return found


def report(
    expected: dict[str, bytes],
    found: list[bytes],
    restarts: list[Restart],
    exits: list[int | None],
) -> None:
    by_id: dict[str, list[bytes]] = {}
    for value in found:
        by_id.setdefault(msgspec.json.decode(value)["bundle_id"], []).append(value)
    missing = set(expected) - set(by_id)
    differing = [i for i, copies in by_id.items() if any(c != expected.get(i) for c in copies)]
    repeats = sum(len(copies) - 1 for copies in by_id.values())
    print(
        f"bundles: {len(found)} received for {len(expected)} finalizes; missing {len(missing)};"
        f" repeats {repeats}; differing from replay {len(differing)}"
    )
    print(
        "restarts: "
        + ", ".join(
            f"member {r.member} exit {r.exit_code} settle {r.settle_s:.1f} s" for r in restarts
        )
    )
    print(f"members at the end: {'all running' if exits == [None] * MEMBERS else exits}")
    is_ok = (
        not missing
        and not differing
        and all(r.exit_code == 0 and r.is_under_feed for r in restarts)
        and exits == [None] * MEMBERS
    )
    print("OK" if is_ok else "FAILED")


if __name__ == "__main__":
    anyio.run(main)
