"""The `stream-ctx` command: replay, run, demo, schema, and the local loop (broker, produce,
tail)."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TypeVar

import anyio

from stream_ctx.errors import BrokerError, ConfigError, StreamCtxError
from stream_ctx.settings import ENV_PREFIX, load_settings
from stream_ctx.shell.commands.broker import run_broker, start_hint
from stream_ctx.shell.commands.logs import configure_logging
from stream_ctx.shell.commands.replay import replay
from stream_ctx.shell.commands.run import serve
from stream_ctx.shell.commands.schema import SCHEMA_NAMES, render_schema
from stream_ctx.shell.commands.subcommand import DescriptionFirstParser, add_command
from stream_ctx.shell.commands.workers import run_workers

log = logging.getLogger("stream_ctx.cli")
_T = TypeVar("_T")
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    is_json = bool(getattr(args, "log_json", False))
    if hasattr(args, "log_level"):
        configure_logging(json_format=is_json, level=logging.getLevelName(args.log_level))
    try:
        status: int = args.handler(args)
    except StreamCtxError as exc:
        hint = _broker_hint(args) if isinstance(exc, BrokerError) else ""
        if is_json:  # the last line is JSON like every other
            log.error(
                "%s: %s%s", type(exc).__name__, exc, hint, extra={"error": type(exc).__name__}
            )
        else:
            print(f"stream-ctx: {type(exc).__name__}: {exc}{hint}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C before a command's own signal handling is in place
        return 130
    return status


def _broker_hint(args: argparse.Namespace) -> str:
    """For `run`, `produce` and `tail` on a local address nobody answers: how to start one."""
    if not getattr(args, "is_broker_client", False):
        return ""
    try:
        servers = load_settings(args.config).kafka.servers
    except StreamCtxError:
        return ""
    return start_hint(servers)


def _run_async(function: Callable[[], Awaitable[_T]]) -> _T:
    """Run a coroutine; a task group's lone StreamCtxError is raised as itself."""
    try:
        return anyio.run(function, backend="asyncio")
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1 and isinstance(group.exceptions[0], StreamCtxError):
            raise group.exceptions[0] from None
        raise


