"""Finalize on request: publish a finalize event to the input topic, as ContextClient does, and
wait for its bundle to land in the view."""

from __future__ import annotations

import time
import uuid
from types import TracebackType
from typing import Self

import anyio
import msgspec
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from stream_ctx.core.wire.codec import decode_event
from stream_ctx.core.wire.events import BundleMode, Finalize, History, RenderOrder
from stream_ctx.errors import BrokerError, FinalizeRefusedError, StreamCtxError
from stream_ctx.shell.kafka import clients
from stream_ctx.shell.serve.store import Kept
from stream_ctx.shell.serve.view import BundleView

__all__ = ("FinalizeTimeoutError", "Finalizer")

# Closing flushes and drops sockets; bounded so a broker that went away cannot hang shutdown.
_CLOSE_TIMEOUT_S = 5.0
_encoder = msgspec.json.Encoder()


class FinalizeTimeoutError(StreamCtxError):
    """The finalize was published but no bundle answered it in time."""

    retriable = True


class Finalizer:
    """One producer shared by every request; use `async with`."""

    def __init__(self, view: BundleView, *, timeout_s: float) -> None:
        self.view = view
        self.timeout_s = timeout_s
        kafka = view.kafka
        self._topic = kafka.input_topics[0]
        # A finalize the broker could not take within the wait expires instead of arriving late.
        timeout_ms = max(1_000, int(timeout_s * 1000))
        self._producer: AIOKafkaProducer = clients.producer(
            kafka, request_timeout_ms=timeout_ms, linger_ms=0
        )

    async def __aenter__(self) -> Self:
        try:
            with anyio.fail_after(self.timeout_s * 3):
                await self._producer.start()
        except (TimeoutError, KafkaError) as exc:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT_S):
                await self._producer.stop()
            raise BrokerError(
                f"cannot publish to {self._topic!r} on {self.view.kafka.servers!r}: {exc!r}"
            ) from exc
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT_S):
            await self._producer.stop()

    async def finalize(
        self,
        conversation_id: str,
        *,
        max_tokens: int | None = None,
        order: RenderOrder | None = None,
        mode: BundleMode | None = None,
        history: History | None = None,
        request_id: str | None = None,
    ) -> Kept:
        """The bundle answering a fresh finalize; InvalidEventError for a bad value (its subclass
        FinalizeRefusedError when the processor refused it: an unknown, ended or expired
        conversation), BrokerError if it could not be published, FinalizeTimeoutError if no
        answer came within `timeout_s`."""
        request_id = request_id or str(uuid.uuid4())
        event = Finalize(
            conversation_id=conversation_id,
            event_id=uuid.uuid4().hex,
            ts=time.time_ns() // 1_000_000,
            request_id=request_id,
            max_tokens=max_tokens,
            order=order,
            mode=mode,
            history=history,
        )
        deadline = anyio.current_time() + self.timeout_s
        # Registered before sending: the bundle may arrive before the acknowledgement does.
        with self.view.expect(conversation_id, request_id) as arrived:
            await self._publish(event, deadline)
            with anyio.move_on_at(deadline):
                await arrived.wait()
            kept = self.view.answer(conversation_id, request_id)
        if isinstance(kept, FinalizeRefusedError):
            raise kept
        if kept is None:
            raise FinalizeTimeoutError(
                f"no bundle answered `request_id` {request_id!r} of conversation"
                f" {conversation_id!r} within {self.timeout_s} s (`serve.finalize_timeout_s`);"
                f" is a stream-ctx processor consuming {self._topic!r}?"
            )
        return kept

    async def _publish(self, event: Finalize, deadline: float) -> None:
        """Checked against the schema first, as ContextClient does (structs built in code skip
        their constraints): a bad value is the caller's error, not a dead letter."""
        value = _encoder.encode(event)
        decode_event(value)
        try:
            with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                delivery = await self._producer.send(
                    self._topic, value, key=event.conversation_id.encode()
                )
                await delivery
        except (TimeoutError, KafkaError) as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else repr(exc)
            raise BrokerError(
                f"the broker did not take the finalize of conversation {event.conversation_id!r}"
                f" for {self._topic!r}: {reason}"
            ) from exc
