"""`stream-ctx serve` while the broker goes away and comes back: 503, then answers again."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import anyio
import httpx
import msgspec
import pytest

from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from stream_ctx.shell.serve.service import serving
from tests.integration.serve_stack import start_stack

# Short, so a request to a frozen broker fails fast; the processor answers in milliseconds.
FINALIZE_TIMEOUT_S = 3.0
# aiokafka's own request bound, shorter than the outage so requests in flight fail.
CLIENT = {"request_timeout_ms": 2_000, "retry_backoff_ms": 100}
# A join, the outage, the processor's rejoin after its session expired, and the retries.
TEST_TIMEOUT_S = 120.0
# Requests after the broker returned, until one is answered: the processor may be rejoining.
RECOVERY_ATTEMPTS = 30
POLL_S = 0.1


@pytest.fixture
def own_broker() -> Iterator[EmbeddedBroker]:
    """A broker of this test's own: pausing the session's would stall its other users."""
    running = EmbeddedBroker.start()
    try:
        yield running
    finally:
        os.kill(running.pid, signal.SIGCONT)
        running.stop()


async def test_broker_gone_answers_503_then_recovers_and_nothing_hangs(
    own_broker: EmbeddedBroker,
) -> None:
    names = iter(range(100))
    cid = "outage-conv"
    with anyio.fail_after(TEST_TIMEOUT_S):
        stack = await start_stack(own_broker, lambda role: f"serve-outage.{role}.{next(names)}")
        kafka = msgspec.structs.replace(stack.settings.kafka, client=CLIENT)
        stack.settings = msgspec.structs.replace(stack.settings, kafka=kafka)  # serve's, below
        for _ in range(int(TEST_TIMEOUT_S / POLL_S)):  # the first join, before any timing
            if stack.runner.health.is_ready:
                break
            await anyio.sleep(POLL_S)
        await stack.retrieve(cid)
        settings = stack.serve_settings(finalize_timeout_s=FINALIZE_TIMEOUT_S)
        async with (
            serving(settings) as running,
            httpx.AsyncClient(base_url=running.base_url, timeout=TEST_TIMEOUT_S) as http,
        ):
            finalize = f"/v1/conversations/{cid}/finalize"
            before = await http.post(finalize)
            assert before.status_code == 200, before.text

            os.kill(own_broker.pid, signal.SIGSTOP)
            during = await http.post(finalize)
            cached = await http.get(f"/v1/conversations/{cid}/bundle")
            os.kill(own_broker.pid, signal.SIGCONT)

            statuses = []
            for _ in range(RECOVERY_ATTEMPTS):
                after = await http.post(finalize)
                statuses.append(after.status_code)
                if after.status_code == 200:
                    break
            os.kill(own_broker.pid, signal.SIGSTOP)  # and serve stops with the broker frozen
        os.kill(own_broker.pid, signal.SIGCONT)
        await stack.stop()
    assert during.status_code == 503, during.text
    assert during.headers["retry-after"] == "1"
    assert "did not take the finalize" in during.json()["error"]
    assert (cached.status_code, cached.content) == (200, before.content)  # the view still answers
    assert statuses[-1] == 200, statuses
    assert set(statuses[:-1]) <= {503, 504}, statuses
