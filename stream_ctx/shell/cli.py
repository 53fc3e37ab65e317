"""The `stream-ctx` command: replay, run, demo, schema."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from stream_ctx.errors import StreamCtxError
from stream_ctx.shell.replay import replay
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
    return parser


if __name__ == "__main__":
    sys.exit(main())
