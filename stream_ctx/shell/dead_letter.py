"""Dead-letter records: the original key, value and headers plus headers naming the error.

Header names follow Kafka Streams' dead-letter queue (KIP-1034) so existing tooling reads them.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiokafka.structs import ConsumerRecord

from stream_ctx.errors import InvalidEventError

Headers = list[tuple[str, bytes]]


def dead_letter_headers(record: ConsumerRecord[bytes, bytes], error: BaseException) -> Headers:
    """The record's own headers followed by the error and where the record came from."""
    own: Sequence[tuple[str, bytes]] = record.headers or ()
    headers: Headers = [(name, value) for name, value in own]
    headers += [
        ("__streams.errors.exception", type(error).__name__.encode()),
        ("__streams.errors.message", str(error).encode("utf-8", "replace")),
        ("__streams.errors.topic", record.topic.encode()),
        ("__streams.errors.partition", str(record.partition).encode()),
        ("__streams.errors.offset", str(record.offset).encode()),
    ]
    if isinstance(error, InvalidEventError) and error.path is not None:
        headers.append(("stream-ctx.errors.path", error.path.encode()))
    return headers
