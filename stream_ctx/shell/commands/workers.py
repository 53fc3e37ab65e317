"""`stream-ctx run --workers N`: N members of the consumer group from one command.

The core is CPU-bound Python, so one process uses one core; N processes share the input's
partitions through the group, each a whole `stream-ctx run` (its own clients, state, drain).
The parent only starts them, forwards SIGTERM/SIGINT, and stops the rest when one fails.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence

import anyio
from anyio.abc import Process

__all__ = ("run_workers",)

log = logging.getLogger(__name__)

# A worker exits this long at most after its drain, however it ends.
_EXIT_BOUND_S = 5.0
# A worker that ignored SIGKILL this long is beyond our reach; the parent exits anyway.
_KILL_BOUND_S = 5.0
# Exit status when the parent itself was asked to stop and every worker drained cleanly.
_OK = 0


async def run_workers(
    argv: Sequence[str],
    count: int,
    *,
    environ: Mapping[str, str],
    metrics_port: int | None,
    drain_bound_s: float,
) -> int:
    """Run `count` copies of `stream-ctx <argv>`; returns the first non-zero exit status, else 0.

    Worker i serves metrics on `metrics_port + i` when a fixed port is configured (0 lets each
    pick its own). Workers run in their own session, so a terminal's Ctrl-C reaches only this
    process, which passes one SIGTERM to each; each drains within `drain_bound_s` of it.
    """
    processes: list[Process] = []
    status = _OK
    try:
        for number in range(count):
            env = dict(environ)
            if metrics_port:
                env["STREAM_CTX_METRICS_PORT"] = str(metrics_port + number)
            processes.append(
                await anyio.open_process(
                    [sys.executable, "-m", "stream_ctx.shell.commands.cli", *argv],
                    stdin=subprocess.DEVNULL,
                    stdout=None,
                    stderr=None,
                    env=env,
                    start_new_session=True,
                )
            )
        log.info("started %d workers (pids %s)", count, ", ".join(str(p.pid) for p in processes))
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_forward_signals, processes)
            first_failure = await _wait_all(processes)
            tasks.cancel_scope.cancel()
        status = first_failure
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(processes, bound_s=drain_bound_s + _EXIT_BOUND_S)
    return status


async def _wait_all(processes: Sequence[Process]) -> int:
    """Wait for every worker; the first to fail stops the others. Its status is returned."""
    failures: list[int] = []

    async def watch(process: Process) -> None:
        code = await process.wait()
        if code != 0 and not failures:
            failures.append(code)
            log.error("worker pid %d exited with status %d; stopping the others", process.pid, code)
            _terminate(processes)

    async with anyio.create_task_group() as tasks:
        for process in processes:
            tasks.start_soon(watch, process)
    return failures[0] if failures else _OK


async def _forward_signals(processes: Sequence[Process]) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("%s: stopping %d workers", signal.Signals(signum).name, len(processes))
            _terminate(processes)


def _terminate(processes: Sequence[Process]) -> None:
    for process in processes:
        if process.returncode is None:
            process.terminate()


async def _stop(processes: Sequence[Process], *, bound_s: float) -> None:
    """SIGTERM what still runs, wait for the drains (bounded), then SIGKILL what is left."""
    _terminate(processes)
    with anyio.move_on_after(bound_s):
        for process in processes:
            await process.wait()
    for process in processes:
        if process.returncode is None:
            log.error("worker pid %d did not stop in %.0f s; killed", process.pid, bound_s)
            process.kill()
            with anyio.move_on_after(_KILL_BOUND_S):
                await process.wait()
