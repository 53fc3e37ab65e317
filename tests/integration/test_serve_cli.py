"""`stream-ctx serve` as a process: its start shows the rebuild and who may read, never a token,
and SIGTERM stops it."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx

from stream_ctx.core.wire.codec import encode_bundle
from stream_ctx.shell.kafka.admin import ClientKwargs, TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from tests.integration.kafka_io import produce
from tests.integration.test_client import a_bundle

# Starting Python, loading the tokenizer, connecting and reading a small topic.
START_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 20.0
TOKEN = "token-of-acme-never-logged"  # noqa: S105 - a test token


async def _topics_with_bundles(kwargs: ClientKwargs, source: str, sink: str) -> None:
    """The input topic, and an output topic holding three bundles of tenant acme."""
    topics = [TopicSpec(name=source, partitions=1), TopicSpec(name=sink, partitions=2)]
    await ensure_topics(kwargs, topics)
    bundles = [a_bundle(f"acme:{n}", f"r-{n}") for n in range(3)]
    await produce(kwargs, sink, [(b.conversation_id.encode(), encode_bundle(b)) for b in bundles])


def test_serve_logs_its_rebuild_and_tenants_but_no_token_and_stops_on_sigterm(
    broker: EmbeddedBroker, unique_topic: Callable[[str], str], tmp_path: Path
) -> None:
    kwargs: ClientKwargs = {"bootstrap_servers": broker.bootstrap_servers}
    source, sink = unique_topic("in"), unique_topic("out")
    anyio.run(_topics_with_bundles, kwargs, source, sink)
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[kafka]\nbootstrap_servers = "{broker.bootstrap_servers}"\n'
        f'input_topics = ["{source}"]\noutput_topic = "{sink}"\n'
        '[serve]\nhost = "0.0.0.0"\nport = 0\n'
        '[serve.tenants.acme]\ntoken_env = "ACME_TOKEN"\nprefixes = ["acme:"]\n',
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "stream_ctx.shell.commands.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "ACME_TOKEN": TOKEN},
    )
    try:
        logged = _read_until(process, "serving 3 conversations")
        port = re.search(r"HTTP API on http://0\.0\.0\.0:(\d+)/v1", logged)
        assert port is not None, logged
        answers = _requests(f"http://127.0.0.1:{port[1]}")
        logged += _read_until(process, "GET /v1/conversations 200 tenant=unknown")
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=EXIT_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    logged += rest.decode(errors="replace")
    assert process.returncode == 0, logged
    assert (
        "rebuilding the view of" in logged and "3/3 records (100%), 3 conversations; done" in logged
    )
    assert "tenants acme ['acme:']" in logged
    assert "SIGTERM: stopping" in logged
    assert TOKEN not in logged
    assert answers == [200, 404, 404, ["acme:0", "acme:1", "acme:2"], []]
    # The access log tells a wrong or missing token from a missing conversation.
    for line in (
        "GET /v1/conversations/acme:0/bundle 200 tenant=acme",
        "GET /v1/conversations/acme:0/bundle 404 tenant=unknown",
        "GET /v1/conversations/acme:0/bundle 404 tenant=none",
        "GET /v1/conversations 200 tenant=acme",
    ):
        assert f"stream_ctx.shell.serve.access: {line} " in logged, line


def _requests(base_url: str) -> list[object]:
    """The latest bundle with the token, a wrong one and none; the list with the token and a
    wrong one."""
    bundle = "/v1/conversations/acme:0/bundle"
    wrong = {"Authorization": "Bearer not-the-token-of-anyone"}
    with httpx.Client(base_url=base_url, timeout=EXIT_TIMEOUT_S) as http:
        codes: list[object] = [
            http.get(bundle, headers={"Authorization": f"Bearer {TOKEN}"}).status_code,
            http.get(bundle, headers=wrong).status_code,
            http.get(bundle).status_code,
        ]
        for headers in ({"Authorization": f"Bearer {TOKEN}"}, wrong):
            listing = http.get("/v1/conversations", headers=headers).json()
            codes.append([c["conversation_id"] for c in listing["conversations"]])
    return codes


def _read_until(process: subprocess.Popen[bytes], text: str) -> str:
    """stderr so far, once it holds `text` (fails after START_TIMEOUT_S)."""
    assert process.stderr is not None
    output, deadline = "", time.monotonic() + START_TIMEOUT_S
    with selectors.DefaultSelector() as selector:
        selector.register(process.stderr, selectors.EVENT_READ)
        for _ in range(100_000):  # reads of up to 64 KiB: far more than a start logs
            if text in output:
                return output
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                break
            chunk = os.read(process.stderr.fileno(), 65536)
            if not chunk:
                break
            output += chunk.decode(errors="replace")
    raise AssertionError(f"no {text!r} in {output!r}")
