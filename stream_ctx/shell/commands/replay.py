"""`stream-ctx replay`: a JSON-lines events file in, one bundle per line out, exactly as Kafka's."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import BinaryIO, TextIO

from stream_ctx.core.conversation.processor import ContextProcessor
from stream_ctx.core.window.config import BundleConfig
from stream_ctx.core.wire.codec import encode_bundle
from stream_ctx.errors import InvalidEventError
from stream_ctx.settings import KafkaSettings, load_settings
from stream_ctx.shell.commands.subcommand import Commands, add_command
from stream_ctx.shell.processing.intake import bad_line, read_value

__all__ = ("add_to", "replay")

# An over-long line is read past in pieces of this size, so it never sits in memory whole.
_SKIP_CHUNK_BYTES = 1 << 20


def replay(
    config: BundleConfig,
    lines: BinaryIO,
    out: BinaryIO,
    err: TextIO,
    *,
    max_event_bytes: int = KafkaSettings().max_event_bytes,
    source: str = "<stdin>",
) -> int:
    """Write each finalize's bundle to `out`, report bad lines on `err` (as `source:LINE:COLUMN`);
    return the bad count.
    Each line passes the checks a record `run` consumes passes (`read_value`, same limit)."""
    processor = ContextProcessor(config)
    bad = 0
    for number, (line, size) in enumerate(_bounded(lines, max_event_bytes), start=1):
        if not line.strip():
            continue
        try:
            event = read_value(line, max_bytes=max_event_bytes, size=size)
            bundle = processor.apply(event, position=number)
        except InvalidEventError as exc:  # `run` dead-letters it, a refused finalize too
            bad += 1
            err.write(bad_line(source, number, line, exc) + "\n")
            continue
        if bundle is not None:
            out.write(encode_bundle(bundle) + b"\n")
    return bad


def _bounded(stream: BinaryIO, max_bytes: int) -> Iterator[tuple[bytes, int | None]]:
    """Lines without their newline; one over `max_bytes` is read past in chunks, never held
    whole, and comes as its head with its full size (enough for the size check to refuse it)."""
    limit = max_bytes + 2  # the value and "\r\n"
    for line in iter(partial(stream.readline, limit), b""):
        if len(line) < limit or line.endswith(b"\n"):
            yield line.rstrip(b"\r\n"), None
            continue
        size = len(line)
        for rest in iter(partial(stream.readline, _SKIP_CHUNK_BYTES), b""):
            size += len(rest)
            if rest.endswith(b"\n"):
                size -= 1
                break
        yield line, size


def add_to(commands: Commands) -> None:
    """`stream-ctx replay [--config FILE] EVENTS`."""
    command = add_command(
        commands,
        "replay",
        summary="run the core over a JSON-lines events file, one bundle per line to stdout",
    )
    command.add_argument("--config", type=Path, help="TOML config file ([bundle] table)")
    command.add_argument("events", help="events file (JSON lines), or - for stdin")
    command.set_defaults(handler=_replay)


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
