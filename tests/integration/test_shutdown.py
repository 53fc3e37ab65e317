"""`stream-ctx run` as a process: SIGTERM or SIGINT drains, commits everything and exits 0."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process

from stream_ctx.core.wire.events import Finalize
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.errors import MissingTopicError
from stream_ctx.shell.commands.run import SHUTDOWN_BOUND_S
from stream_ctx.shell.kafka.admin import ClientKwargs, partition_counts
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from tests.integration.kafka_io import (
    bundles_by_id,
    cli_command,
    cli_environment,
    collect,
    committed_offsets,
    create_input,
    event_records,
    high_watermarks,
    produce,
    settings_for,
    write_config,
)
from tests.integration.test_runner import replay_bundles

# A process start (imports, tokenizer), a ~3 s group join, then a few dozen events.
RUN_TIMEOUT_S = 30.0
# The service's own bound, plus leaving the group and interpreter exit.
EXIT_TIMEOUT_S = SHUTDOWN_BOUND_S + 5.0
# A killed process is reaped at once; this only keeps a broken host from hanging the test.
KILL_TIMEOUT_S = 5.0
# The output topic appears once the process has started; polled, not waited on blindly.
TOPIC_POLL_INTERVAL_S = 0.1
# Every conversation's last event is a finalize, so all bundles arriving means all was read.
SHAPE = WorkloadShape(
    conversations=6,
    retrievals_per_conversation=4,
    finalize_every=4,
    items_per_retrieval=(1, 4),
    chunk_chars=(60, 300),
    is_ending=False,
)


async def wait_for_topic(client_kwargs: ClientKwargs, topic: str, *, timeout_s: float) -> None:
    """Wait until `topic` exists, without naming it in a metadata request (that creates it)."""
    with anyio.fail_after(timeout_s):
        for _ in range(int(timeout_s / TOPIC_POLL_INTERVAL_S) + 1):
            try:
                await partition_counts(client_kwargs, [topic])
            except MissingTopicError:
                await anyio.sleep(TOPIC_POLL_INTERVAL_S)
            else:
                return
    raise AssertionError(f"topic {topic!r} never appeared")


async def reap(process: Process) -> None:
    """Kill the process if a failed test left it running."""
    if process.returncode is None:
        process.kill()
    with anyio.move_on_after(KILL_TIMEOUT_S, shield=True):
        await process.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
async def test_signal_drains_commits_every_offset_and_exits_zero(
    signum: signal.Signals,
    broker: EmbeddedBroker,
    client_kwargs: ClientKwargs,
    unique_topic: Callable[[str], str],
    tmp_path: Path,
) -> None:
    events = generate(23, SHAPE)
    finalizes = sum(isinstance(e, Finalize) for e in events)
    source, sink, dlq = unique_topic("in"), unique_topic("out"), unique_topic("dlq")
    group = unique_topic("group")
    await create_input(client_kwargs, source, partitions=3)
    await produce(client_kwargs, source, event_records(events))
    settings = settings_for(
        broker.bootstrap_servers,
        input_topic=source,
        output_topic=sink,
        dlq_topic=dlq,
        group_id=group,
    )
    config = write_config(tmp_path / "run.toml", settings)
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("wb") as stderr:
        process = await anyio.open_process(
            cli_command(config),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=cli_environment(),
        )
    try:
        with anyio.fail_after(RUN_TIMEOUT_S):
            await wait_for_topic(client_kwargs, sink, timeout_s=RUN_TIMEOUT_S)
            bundles = await collect(client_kwargs, sink, finalizes, timeout_s=RUN_TIMEOUT_S)
        process.send_signal(signum)
        with anyio.fail_after(EXIT_TIMEOUT_S):
            returncode = await process.wait()
    finally:
        await reap(process)
    log = stderr_path.read_text(encoding="utf-8", errors="replace")

    assert returncode == 0, log
    stopped = re.search(r"stopped: .*", log)
    assert stopped, log
    assert f"{finalizes} bundles" in stopped.group(), stopped.group()
    assert "Traceback" not in log, log
    assert len(bundles) == finalizes
    assert bundles_by_id(bundles) == replay_bundles(events)
    with anyio.fail_after(RUN_TIMEOUT_S):
        marks = await high_watermarks(client_kwargs, source, timeout_s=RUN_TIMEOUT_S)
        committed = await committed_offsets(client_kwargs, group, list(marks))
    assert sum(marks.values()) == len(events)
    assert {tp: offset or 0 for tp, offset in committed.items()} == marks
