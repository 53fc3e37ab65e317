"""TLS end to end: stunnel terminates TLS in front of the embedded broker, which advertises it.

Tansu's own `--cert`/`--key` flags refuse each other in the shipped build, so a real TLS
terminator stands in front of its plaintext port; the metadata sends every client through it.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import msgspec
import pytest
from aiokafka import AIOKafkaClient, AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError
from anyio.abc import Process

from stream_ctx.core.wire.events import Finalize
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.settings import Settings, client_kwargs, load_settings
from stream_ctx.shell.kafka.embedded import embedded_broker
from stream_ctx.shell.processing.runner import Runner
from tests.integration.kafka_io import collect, create_input, event_records, produce

HOST = "127.0.0.1"
# Debian's package; `.ci/run` installs it, and without it this test fails rather than skips.
STUNNEL_INSTALL = "apt-get install -y stunnel4"
# Key generation and signing take milliseconds; longer means openssl is stuck.
OPENSSL_TIMEOUT_S = 30.0
# stunnel binds its port within milliseconds; a cold CI runner gets ample room.
STUNNEL_READY_TIMEOUT_S = 15.0
STUNNEL_PROBE_INTERVAL_S = 0.05
# One loopback connect plus a TLS handshake; slower means "not listening yet".
TLS_PROBE_TIMEOUT_S = 2.0
# SIGTERM makes stunnel exit at once; past this it is hung and gets SIGKILL.
STUNNEL_STOP_TIMEOUT_S = 5.0
# A ~3 s group join, then a few dozen events; generous for a loaded CI runner.
RUN_TIMEOUT_S = 60.0
# A refusal is one failed handshake; the client's own request timeout is kept below this.
REFUSAL_TIMEOUT_S = 10.0
REFUSAL_REQUEST_TIMEOUT_MS = 3_000


@dataclass(frozen=True, slots=True)
class TlsBroker:
    """The embedded broker behind stunnel: clients reach it only over TLS on `tls_servers`."""

    tls_servers: str
    plaintext_servers: str
    cafile: Path


def require_tool(*names: str, install: str) -> str:
    """Path of the first of `names` on PATH; fails (never skips) the test when none is."""
    for name in names:
        path = shutil.which(name)
        if path is not None:
            return path
    pytest.fail(f"{names[0]} is not installed; the TLS test needs it: {install}")


def free_port() -> int:
    """A 127.0.0.1 port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
    return port


