"""Runs the processor as a service: signal handling and a bounded graceful shutdown."""

from __future__ import annotations

import logging
import signal
from functools import partial

import anyio

from stream_ctx.shell.metrics import run_metrics_server
from stream_ctx.shell.runner import Runner, RunnerStats
from stream_ctx.shell.settings import Settings

log = logging.getLogger("stream_ctx.service")

# SIGTERM to exit: the current batch's writes and the commit (seconds at most), then leaving
# the group. Past this the process exits anyway; uncommitted events are re-read on restart.
SHUTDOWN_BOUND_S = 30.0


async def serve(settings: Settings) -> RunnerStats:
    """Run until SIGTERM or SIGINT, then drain, publish, commit and return."""
    runner = Runner(settings)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_stop_on_signal, runner, tasks.cancel_scope)
        if settings.metrics.port is not None:
            serve_metrics = partial(
                run_metrics_server,
                runner.metrics,
                runner.health,
                host=settings.metrics.host,
                port=settings.metrics.port,
            )
            await tasks.start(serve_metrics)
        await tasks.start(_run_then_cancel, runner, tasks.cancel_scope)
    return runner.stats


async def _run_then_cancel(
    runner: Runner, scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None]
) -> None:
    await runner.run(task_status=task_status)
    scope.cancel()


async def _stop_on_signal(runner: Runner, scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("%s: draining, then exiting", signal.Signals(signum).name)
            runner.stop.set()
            break
    await anyio.sleep(SHUTDOWN_BOUND_S)
    log.error("shutdown took over %.0f s; exiting without waiting further", SHUTDOWN_BOUND_S)
    scope.cancel()
