"""`stream-ctx serve` end to end: p50/p99 of a cached GET and of POST finalize at a steady
request rate, and serve's memory per held conversation, on the embedded broker.

    python benchmarks/serve_bench.py                 # defaults below
    python benchmarks/serve_bench.py --conversations 2000 --get-rate 200 --finalize-rate 20

The processor (`stream-ctx run`) and serve (`stream-ctx serve`) run as processes of their own,
as deployed; this process only sends requests, open loop (each at its scheduled time, however
long earlier ones take), and reads serve's resident memory from /proc.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import anyio
import anyio.abc
import httpx
import msgspec

from stream_ctx.core.wire.events import Retrieval
from stream_ctx.corpora.workload import WorkloadShape, generate
from stream_ctx.shell.kafka.admin import TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import embedded_broker
from stream_ctx.shell.serve.store import BundleStore, Kept

_INPUT, _OUTPUT = "bench.retrievals", "bench.bundles"
# Starting a process, joining the group (~6 s on the embedded broker), a first rebuild.
_START_TIMEOUT_S = 120.0
# Seeding bundles for every conversation: a finalize each, a few at a time.
_SEED_CONCURRENCY = 8
_POLL_S = 0.2
# Serve's CPU with nothing to do is sampled over this long (its fetches of the output topic).
_IDLE_S = 5.0
# Kept-alive connections the measured requests share (a small agent platform's pool).
_CONNECTIONS = 16


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=10.0, help="per measured phase")
    parser.add_argument("--get-rate", type=float, default=100.0, help="cached GETs per second")
    parser.add_argument("--finalize-rate", type=float, default=20.0, help="finalizes per second")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    anyio.run(_bench, args)


async def _bench(args: argparse.Namespace) -> None:
    shape = WorkloadShape(
        conversations=args.conversations,
        retrievals_per_conversation=4,
        is_ending=False,
        start_ms=time.time_ns() // 1_000_000 - 7_200_000,  # recent: serve finalizes at "now"
    )
    events = [e for e in generate(args.seed, shape) if isinstance(e, Retrieval)]
    cids = sorted({e.conversation_id for e in events})
    async with embedded_broker() as broker:
        kwargs = {"bootstrap_servers": broker.bootstrap_servers}
        await ensure_topics(kwargs, [TopicSpec(name=_INPUT, partitions=4)])
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "bench.toml"
            port = _free_port()
            config.write_text(_config(broker.bootstrap_servers, port), encoding="utf-8")
            with _process("run", config) as processor:
                await _wait_for_output_topic(kwargs)
                with _process("serve", config) as serve:
                    base = f"http://127.0.0.1:{port}"
                    async with httpx.AsyncClient(base_url=base, timeout=60.0) as http:
                        await _until_ready(http, processor, serve)
                        rss_empty = _rss_kib(serve.pid)
                        await _produce(kwargs, events)
                        await _seed(http, cids)
                        rss_held = _rss_kib(serve.pid)
                        idle_from = _cpu_s(serve.pid)
                        await anyio.sleep(_IDLE_S)
                        idle_cpu = (_cpu_s(serve.pid) - idle_from) / _IDLE_S
                        async with _RawClient(port, _CONNECTIONS) as raw:
                            count = args.get_rate * args.seconds
                            one_by_one = await _sequential(raw, cids, count)
                            cpu = _cpu_s(serve.pid), time.process_time()
                            gets = await _steady(raw, cids, args.get_rate, args.seconds, "GET")
                            get_cpu = _cpu_s(serve.pid) - cpu[0], time.process_time() - cpu[1]
                            rate = args.finalize_rate
                            posts = await _steady(raw, cids, rate, args.seconds, "POST")
                        sample = [
                            (await http.get(f"/v1/conversations/{c}/bundle")).content
                            for c in cids[:200]
                        ]
    per_conversation = (rss_held - rss_empty) * 1024 / len(cids)
    print(f"serve idle (no requests, no bundles): {idle_cpu:.1%} of a core")
    print(f"conversations held: {len(cids)}; bundle size median {_median_len(sample)} bytes")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    _print("cached GET .../bundle, one at a time", one_by_one, None)
    _print("cached GET .../bundle", gets, args.get_rate)
    print(
        f"  CPU during the steady GETs: serve {get_cpu[0]:.2f} s, this client {get_cpu[1]:.2f} s"
        f" of {args.seconds:g} s"
    )
    _print("POST .../finalize (end to end)", posts, args.finalize_rate)
    print(f"serve RSS: {rss_empty / 1024:.1f} MiB empty, {rss_held / 1024:.1f} MiB holding")
    print(f"serve memory per held conversation (RSS): {per_conversation / 1024:.1f} KiB")
    print(
        f"store memory per held conversation (tracemalloc): {_store_bytes(sample) / 1024:.1f} KiB"
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _config(servers: str, port: int) -> str:
    return (
        "[kafka]\n"
        f'bootstrap_servers = "{servers}"\n'
        'group_id = "serve-bench"\n'
        f'input_topics = ["{_INPUT}"]\n'
        f'output_topic = "{_OUTPUT}"\n'
        "session_timeout_ms = 6000\n"
        "[serve]\n"
        f"port = {port}\n"
        "finalize_timeout_s = 30.0\n"
    )


class _process:
    """`stream-ctx <command> --config ...` for the duration of a `with` block."""

    def __init__(self, command: str, config: Path) -> None:
        self._argv = [
            sys.executable,
            "-m",
            "stream_ctx.shell.commands.cli",
            command,
            "--config",
            str(config),
        ]

    def __enter__(self) -> subprocess.Popen[bytes]:
        log = Path(tempfile.gettempdir()) / f"serve-bench-{self._argv[3]}.log"
        self._proc = subprocess.Popen(self._argv, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
        return self._proc

    def __exit__(self, *_: object) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()


async def _wait_for_output_topic(kwargs: dict[str, str]) -> None:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(**kwargs, group_id=None)
    await consumer.start()
    try:
        with anyio.fail_after(_START_TIMEOUT_S):
            for _ in range(int(_START_TIMEOUT_S / _POLL_S)):
                if _OUTPUT in await consumer.topics():
                    return
                await anyio.sleep(_POLL_S)
    finally:
        await consumer.stop()


async def _until_ready(http: httpx.AsyncClient, *processes: subprocess.Popen[bytes]) -> None:
    with anyio.fail_after(_START_TIMEOUT_S):
        while True:
            if any(p.poll() is not None for p in processes):
                raise SystemExit("a process exited; see serve-bench-*.log in the temp directory")
            try:
                if (await http.get("/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await anyio.sleep(_POLL_S)


async def _produce(kwargs: dict[str, str], events: list[Retrieval]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**kwargs, enable_idempotence=False, linger_ms=5)
    await producer.start()
    try:
        for event in events:
            await producer.send(
                _INPUT, msgspec.json.encode(event), key=event.conversation_id.encode()
            )
        await producer.flush()
    finally:
        await producer.stop()


async def _seed(http: httpx.AsyncClient, cids: list[str]) -> None:
    """One finalize per conversation, so serve holds a bundle of each (the first waits for the
    processor's group join)."""
    limit = anyio.Semaphore(_SEED_CONCURRENCY)

    async def one(cid: str) -> None:
        async with limit:
            response = await http.post(f"/v1/conversations/{cid}/finalize")
            response.raise_for_status()

    async with anyio.create_task_group() as tasks:
        for cid in cids:
            tasks.start_soon(one, cid)


async def _steady(
    http: _RawClient, cids: list[str], rate: float, seconds: float, method: str
) -> list[float]:
    """Latencies (ms) of requests sent open loop at `rate` per second for `seconds`; a request
    waiting for a free connection counts its wait."""
    rng, latencies = random.Random(1), []
    start = anyio.current_time()
    path = "/v1/conversations/{}/bundle" if method == "GET" else "/v1/conversations/{}/finalize"

    async def one(cid: str) -> None:
        began = time.perf_counter()
        status = await http.request(method, path.format(cid))
        assert status == 200, status  # noqa: S101 - a benchmark of answered requests
        latencies.append((time.perf_counter() - began) * 1000)

    async with anyio.create_task_group() as tasks:
        for n in range(int(rate * seconds)):
            await anyio.sleep_until(start + n / rate)
            tasks.start_soon(one, rng.choice(cids))
    return latencies


class _RawClient:
    """HTTP/1.1 over a few kept-alive connections, parsed by hand: httpx spends ~4 ms of CPU on
    a request, which on a busy box is the client's latency, not serve's."""

    def __init__(self, port: int, connections: int) -> None:
        self._port, self._count = port, connections
        self._idle: list[anyio.abc.SocketStream] = []
        self._free = anyio.Semaphore(connections)

    async def __aenter__(self) -> _RawClient:
        for _ in range(self._count):
            self._idle.append(await anyio.connect_tcp("127.0.0.1", self._port))
        return self

    async def __aexit__(self, *_: object) -> None:
        for stream in self._idle:
            await stream.aclose()

    async def request(self, method: str, path: str) -> int:
        """Send one request; returns the status once the whole body was read. A connection
        the server closed (its keep-alive timeout) is opened again, as clients do."""
        async with self._free:
            stream = self._idle.pop()
            try:
                try:
                    return await self._exchange(stream, method, path)
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    await stream.aclose()
                    stream = await anyio.connect_tcp("127.0.0.1", self._port)
                    return await self._exchange(stream, method, path)
            finally:
                self._idle.append(stream)

    @staticmethod
    async def _exchange(stream: anyio.abc.SocketStream, method: str, path: str) -> int:
        head = f"{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Length: 0\r\n\r\n"
        await stream.send(head.encode())
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            buffer += await stream.receive()
        header, _, body = buffer.partition(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        length = next(
            int(value)
            for name, _, value in (line.partition(":") for line in lines[1:])
            if name.lower() == "content-length"
        )
        while len(body) < length:
            body += await stream.receive()
        return int(lines[0].split()[1])


async def _sequential(http: _RawClient, cids: list[str], count: float) -> list[float]:
    """Latencies (ms) of GETs sent back to back: what one request costs with no queue."""
    rng, latencies = random.Random(2), []
    for _ in range(int(count)):
        began = time.perf_counter()
        status = await http.request("GET", f"/v1/conversations/{rng.choice(cids)}/bundle")
        assert status == 200, status  # noqa: S101 - a benchmark of answered requests
        latencies.append((time.perf_counter() - began) * 1000)
    return latencies


def _cpu_s(pid: int) -> float:
    """User and system CPU seconds a process has used (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def _store_bytes(sample: list[bytes]) -> float:
    """Bytes a BundleStore holds per conversation with one bundle each, measured in process."""
    copies = 1000
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = BundleStore(max_conversations=copies, max_bundles=1)
    for n in range(copies):
        raw = sample[n % len(sample)]
        kept = Kept.from_record(
            raw.replace(b'"conversation_id":"', b'"conversation_id":"%d-' % n, 1)
        )
        store.add(kept)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return held / copies


def _median_len(sample: list[bytes]) -> int:
    return int(statistics.median(len(s) for s in sample))


def _print(what: str, latencies: list[float], rate: float | None) -> None:
    cuts = statistics.quantiles(latencies, n=100)
    pace = f" at {rate:g}/s" if rate else ""
    print(
        f"{what}: {len(latencies)} requests{pace}: p50 {cuts[49]:.2f} ms,"
        f" p99 {cuts[98]:.2f} ms, max {max(latencies):.2f} ms"
    )


if __name__ == "__main__":
    main()
