"""The dead-letter fallback when a broker refuses a record whole (Tansu never does, so a fake
producer stands in for a Kafka whose max.message.bytes was lowered after topic creation)."""

from __future__ import annotations

import asyncio

import anyio
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.structs import ConsumerRecord

from stream_ctx.errors import InvalidEventError
from stream_ctx.shell.kafka.dead_letter import send_dead_letter

# The fake broker's limit on a record value.
BROKER_LIMIT = 100
TIMEOUT_S = 5.0


class RefusingProducer:
    """Acknowledges values up to BROKER_LIMIT bytes and refuses larger ones, as Kafka does."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes | None, list[tuple[str, bytes]]]] = []

    async def send(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None,
        headers: list[tuple[str, bytes]],
    ) -> asyncio.Future[object]:
        self.sent.append((value, headers))
        ack: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        if value is not None and len(value) > BROKER_LIMIT:
            ack.set_exception(MessageSizeTooLargeError())
        else:
            ack.set_result("landed")
        return ack


def record(value: bytes) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord("in", 2, 41, 0, 0, b"c-1", value, None, 3, len(value), (("trace", b"t"),))


async def test_refused_dead_letter_parks_its_head_with_headers_saying_so_and_counts_it() -> None:
    producer = RefusingProducer()
    truncated: list[None] = []
    with anyio.fail_after(TIMEOUT_S):
        ack = await send_dead_letter(
            producer,
            record(b"x" * 500),
            InvalidEventError("too big", path="$"),
            topic="dlq",
            partitions=1,
            head_bytes=60,
            on_truncated=lambda: truncated.append(None),
        )
        assert await ack == "landed"
    (whole, _), (head, headers) = producer.sent
    assert whole == b"x" * 500
    assert head == b"x" * 60
    assert ("trace", b"t") in headers
    assert dict(headers)["stream-ctx.errors.value-bytes"] == b"500"
    assert dict(headers)["stream-ctx.errors.value-truncated-to"] == b"60"
    assert truncated == [None]


async def test_dead_letter_the_broker_takes_goes_whole_once() -> None:
    producer = RefusingProducer()
    with anyio.fail_after(TIMEOUT_S):
        ack = await send_dead_letter(
            producer,
            record(b"y" * 80),
            InvalidEventError("bad", path="$"),
            topic="dlq",
            partitions=1,
            head_bytes=60,
            on_truncated=lambda: None,
        )
        assert await ack == "landed"
    [(value, headers)] = producer.sent
    assert value == b"y" * 80
    assert "stream-ctx.errors.value-truncated-to" not in dict(headers)
