"""`run`, `produce` and `tail` with no broker at a local address say how to start one;
`broker --max-memory` reads a size or refuses it."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

from stream_ctx.shell.commands.broker import memory_size, start_hint
from stream_ctx.shell.commands.cli import main

EVENTS = Path(__file__).resolve().parents[3] / "examples" / "readme.jsonl"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_local_address_nobody_answers_gets_the_hint() -> None:
    port = _closed_port()
    hint = start_hint([f"localhost:{port}"])
    assert f"nothing listens on localhost:{port}" in hint
    assert "`stream-ctx broker`" in hint


def test_a_listening_local_address_or_a_remote_one_gets_none() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert start_hint([f"127.0.0.1:{sock.getsockname()[1]}"]) == ""
    assert start_hint(["kafka.example.com:9092"]) == ""
    assert start_hint([f"127.0.0.1:{_closed_port()}", "kafka.example.com:9092"]) == ""


def test_produce_without_a_broker_ends_with_the_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STREAM_CTX_KAFKA_BOOTSTRAP_SERVERS", f"127.0.0.1:{_closed_port()}")
    assert main(["produce", str(EVENTS)]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("stream-ctx: BrokerError: ")
    assert last.endswith(
        "start a local broker with `stream-ctx broker` (in another terminal,"
        " with the same --config)"
    )


@pytest.mark.parametrize(("text", "size"), [("0", 0), ("512MiB", 512 << 20), ("2GiB", 2 << 30)])
def test_max_memory_reads_sizes_in_binary_units(text: str, size: int) -> None:
    assert memory_size(text) == size


@pytest.mark.parametrize("text", ["2GB", "2", "-1GiB", "1.5GiB", "GiB", ""])
def test_max_memory_refuses_anything_else_naming_the_value(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=rf"`--max-memory` .* got {text!r}$"):
        memory_size(text)
