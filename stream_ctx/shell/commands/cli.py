"""The `stream-ctx` command: each subcommand's module adds its parser and handler; this one parses,
runs the handler, and reports a StreamCtxError as one line and exit status 2."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from stream_ctx.errors import BrokerError, StreamCtxError
from stream_ctx.settings import load_settings
from stream_ctx.shell.commands import (
    broker,
    demo,
    healthcheck,
    produce,
    replay,
    run,
    schema,
    serve,
    tail,
)
from stream_ctx.shell.commands.logs import configure_logging
from stream_ctx.shell.commands.subcommand import DescriptionFirstParser, core_note, version

__all__ = ("build_parser", "main")

log = logging.getLogger(__name__)

# In the order `stream-ctx --help` lists them.
_SUBCOMMANDS = (replay, run, demo, broker, produce, tail, serve, healthcheck, schema)


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
    return broker.start_hint(servers)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; docs/hooks.py renders the CLI reference from it."""
    parser = argparse.ArgumentParser(
        prog="stream-ctx", description="Turn retrieval events into lossless, token-counted bundles."
    )
    parser.add_argument(
        "--version", action="version", version=f"stream-ctx {version()} ({core_note()})"
    )
    commands = parser.add_subparsers(
        required=True, metavar="COMMAND", parser_class=DescriptionFirstParser
    )
    for subcommand in _SUBCOMMANDS:
        subcommand.add_to(commands)
    return parser


if __name__ == "__main__":
    sys.exit(main())
