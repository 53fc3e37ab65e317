"""`stream-ctx run --workers 2`: two members of one group share the partitions, then drain."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio

from stream_ctx.core.wire.events import Finalize
from stream_ctx.corpora.workload import generate
from stream_ctx.shell.kafka.admin import ClientKwargs
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from tests.integration.kafka_io import (
    bundles_by_id,
    cli_command,
    cli_environment,
    collect,
    create_input,
    event_records,
    produce,
    settings_for,
    write_config,
)
from tests.integration.test_runner import replay_bundles
from tests.integration.test_shutdown import EXIT_TIMEOUT_S, RUN_TIMEOUT_S, SHAPE, reap

PARTITIONS = 4
# The log is read again this often while the group forms (a join takes ~3 s here).
_LOG_POLL_S = 0.1
_ASSIGNED = re.compile(r"assigned ((?:\S+/\d+(?:, )?)+);")
_STOPPED = re.compile(r"stopped: (\d+) events, (\d+) bundles")


async def wait_for_split(log: Path, *, timeout_s: float) -> list[set[str]]:
    """Wait until the last two assignments in the log split every partition between two
    members (the first member may hold them all until the second joins)."""
    with anyio.fail_after(timeout_s):
        for _ in range(int(timeout_s / _LOG_POLL_S) + 1):
            text = await anyio.Path(log).read_text()
            found = [set(m.group(1).split(", ")) for m in _ASSIGNED.finditer(text)]
            if len(found) >= 2:
                first, second = found[-2:]
                if not first & second and len(first | second) == PARTITIONS:
                    return [first, second]
            await anyio.sleep(_LOG_POLL_S)
    raise AssertionError(await anyio.Path(log).read_text())


async def test_two_workers_split_the_partitions_and_publish_every_bundle_once(
    broker: EmbeddedBroker,
    client_kwargs: ClientKwargs,
    unique_topic: Callable[[str], str],
    tmp_path: Path,
) -> None:
    events = generate(31, SHAPE)
    finalizes = sum(isinstance(e, Finalize) for e in events)
    source, sink = unique_topic("in"), unique_topic("out")
    await create_input(client_kwargs, source, partitions=PARTITIONS)
    settings = settings_for(
        broker.bootstrap_servers,
        input_topic=source,
        output_topic=sink,
        dlq_topic=unique_topic("dlq"),
        group_id=unique_topic("group"),
    )
    config = write_config(tmp_path / "run.toml", settings)
    log = tmp_path / "stderr.log"
    with log.open("wb") as stderr:
        process = await anyio.open_process(
            [*cli_command(config), "--workers", "2"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=cli_environment(),
        )
    try:
        split = await wait_for_split(log, timeout_s=RUN_TIMEOUT_S)
        await produce(client_kwargs, source, event_records(events))
        bundles = await collect(client_kwargs, sink, finalizes, timeout_s=RUN_TIMEOUT_S)
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(EXIT_TIMEOUT_S):
            returncode = await process.wait()
    finally:
        await reap(process)
    text = log.read_text(encoding="utf-8", errors="replace")

    assert returncode == 0, text
    assert "started 2 workers" in text, text
    assert "Traceback" not in text, text
    assert all(len(member) == PARTITIONS // 2 for member in split), split
    stopped = [(int(e), int(b)) for e, b in _STOPPED.findall(text)]
    assert len(stopped) == 2, text
    assert all(events_seen > 0 for events_seen, _ in stopped), stopped  # both did work
    assert sum(e for e, _ in stopped) == len(events)
    assert sum(b for _, b in stopped) == finalizes
    assert bundles_by_id(bundles) == replay_bundles(events)
