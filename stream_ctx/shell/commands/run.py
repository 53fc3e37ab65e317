"""`stream-ctx run`: the processor as a service, with its HTTP server (metrics, probes, the
inspector), signal handling and a bounded graceful shutdown; `--workers N` runs N of them."""

from __future__ import annotations

import argparse
import logging
import os
import signal
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import anyio
import anyio.abc
from starlette.applications import Starlette

from stream_ctx.errors import ConfigError, ShutdownTimeoutError
from stream_ctx.settings import ENV_PREFIX, MetricsSettings, Settings, load_settings
from stream_ctx.shell.commands.subcommand import (
    Commands,
    add_command,
    core_note,
    log_options,
    missing_core_reason,
    run_async,
    version,
    worker_count,
)
from stream_ctx.shell.commands.workers import run_workers
from stream_ctx.shell.http.inspector.history import InspectorHistory
from stream_ctx.shell.http.inspector.routes import Inspector, required_token
from stream_ctx.shell.http.server import http_app, run_http_server
from stream_ctx.shell.processing.runner import Runner
from stream_ctx.shell.processing.stats import RunnerStats

__all__ = ("SHUTDOWN_BOUND_S", "add_to", "new_history", "run_service", "runner_app")

log = logging.getLogger(__name__)

# SIGTERM to exit: the current batch's writes and the commit (seconds at most), then leaving
# the group. Past this the process exits anyway; uncommitted events are re-read on restart.
SHUTDOWN_BOUND_S = 30.0


def add_to(commands: Commands) -> None:
    """`stream-ctx run [--config FILE] [overrides] [--workers N]`."""
    command = add_command(
        commands,
        "run",
        parents=[log_options()],
        summary="process events from Kafka until SIGTERM/SIGINT",
    )
    command.add_argument("--config", type=Path, help="TOML config file")
    command.add_argument("--bootstrap-servers", help="overrides kafka.bootstrap_servers")
    command.add_argument("--group-id", help="overrides kafka.group_id")
    command.add_argument("--input-topic", action="append", help="overrides kafka.input_topics")
    command.add_argument("--output-topic", help="overrides kafka.output_topic")
    command.add_argument(
        "--workers",
        type=worker_count,
        default=1,
        help="group members to run, one process each (default 1; up to one per core helps)",
    )
    command.set_defaults(handler=_run, is_broker_client=True)


def _run(args: argparse.Namespace) -> int:
    overrides: dict[str, object] = {}
    if args.bootstrap_servers:
        overrides["kafka.bootstrap_servers"] = args.bootstrap_servers
    if args.group_id:
        overrides["kafka.group_id"] = args.group_id
    if args.input_topic:
        overrides["kafka.input_topics"] = args.input_topic
    if args.output_topic:
        overrides["kafka.output_topic"] = args.output_topic
    settings = load_settings(args.config, overrides=overrides)
    kafka = settings.kafka
    log.info(
        "starting stream-ctx %s (%s): brokers %s, input %s, output %s, dead letters %s,"
        " group %r; config: %s",
        version(),
        core_note(settings.bundle.core),
        ",".join(kafka.servers),
        ",".join(kafka.input_topics),
        kafka.output_topic,
        kafka.dlq_topic,
        kafka.group_id,
        _config_source(args.config, [f"--{k.split('.')[1].replace('_', '-')}" for k in overrides]),
        extra={
            "brokers": kafka.servers,
            "input_topics": kafka.input_topics,
            "output_topic": kafka.output_topic,
            "dlq_topic": kafka.dlq_topic,
            "group_id": kafka.group_id,
        },
    )
    missing = missing_core_reason() if settings.bundle.core == "auto" else None
    if missing is not None:
        log.warning("running the Python core, the same bundles at a higher CPU cost: %s", missing)
    if args.workers > 1:
        worker_argv = ["run", *_run_flags(args)]
        run = partial(
            run_workers,
            worker_argv,
            args.workers,
            environ=os.environ,
            metrics_port=settings.metrics.port,
            drain_bound_s=SHUTDOWN_BOUND_S,
        )
        return run_async(run)
    run_async(partial(run_service, settings))
    return 0


def _run_flags(args: argparse.Namespace) -> list[str]:
    """The `run` flags of this command, for each of its workers (which run one member each)."""
    flags = ["--log-level", args.log_level, *(["--log-json"] if args.log_json else [])]
    if args.config is not None:
        flags += ["--config", str(args.config)]
    for name in ("bootstrap_servers", "group_id", "output_topic"):
        if getattr(args, name):
            flags += [f"--{name.replace('_', '-')}", getattr(args, name)]
    for topic in args.input_topic or []:
        flags += ["--input-topic", topic]
    return flags


def _config_source(path: Path | None, flags: Sequence[str]) -> str:
    """Where the settings came from: the file (or the defaults), variables, flags."""
    parts = [str(path) if path is not None else "built-in defaults"]
    parts += sorted(name for name in os.environ if name.startswith(ENV_PREFIX))
    parts += flags
    return " + ".join(parts)


def new_history(settings: MetricsSettings) -> InspectorHistory | None:
    """The bounded history the inspector reads, if the inspector is on."""
    if not settings.inspector or settings.port is None:
        return None
    return InspectorHistory(
        max_events=settings.history_events,
        max_bundles=settings.history_bundles,
        max_conversations=settings.history_conversations,
    )


def runner_app(runner: Runner) -> Starlette:
    """A runner's probes, plus its inspector when the runner keeps a history."""
    if runner.history is None:
        return http_app(runner.metrics, runner.health)
    settings = runner.settings
    token = required_token(settings.metrics.host, settings.metrics.inspector_token)
    inspector = Inspector(
        runner.metrics, runner.history, runner.partitions.window_of, settings.bundle
    )
    return http_app(runner.metrics, runner.health, inspector=inspector, token=token)


async def run_service(settings: Settings) -> RunnerStats:
    """Run until SIGTERM or SIGINT, then drain, publish, commit and return."""
    runner = Runner(settings, history=new_history(settings.metrics))
    await _serve_and_run(runner, settings)
    return runner.stats


async def _serve_and_run(runner: Runner, settings: Settings) -> None:
    """The signal watcher, the HTTP server if configured, and the runner, in one task group."""
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
