"""Offline replay: a JSON-lines events file in, one bundle per line out, exactly as Kafka's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import BinaryIO, TextIO

from stream_ctx.core.codec import decode_event, encode_bundle
from stream_ctx.core.config import BundleConfig
from stream_ctx.core.processor import ContextProcessor
from stream_ctx.errors import InvalidEventError


def replay(config: BundleConfig, lines: Iterable[bytes], out: BinaryIO, err: TextIO) -> int:
    """Write each finalize's bundle to `out`, report bad lines on `err`; return the bad count."""
    processor = ContextProcessor(config)
    bad = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = decode_event(line)
        except InvalidEventError as exc:
            bad += 1
            err.write(f"line {number}: {exc}\n")
            continue
        bundle = processor.apply(event, position=number)
        if bundle is not None:
            out.write(encode_bundle(bundle) + b"\n")
    return bad
