"""The local loop as a user runs it: `broker`, `run`, `tail` and `produce` as four processes."""

from __future__ import annotations

import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from stream_ctx.core.wire.codec import decode_event
from stream_ctx.core.wire.events import Finalize
from stream_ctx.settings import load_settings
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from tests.integration.kafka_io import create_input

REPO = Path(__file__).resolve().parents[2]
EVENTS = REPO / "examples" / "events.jsonl"
STREAM_CTX = Path(sys.executable).parent / "stream-ctx"
# The broker starts in well under a second; a group's first join takes ~half the session timeout.
START_TIMEOUT_S = 30.0
# Joining the group, then processing 44 events.
BUNDLES_TIMEOUT_S = 60.0
# Graceful stops: run drains and commits, Tansu takes ~2 s.
STOP_TIMEOUT_S = 40.0


def _environment() -> dict[str, str]:
    """This environment without STREAM_CTX_ overrides: only the config file configures."""
    return {k: v for k, v in os.environ.items() if not k.startswith("STREAM_CTX_")}


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(STREAM_CTX), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_environment(),
    )


def _stop(process: subprocess.Popen[str], signum: int = signal.SIGINT) -> tuple[int, str, str]:
    if process.poll() is None:
        process.send_signal(signum)
    try:
        out, err = process.communicate(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate(timeout=STOP_TIMEOUT_S)
    return process.returncode, out, err


def _read_until(process: subprocess.Popen[str], prefix: str, timeout_s: float) -> list[str]:
    """Lines of stdout up to and including the first starting with `prefix`."""
    assert process.stdout is not None
    received = ""
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while not any(
            line.startswith(prefix)
            for line in received.splitlines(keepends=True)[-2:]
            if line.endswith("\n")
        ):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                pytest.fail(f"no {prefix!r} line within {timeout_s} s; got {received!r}")
            # The raw descriptor: the text wrapper's buffer would hide lines from select().
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                pytest.fail(f"exited ({process.wait()}) before {prefix!r}; got {received!r}")
            received += chunk.decode()
    lines = received.splitlines()
    return lines[: next(i for i, line in enumerate(lines) if line.startswith(prefix)) + 1]


@pytest.fixture
def config(tmp_path: Path, unique_topic: object) -> Path:
    """A config with this test's own topics and group, and a short session timeout."""
    assert callable(unique_topic)
    path = tmp_path / "loop.toml"
    path.write_text(
        "[kafka]\n"
        f'input_topics = ["{unique_topic("in")}"]\n'
        f'output_topic = "{unique_topic("out")}"\n'
        f'dlq_topic = "{unique_topic("dlq")}"\n'
        f'group_id = "{unique_topic("group")}"\n'
        "session_timeout_ms = 6000\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def loop_broker(config: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`stream-ctx broker` on a free port, and the bootstrap address it printed."""
    process = _start("broker", "--config", str(config), "--port", "0")
    try:
        lines = _read_until(process, "bootstrap: ", START_TIMEOUT_S)
        yield process, lines[-1].removeprefix("bootstrap: ")
    finally:
        _stop(process)


def _with_servers(config: Path, servers: str) -> Path:
    path = config.with_name("client.toml")
    text = config.read_text(encoding="utf-8")
    path.write_text(text.replace("[kafka]\n", f'[kafka]\nbootstrap_servers = "{servers}"\n'))
    return path


def test_broker_run_produce_tail_give_every_bundle(
    config: Path, loop_broker: tuple[subprocess.Popen[str], str]
) -> None:
    broker, servers = loop_broker
    client_config = str(_with_servers(config, servers))
    lines = [line for line in EVENTS.read_bytes().splitlines() if line.strip()]
    expected = sum(isinstance(decode_event(line), Finalize) for line in lines)
    runner = _start("run", "--config", client_config)
    tail = _start("tail", "--config", client_config, "--from-beginning", "--count", str(expected))
    try:
        produced = subprocess.run(
            [str(STREAM_CTX), "produce", "--config", client_config, str(EVENTS)],
            capture_output=True,
            text=True,
            env=_environment(),
            timeout=START_TIMEOUT_S,
            check=False,
        )
        assert produced.returncode == 0, produced.stderr
        assert f"sent {len(lines)} event(s) of 4 conversation(s)" in produced.stderr
        assert expected > 0
        tail_out, tail_err = tail.communicate(timeout=BUNDLES_TIMEOUT_S)
    finally:
        tail_status = _stop(tail)[0]
        run_status, _, run_err = _stop(runner)
    assert tail_status == 0, tail_err
    shown = tail_out.splitlines()
    assert len(shown) == expected
    assert all(" items " in line and "saved" in line for line in shown)
    conversations = {decode_event(line).conversation_id for line in lines}
    assert {line.split()[0].rpartition(":")[0] for line in shown} == conversations
    assert run_status == 0, run_err
    assert f"brokers {servers}" in run_err.splitlines()[0]
    status, out, _ = _stop(broker)
    assert status == 0
    assert out.endswith("SIGINT: stopping the broker\n")


async def test_produce_reports_bad_lines_by_line_and_column_and_sends_the_rest(
    broker: EmbeddedBroker, config: Path, tmp_path: Path
) -> None:
    events = tmp_path / "events.jsonl"
    good = EVENTS.read_text(encoding="utf-8").splitlines()[0]
    bad_salience = good.replace('"salience":0.', '"salience":7.', 1)
    yesterday = re.sub(r'"ts":\d+', '"ts":"yesterday"', good, count=1)
    too_big = good.replace('"content":"', '"content":"' + "x" * len(good), 1)
    events.write_text(
        f'{good}\n{{"type": "end",\n{bad_salience}\n{good}\n{yesterday}\n{too_big}\n',
        encoding="utf-8",
    )
    client_config = str(_with_servers(config, broker.bootstrap_servers))
    topic = load_settings(config, environ={}).kafka.input_topics[0]
    command = [str(STREAM_CTX), "produce", "--config", client_config, str(events)]

    # No topic yet: refused, rather than left for the broker to auto-create.
    missing = await anyio.run_process(command, check=False, env=_environment())
    assert missing.returncode == 2
    assert f"input topic {topic!r} does not exist" in missing.stderr.decode()

    await create_input({"bootstrap_servers": broker.bootstrap_servers}, topic, partitions=1)
    # The limit `run` applies: a line over it is refused here, not dead-lettered there.
    limit = {"STREAM_CTX_KAFKA_MAX_EVENT_BYTES": str(len(good) * 3 // 2)}
    done = await anyio.run_process(command, check=False, env=_environment() | limit)
    err = done.stderr.decode().splitlines()
    column = bad_salience.index('"salience"') + 1
    assert err[0] == f"{events}:2:16: invalid JSON: Input data was truncated"
    assert err[1].startswith(f"{events}:3:{column}: `items[0].salience`: ")
    assert err[1].endswith(", got 7.78")
    ts_column = yesterday.index('"ts"') + 1
    assert err[2] == (
        f"{events}:5:{ts_column}: `ts`: Expected `int`, got 'yesterday';"
        " `ts` is epoch milliseconds (an integer)"
    )
    assert err[3] == (
        f"{events}:6:1: record value is {len(too_big.encode())} bytes, over"
        f" kafka.max_event_bytes = {limit['STREAM_CTX_KAFKA_MAX_EVENT_BYTES']}"
    )
    assert err[4] == f"sent 2 event(s) of 1 conversation(s) to {topic!r}; 4 bad line(s) skipped"
    assert done.returncode == 1


# Polls of `stream-ctx healthcheck` while `run` starts (each a fresh process of ~1 s).
HEALTH_POLLS = 60


async def test_healthcheck_follows_the_configured_metrics_port(
    broker: EmbeddedBroker, config: Path
) -> None:
    client_config = str(_with_servers(config, broker.bootstrap_servers))
    topic = load_settings(config, environ={}).kafka.input_topics[0]
    await create_input({"bootstrap_servers": broker.bootstrap_servers}, topic, partitions=1)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    environment = _environment() | {"STREAM_CTX_METRICS_PORT": port}
    check = [str(STREAM_CTX), "healthcheck", "--config", client_config]

    unset = await anyio.run_process(check, check=False, env=_environment())
    assert unset.returncode == 2
    assert b"`metrics.port` is not set" in unset.stderr
    down = await anyio.run_process(check, check=False, env=environment)
    assert down.returncode == 1
    assert down.stderr.decode().startswith(
        f"stream-ctx: unhealthy: http://127.0.0.1:{port}/healthz did not answer: "
    )

    async with await anyio.open_process(
        [str(STREAM_CTX), "run", "--config", client_config],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as runner:
        try:
            for _ in range(HEALTH_POLLS):
                done = await anyio.run_process(check, check=False, env=environment)
                if done.returncode == 0:
                    break
                assert runner.returncode is None, "run exited"
                await anyio.sleep(0.5)
            assert done.returncode == 0, done.stderr
            assert done.stderr == b""
        finally:
            runner.send_signal(signal.SIGINT)
            with anyio.fail_after(STOP_TIMEOUT_S):
                status = await runner.wait()
    assert status == 0


def test_broker_refuses_a_busy_port_or_a_remote_bootstrap_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run(
            [str(STREAM_CTX), "broker", "--port", str(port)],
            capture_output=True,
            text=True,
            env=_environment(),
            timeout=START_TIMEOUT_S,
            check=False,
        )
    assert (busy.returncode, busy.stderr) == (
        2,
        f"stream-ctx: BrokerError: cannot start the embedded broker: 127.0.0.1:{port} is already"
        " in use\n",
    )
    remote = subprocess.run(
        [str(STREAM_CTX), "broker"],
        capture_output=True,
        text=True,
        env=_environment() | {"STREAM_CTX_KAFKA_BOOTSTRAP_SERVERS": "kafka:9092"},
        timeout=START_TIMEOUT_S,
        check=False,
    )
    assert remote.returncode == 2
    assert remote.stderr.startswith("stream-ctx: ConfigError: `kafka.bootstrap_servers` starts")
