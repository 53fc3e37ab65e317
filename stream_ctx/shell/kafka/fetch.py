"""Fetching input batches so one undecodable record batch stalls its partition, not the member.

aiokafka raises a decoding error out of `getmany` without naming the partition, after moving the
positions of records it never returned; this module rewinds to what was processed, finds the
partition by fetching each alone, and pauses only that one.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Mapping

import cramjam
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import CorruptRecordException, UnsupportedCodecError
from aiokafka.structs import ConsumerRecord, TopicPartition

from stream_ctx.errors import UndecodableBatchError

__all__ = ("DECODE_ERRORS", "Batch", "fetch_isolating")

Batch = dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]

# What decoding a record batch raises: a missing or unknown codec, a bad CRC, or the
# decompressor failing on corrupt bytes (cramjam for snappy, lz4, zstd; gzip/zlib for gzip).
DECODE_ERRORS = (
    UnsupportedCodecError,
    CorruptRecordException,
    cramjam.DecompressionError,
    gzip.BadGzipFile,
    zlib.error,
    EOFError,
)
# aiokafka.codec's decompressors by function name: the frame that failed names the codec.
_DECODERS = {f"{name}_decode": name for name in ("gzip", "snappy", "lz4", "zstd")}
_NAMED_CODEC = re.compile(r"\b(gzip|snappy|lz4|zstd)\b|codec (0x[0-9a-f]+)")


async def fetch_isolating(
    consumer: AIOKafkaConsumer,
    positions: Mapping[TopicPartition, int],
    *,
    max_records: int,
    timeout_ms: int,
) -> tuple[Batch, list[UndecodableBatchError]]:
    """After a decoding error: rewind each partition to its `positions` entry (the next offset
    to process), fetch each alone, pause the ones that still fail there."""
    for tp, offset in positions.items():
        consumer.seek(tp, offset)
    batch: Batch = {}
    failed: list[UndecodableBatchError] = []
    for tp, offset in positions.items():
        try:
            batch.update(await consumer.getmany(tp, timeout_ms=timeout_ms, max_records=max_records))
        except DECODE_ERRORS as exc:
            consumer.seek(tp, offset)  # the failed fetch moved past records it never returned
            consumer.pause(tp)
            failed.append(
                UndecodableBatchError(
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=offset,
                    codec=_codec_of(exc),
                    cause=_describe(exc),
                )
            )
    return batch, failed


def _codec_of(exc: BaseException) -> str:
    """The codec a decoding error came from: the failing decompressor, else the message."""
    tb = exc.__traceback__
    found = None
    for _ in range(1000):  # a traceback is a few dozen frames deep
        if tb is None:
            break
        found = _DECODERS.get(tb.tb_frame.f_code.co_name, found)
        tb = tb.tb_next
    if found is not None:
        return found
    match = _NAMED_CODEC.search(str(exc))
    return next((group for group in match.groups() if group), "unknown") if match else "unknown"


def _describe(exc: BaseException) -> str:
    """`Class: message`, once (aiokafka's messages already start with their class name)."""
    name, text = type(exc).__name__, str(exc)
    return text if text.startswith(name) else f"{name}: {text}"
