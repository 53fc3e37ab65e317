"""The `stream-ctx` command: replay, run, demo, schema."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import anyio

from stream_ctx.errors import StreamCtxError
from stream_ctx.shell.logs import configure_logging
from stream_ctx.shell.replay import replay
from stream_ctx.shell.schema import SCHEMA_NAMES, render_schema
from stream_ctx.shell.service import serve
from stream_ctx.shell.settings import load_settings


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.handler(args)
    except StreamCtxError as exc:
        print(f"stream-ctx: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    return status


def _replay(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    if args.events == "-":
        bad = replay(settings.bundle, sys.stdin.buffer, sys.stdout.buffer, sys.stderr)
    else:
        try:
            with Path(args.events).open("rb") as events:
                bad = replay(settings.bundle, events, sys.stdout.buffer, sys.stderr)
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
    configure_logging(json_format=args.log_json)
    anyio.run(serve, settings, backend="asyncio")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from stream_ctx.shell.demo import run_demo

    configure_logging(level=logging.WARNING)
    status: int = anyio.run(partial(run_demo, conversations=args.conversations, seed=args.seed))
    return status


def _schema(args: argparse.Namespace) -> int:
    sys.stdout.buffer.write(render_schema(args.which) + b"\n")
    sys.stdout.flush()
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-ctx", description="Turn retrieval events into lossless, token-counted bundles."
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    replay_cmd = commands.add_parser(
        "replay", help="run the core over a JSON-lines events file, one bundle per line to stdout"
    )
    replay_cmd.add_argument("--config", type=Path, help="TOML config file ([bundle] table)")
    replay_cmd.add_argument("events", help="events file (JSON lines), or - for stdin")
    replay_cmd.set_defaults(handler=_replay)

    run_cmd = commands.add_parser("run", help="process events from Kafka until SIGTERM/SIGINT")
    run_cmd.add_argument("--config", type=Path, help="TOML config file")
    run_cmd.add_argument("--bootstrap-servers", help="overrides kafka.bootstrap_servers")
    run_cmd.add_argument("--group-id", help="overrides kafka.group_id")
    run_cmd.add_argument("--input-topic", action="append", help="overrides kafka.input_topics")
    run_cmd.add_argument("--output-topic", help="overrides kafka.output_topic")
    run_cmd.add_argument("--log-json", action="store_true", help="one JSON object per log line")
    run_cmd.set_defaults(handler=_run)

    demo_cmd = commands.add_parser(
        "demo", help="run the processor on an embedded broker over a sample stream"
    )
    demo_cmd.add_argument("--conversations", type=int, default=24, help="sample size")
    demo_cmd.add_argument("--seed", type=int, default=42, help="sample seed")
    demo_cmd.set_defaults(handler=_demo)

    schema_cmd = commands.add_parser(
        "schema", help="print the JSON Schema (draft 2020-12) of input events and bundles"
    )
    schema_cmd.add_argument(
        "--which", choices=(*SCHEMA_NAMES, "all"), default="all", help="which schema to print"
    )
    schema_cmd.set_defaults(handler=_schema)
    return parser


if __name__ == "__main__":
    sys.exit(main())