def _replay(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    limit = settings.kafka.max_event_bytes  # the limit `run` applies
    if args.events == "-":
        bad = replay(
            settings.bundle, sys.stdin.buffer, sys.stdout.buffer, sys.stderr, max_event_bytes=limit
        )
    else:
        try:
            with Path(args.events).open("rb") as events:
                bad = replay(
                    settings.bundle,
                    events,
                    sys.stdout.buffer,
                    sys.stderr,
                    max_event_bytes=limit,
                    source=args.events,
                )
        except OSError as exc:
            print(f"stream-ctx: cannot read {args.events!r}: {exc.strerror}", file=sys.stderr)
            return 2
    sys.stdout.flush()
    if bad:
        print(f"stream-ctx: {bad} bad line(s) skipped", file=sys.stderr)
        return 1
    return 0


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
        "starting stream-ctx %s: brokers %s, input %s, output %s, dead letters %s, group %r;"
        " config: %s",
        _version(),
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
    if args.workers > 1:
        worker_argv = ["run", *_run_flags(args)]
        run = partial(
            run_workers,
            worker_argv,
            args.workers,
            environ=os.environ,
            metrics_port=settings.metrics.port,
        )
        return _run_async(run)
    _run_async(partial(serve, settings))
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


def _worker_count(text: str) -> int:
    count = int(text)
    if count < 1:
        raise argparse.ArgumentTypeError(f"--workers must be an integer >= 1, got {text!r}")
    return count


def _config_source(path: Path | None, flags: Sequence[str]) -> str:
    """Where the settings came from: the file (or the defaults), variables, flags."""
    parts = [str(path) if path is not None else "built-in defaults"]
    parts += sorted(name for name in os.environ if name.startswith(ENV_PREFIX))
    parts += flags
    return " + ".join(parts)


def _broker(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    port = args.port if args.port is not None else _local_port(settings.kafka.servers[0])
    run = partial(run_broker, settings, port=port, partitions=args.partitions, out=sys.stdout)
    _run_async(run)
    return 0


def _local_port(server: str) -> int:
    """The port of a bootstrap address on this machine, where `broker` is to listen."""
    host, _, port = server.rpartition(":")
    if host not in ("localhost", "127.0.0.1") or not port.isdigit():
        raise ConfigError(
            f"`kafka.bootstrap_servers` starts with {server!r}, not localhost:<port> or"
            " 127.0.0.1:<port>; give `stream-ctx broker --port`"
        )
    return int(port)


def _produce(args: argparse.Namespace) -> int:
    from stream_ctx.shell.commands.produce import produce_lines

    settings = load_settings(args.config)
    topic = args.topic or settings.kafka.input_topics[0]
    try:
        with (
            open(sys.stdin.fileno(), "rb", closefd=False)
            if args.events == "-"
            else Path(args.events).open("rb")
        ) as lines:
            source = "<stdin>" if args.events == "-" else args.events
            produce = partial(
                produce_lines, settings, lines, source=source, topic=topic, err=sys.stderr
            )
            done = _run_async(produce)
    except OSError as exc:
        print(f"stream-ctx: cannot read {args.events!r}: {exc.strerror}", file=sys.stderr)
        return 2
    print(
        f"sent {done.sent} event(s) of {done.conversations} conversation(s) to {topic!r}"
        + (f"; {done.bad} bad line(s) skipped" if done.bad else ""),
        file=sys.stderr,
    )
    return 1 if done.bad else 0


def _tail(args: argparse.Namespace) -> int:
    from stream_ctx.shell.commands.tail import tail_bundles

    settings = load_settings(args.config)
    tail = partial(
        tail_bundles,
        settings,
        out=sys.stdout,
        err=sys.stderr,
        from_beginning=args.from_beginning,
        max_bundles=args.count,
    )
    try:
        _run_async(tail)
    except KeyboardInterrupt:  # Ctrl-C is how a tail ends
        return 0
    return 0


def _healthcheck(args: argparse.Namespace) -> int:
    from stream_ctx.shell.commands.healthcheck import probe

    problems = probe(load_settings(args.config).metrics, workers=args.workers)
    for problem in problems:
        print(f"stream-ctx: unhealthy: {problem}", file=sys.stderr)
    return 1 if problems else 0


def _version() -> str:
    return importlib.metadata.version("stream-ctx")


def _demo(args: argparse.Namespace) -> int:
    from stream_ctx.shell.commands.demo import run_demo

    configure_logging(level=logging.WARNING)
    port = args.inspect_port if args.inspect else None
    serve_port = args.serve_port if args.serve else None
    demo = partial(
        run_demo,
        conversations=args.conversations,
        seed=args.seed,
        inspect_port=port,
        serve_port=serve_port,
    )
    status: int = anyio.run(demo)
    return status


def _serve(args: argparse.Namespace) -> int:
    from stream_ctx.shell.serve.service import run_serve

    overrides = {f"serve.{k}": getattr(args, k) for k in ("host", "port") if getattr(args, k)}
    settings = load_settings(args.config, overrides=overrides)
    _run_async(partial(run_serve, settings, stdio=args.stdio))
    return 0


def _schema(args: argparse.Namespace) -> int:
    sys.stdout.buffer.write(render_schema(args.which) + b"\n")
    sys.stdout.flush()
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; docs/hooks.py renders the CLI reference from it."""
    parser = argparse.ArgumentParser(
        prog="stream-ctx", description="Turn retrieval events into lossless, token-counted bundles."
    )
    parser.add_argument("--version", action="version", version=f"stream-ctx {_version()}")
    logs = argparse.ArgumentParser(add_help=False)
    logs.add_argument("--log-json", action="store_true", help="one JSON object per log line")
    logs.add_argument("--log-level", choices=_LEVELS, default="INFO", help="default: INFO")
    commands = parser.add_subparsers(
        required=True, metavar="COMMAND", parser_class=DescriptionFirstParser
    )
    replay_cmd = add_command(
        commands,
        "replay",
        summary="run the core over a JSON-lines events file, one bundle per line to stdout",
    )
    replay_cmd.add_argument("--config", type=Path, help="TOML config file ([bundle] table)")
    replay_cmd.add_argument("events", help="events file (JSON lines), or - for stdin")
    replay_cmd.set_defaults(handler=_replay)

    run_cmd = add_command(
        commands, "run", parents=[logs], summary="process events from Kafka until SIGTERM/SIGINT"
    )
    run_cmd.add_argument("--config", type=Path, help="TOML config file")
    run_cmd.add_argument("--bootstrap-servers", help="overrides kafka.bootstrap_servers")
    run_cmd.add_argument("--group-id", help="overrides kafka.group_id")
    run_cmd.add_argument("--input-topic", action="append", help="overrides kafka.input_topics")
    run_cmd.add_argument("--output-topic", help="overrides kafka.output_topic")
    run_cmd.add_argument(
        "--workers",
        type=_worker_count,
        default=1,
        help="group members to run, one process each (default 1; up to one per core helps)",
    )
    run_cmd.set_defaults(handler=_run, is_broker_client=True)

    demo_cmd = add_command(
        commands, "demo", summary="run the processor on an embedded broker over a sample stream"
    )
    demo_cmd.add_argument("--conversations", type=int, default=24, help="sample size")
    demo_cmd.add_argument("--seed", type=int, default=42, help="sample seed")
    demo_cmd.add_argument(
        "--inspect", action="store_true", help="serve the live inspector and keep running"
    )
    demo_cmd.add_argument(
        "--inspect-port", type=int, default=8765, help="inspector port on 127.0.0.1 (0: any free)"
    )
    demo_cmd.add_argument(
        "--serve", action="store_true", help="also run `stream-ctx serve` (HTTP API, MCP) on it"
    )
    demo_cmd.add_argument(
        "--serve-port", type=int, default=8780, help="serve's port on 127.0.0.1 (0: any free)"
    )
    demo_cmd.set_defaults(handler=_demo)

    broker_cmd = add_command(
        commands,
        "broker",
        parents=[logs],
        summary="run the embedded broker alone, with the config's topics, until Ctrl-C",
    )
    broker_cmd.add_argument("--config", type=Path, help="TOML config file (topic names)")
    broker_cmd.add_argument(
        "--port",
        type=int,
        help="127.0.0.1 port; default: the port of kafka.bootstrap_servers (localhost:9092"
        " unless configured, so the other commands find it); 0: any free one",
    )
    broker_cmd.add_argument(
        "--partitions", type=int, default=4, help="partitions of the input topics (default 4)"
    )
    broker_cmd.set_defaults(handler=_broker)

    produce_cmd = add_command(
        commands,
        "produce",
        parents=[logs],
        summary="send a JSON-lines events file, keyed by conversation id",
    )
    produce_cmd.add_argument("--config", type=Path, help="TOML config file")
    produce_cmd.add_argument("--topic", help="default: the first of kafka.input_topics")
    produce_cmd.add_argument("events", help="events file (JSON lines), or - for stdin")
    produce_cmd.set_defaults(handler=_produce, is_broker_client=True)

    tail_cmd = add_command(
        commands,
        "tail",
        parents=[logs],
        summary="print bundles from kafka.output_topic as they arrive",
    )
    tail_cmd.add_argument("--config", type=Path, help="TOML config file")
    tail_cmd.add_argument(
        "--from-beginning", action="store_true", help="start at the oldest bundle, not the next"
    )
    tail_cmd.add_argument("--count", type=int, help="exit after this many bundles")
    tail_cmd.set_defaults(handler=_tail, is_broker_client=True)

    serve_cmd = add_command(
        commands,
        "serve",
        parents=[logs],
        summary="serve the latest bundles to agents over an HTTP API and MCP",
    )
    serve_cmd.add_argument("--config", type=Path, help="TOML config file ([kafka], [serve])")
    serve_cmd.add_argument("--host", help="overrides serve.host")
    serve_cmd.add_argument("--port", type=int, help="overrides serve.port")
    serve_cmd.add_argument(
        "--stdio", action="store_true", help="speak MCP on stdin/stdout (for hosts that launch it)"
    )
    serve_cmd.set_defaults(handler=_serve)

    health_cmd = add_command(
        commands,
        "healthcheck",
        summary="exit 0 when a local `run` answers /healthz on metrics.port",
    )
    health_cmd.add_argument("--config", type=Path, help="TOML config file (the one `run` reads)")
    health_cmd.add_argument(
        "--workers",
        type=_worker_count,
        default=1,
        help="as given to `run`: probe every worker (worker i serves on metrics.port + i)",
    )
    health_cmd.set_defaults(handler=_healthcheck)

    schema_cmd = add_command(
        commands,
        "schema",
        summary="print the JSON Schema (draft 2020-12) of input events and bundles",
    )
    schema_cmd.add_argument(
        "--which", choices=(*SCHEMA_NAMES, "all"), default="all", help="which schema to print"
    )
    schema_cmd.set_defaults(handler=_schema)
    return parser


if __name__ == "__main__":
    sys.exit(main())
