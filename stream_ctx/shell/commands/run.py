"""Runs the processor as a service: signal handling and a bounded graceful shutdown."""

from __future__ import annotations

import logging
import signal
from functools import partial

import anyio

from stream_ctx.errors import ConfigError, ShutdownTimeoutError, StreamCtxError
from stream_ctx.settings import Settings
from stream_ctx.shell.http.server import new_history, run_http_server, runner_app
from stream_ctx.shell.processing.runner import Runner, RunnerStats

log = logging.getLogger("stream_ctx.service")

# SIGTERM to exit: the current batch's writes and the commit (seconds at most), then leaving
# the group. Past this the process exits anyway; uncommitted events are re-read on restart.
SHUTDOWN_BOUND_S = 30.0


async def serve(settings: Settings) -> RunnerStats:
    """Run until SIGTERM or SIGINT, then drain, publish, commit and return."""
    runner = Runner(settings, history=new_history(settings.metrics))
    try:
        await _supervise(runner, settings)
    except BaseExceptionGroup as group:
        # One failure (a missing topic, a refused connection) is reported as itself.
        if len(group.exceptions) == 1 and isinstance(group.exceptions[0], StreamCtxError):
            raise group.exceptions[0] from None
        raise
    return runner.stats


async def _supervise(runner: Runner, settings: Settings) -> None:
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_stop_on_signal, runner)
        if settings.metrics.port is not None:
            serve_metrics = partial(
                run_http_server,
                runner_app(runner),
                host=settings.metrics.host,
                port=settings.metrics.port,
            )
            try:
                await tasks.start(serve_metrics)
            except OSError as exc:
                # A busy or unbindable port is the operator's to fix: one line, exit 2.
                raise ConfigError(
                    f"`metrics.port` {settings.metrics.port} on `metrics.host`"
                    f" {settings.metrics.host!r} cannot be served: {exc.strerror or exc}"
                ) from exc
        await tasks.start(_run_then_cancel, runner, tasks.cancel_scope)


async def _run_then_cancel(
    runner: Runner, scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None]
) -> None:
    await runner.run(task_status=task_status)
    scope.cancel()


async def _stop_on_signal(runner: Runner) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("%s: draining, then exiting", signal.Signals(signum).name)
            runner.stop.set()
            break
    await anyio.sleep(SHUTDOWN_BOUND_S)
    # Raising cancels the runner; the exit status then tells a supervisor the drain was cut.
    raise ShutdownTimeoutError(
        f"shutdown took over {SHUTDOWN_BOUND_S:.0f} s; exited without finishing the drain "
        "(uncommitted events are re-read on restart)"
    )