async def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1 and localhost; returns (cert, key)."""
    openssl = require_tool("openssl", install="apt-get install -y openssl")
    cert, key = directory / "cert.pem", directory / "key.pem"
    command = [
        openssl, "req", "-x509", "-nodes", "-days", "1",
        "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
        "-addext", f"subjectAltName=IP:{HOST},DNS:localhost",
        # It signs itself, so it is its own CA; strict verifiers want both said explicitly.
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,digitalSignature,keyCertSign",
    ]  # fmt: skip
    with anyio.fail_after(OPENSSL_TIMEOUT_S):
        await anyio.run_process(command)
    return cert, key


def stunnel_config(directory: Path, *, accept: int, connect: int, cert: Path, key: Path) -> Path:
    """A foreground stunnel service terminating TLS on `accept` and forwarding to `connect`."""
    path = directory / "stunnel.conf"
    path.write_text(
        "\n".join(
            [
                "foreground = yes",
                f"pid = {directory / 'stunnel.pid'}",
                "[kafka]",
                f"accept = {HOST}:{accept}",
                f"connect = {HOST}:{connect}",
                f"cert = {cert}",
                f"key = {key}",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    return path


async def wait_for_tls(process: Process, port: int, *, cafile: Path, log: Path) -> None:
    """Return once `port` completes a verified TLS handshake; fail if stunnel exits first."""
    context = ssl.create_default_context(cafile=cafile)
    max_probes = int(STUNNEL_READY_TIMEOUT_S / STUNNEL_PROBE_INTERVAL_S) + 1
    with anyio.fail_after(STUNNEL_READY_TIMEOUT_S):
        for _ in range(max_probes):
            if process.returncode is not None:
                output = await anyio.Path(log).read_text()
                pytest.fail(f"stunnel exited with {process.returncode}: {output}")
            try:
                with anyio.fail_after(TLS_PROBE_TIMEOUT_S):
                    stream = await anyio.connect_tcp(HOST, port, ssl_context=context)
                    await stream.aclose()
            except (OSError, TimeoutError, anyio.BrokenResourceError):
                await anyio.sleep(STUNNEL_PROBE_INTERVAL_S)
                continue
            return
    output = await anyio.Path(log).read_text()
    pytest.fail(f"stunnel did not accept TLS on {HOST}:{port}: {output}")


async def stop(process: Process) -> None:
    """SIGTERM, then SIGKILL; always reaps the process."""
    if process.returncode is not None:
        return
    process.terminate()
    with anyio.move_on_after(STUNNEL_STOP_TIMEOUT_S) as wait:
        await process.wait()
    if not wait.cancelled_caught:
        return
    process.kill()
    with anyio.fail_after(STUNNEL_STOP_TIMEOUT_S):
        await process.wait()


@asynccontextmanager
async def running_stunnel(
    stunnel: str, directory: Path, *, accept: int, connect: int, cert: Path, key: Path
) -> AsyncIterator[None]:
    """stunnel terminating TLS on `accept` until the block ends, logging to its directory."""
    config = stunnel_config(directory, accept=accept, connect=connect, cert=cert, key=key)
    log = directory / "stunnel.log"
    with log.open("ab") as out:
        process = await anyio.open_process(
            [stunnel, str(config)], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        await wait_for_tls(process, accept, cafile=cert, log=log)
        yield
    finally:
        # Shielded: a cancelled test still reaps stunnel instead of orphaning it.
        with anyio.CancelScope(shield=True):
            await stop(process)
            await process.aclose()


@pytest.fixture(scope="module")
async def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TlsBroker]:
    """An embedded broker advertising a stunnel TLS port in front of its plaintext port."""
    stunnel = require_tool("stunnel4", "stunnel", install=STUNNEL_INSTALL)
    directory = tmp_path_factory.mktemp("tls")
    cert, key = await make_certificate(directory)
    tls_port = free_port()
    async with embedded_broker(advertised_port=tls_port) as broker:
        plaintext_port = int(broker.bootstrap_servers.rpartition(":")[2])
        async with running_stunnel(
            stunnel, directory, accept=tls_port, connect=plaintext_port, cert=cert, key=key
        ):
            yield TlsBroker(
                tls_servers=f"{HOST}:{tls_port}",
                plaintext_servers=broker.bootstrap_servers,
                cafile=cert,
            )


def tls_settings(path: Path, tls: TlsBroker, unique_topic: Callable[[str], str]) -> Settings:
    """Settings read from a config file whose [kafka.client] table asks for verified TLS."""
    kafka = {
        "bootstrap_servers": tls.tls_servers,
        "group_id": unique_topic("group"),
        "input_topics": [unique_topic("in")],
        "output_topic": unique_topic("out"),
        "dlq_topic": unique_topic("dlq"),
        # Tansu answers a first join after about half the session timeout.
        "session_timeout_ms": 6_000,
    }
    client = {"security_protocol": "SSL", "ssl_cafile": str(tls.cafile)}
    # JSON strings, lists and integers are valid TOML values.
    lines = [
        "[kafka]",
        *(f"{k} = {json.dumps(v)}" for k, v in kafka.items()),
        "[kafka.client]",
        *(f"{k} = {json.dumps(v)}" for k, v in client.items()),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_settings(path, environ={})


async def test_runner_gets_bundles_over_tls_through_the_terminator(
    tls_broker: TlsBroker, unique_topic: Callable[[str], str], tmp_path: Path
) -> None:
    settings = tls_settings(tmp_path / "stream-ctx.toml", tls_broker, unique_topic)
    kwargs = client_kwargs(settings.kafka)
    assert kwargs["security_protocol"] == "SSL"
    assert isinstance(kwargs["ssl_context"], ssl.SSLContext)
    events = generate(5, WorkloadShape(conversations=4, retrievals_per_conversation=3))
    finalizes = [e for e in events if isinstance(e, Finalize)]
    source, sink = settings.kafka.input_topics[0], settings.kafka.output_topic
    runner = Runner(settings)
    with anyio.fail_after(RUN_TIMEOUT_S):
        await create_input(kwargs, source, partitions=2)
        await produce(kwargs, source, event_records(events))
        async with anyio.create_task_group() as tasks:
            await tasks.start(runner.run)
            records = await collect(kwargs, sink, len(finalizes), timeout_s=RUN_TIMEOUT_S)
            runner.stop.set()
    bundles = [msgspec.json.decode(r.value) for r in records]
    assert len(bundles) == len(finalizes)
    assert sorted(b["conversation_id"] for b in bundles) == sorted(
        f.conversation_id for f in finalizes
    )
    assert runner.stats.dead_letters == 0


async def test_plaintext_client_is_refused_on_the_tls_port(tls_broker: TlsBroker) -> None:
    # The same client bootstraps from the broker's own port: the terminator is what refuses it.
    control = AIOKafkaClient(
        bootstrap_servers=tls_broker.plaintext_servers,
        request_timeout_ms=REFUSAL_REQUEST_TIMEOUT_MS,
    )
    try:
        with anyio.fail_after(REFUSAL_TIMEOUT_S):
            await control.bootstrap()
    finally:
        await control.close()
    producer = AIOKafkaProducer(
        bootstrap_servers=tls_broker.tls_servers, request_timeout_ms=REFUSAL_REQUEST_TIMEOUT_MS
    )
    try:
        with anyio.fail_after(REFUSAL_TIMEOUT_S):
            with pytest.raises(KafkaConnectionError, match="Unable to bootstrap"):
                await producer.start()
    finally:
        await producer.stop()


async def test_client_refuses_a_certificate_it_was_not_given(
    tls_broker: TlsBroker, tmp_path: Path
) -> None:
    # Trusting another throwaway CA instead of the terminator's: the handshake must fail, so the
    # first test's success came from verifying the certificate, not from skipping the check.
    other_cert, _ = await make_certificate(tmp_path)
    settings = load_settings(
        None,
        environ={},
        overrides={
            "kafka.bootstrap_servers": tls_broker.tls_servers,
            "kafka.client": {
                "security_protocol": "SSL",
                "ssl_cafile": str(other_cert),
                "request_timeout_ms": REFUSAL_REQUEST_TIMEOUT_MS,
            },
        },
    )
    producer = AIOKafkaProducer(**client_kwargs(settings.kafka))
    try:
        with anyio.fail_after(REFUSAL_TIMEOUT_S):
            with pytest.raises(KafkaConnectionError, match="Unable to bootstrap"):
                await producer.start()
    finally:
        await producer.stop()
