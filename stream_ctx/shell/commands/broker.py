"""`stream-ctx broker`: the embedded broker on its own, with the config's topics, until Ctrl-C.

For a local loop that behaves as production does: `run`, `produce` and `tail` then talk to it
as to any Kafka cluster.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TextIO

import anyio

from stream_ctx.errors import BrokerError, ConfigError
from stream_ctx.settings import Settings, load_settings
from stream_ctx.shell.commands.subcommand import Commands, add_command, log_options, run_async
from stream_ctx.shell.kafka.admin import TopicSpec, ensure_topics
from stream_ctx.shell.kafka.embedded import EmbeddedBroker, embedded_broker
from stream_ctx.shell.kafka.topology import topics_to_create

__all__ = ("DEFAULT_MAX_MEMORY", "add_to", "memory_size", "run_broker", "start_hint")
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
# A refused connection answers at once; this only bounds a host that drops packets.
_PROBE_TIMEOUT_S = 1.0
# How often the broker's liveness and memory are read; it answers Ctrl-C at once regardless.
_WATCH_INTERVAL_S = 0.5
# The memory engine keeps every record (about 7 GiB after an hour at half load); past this much
# the broker restarts empty, unless `--max-memory` says otherwise.
DEFAULT_MAX_MEMORY = "2GiB"
# The share of `--max-memory` at which one line warns that a restart is coming.
_WARN_SHARE = 0.75
_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


async def run_broker(
    settings: Settings,
    *,
    port: int,
    partitions: int,
    out: TextIO,
    max_memory: int = 0,
) -> None:
    """Start the broker on `port` (0: a free one), create the topics, wait for SIGINT/SIGTERM;
    restart it empty whenever it holds more than `max_memory` bytes (0: never)."""
    async with embedded_broker(port=port or None) as broker:
        inputs = {topic: partitions for topic in settings.kafka.input_topics}
        specs = [TopicSpec(name=topic, partitions=partitions) for topic in inputs]
        specs += topics_to_create(settings, inputs)
        await ensure_topics({"bootstrap_servers": broker.bootstrap_servers}, specs)
        bound = (
            f"restarts empty past {_size_text(max_memory)} (--max-memory)"
            if max_memory
            else "grows without bound (--max-memory 0)"
        )
        out.write(
            f"embedded broker (in memory: everything is lost when it stops) on"
            f" {broker.bootstrap_servers}\n"
            f"topics: {', '.join(spec.name for spec in specs)}\n"
            f"memory: {bound}\n"
            f"bootstrap: {broker.bootstrap_servers}\n"
            "Ctrl-C stops it\n"
        )
        out.flush()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_watch, broker, specs, max_memory, out)
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    out.write(f"{signal.Signals(signum).name}: stopping the broker\n")
                    out.flush()
                    break
            tasks.cancel_scope.cancel()


async def _watch(
    broker: EmbeddedBroker, specs: list[TopicSpec], max_memory: int, out: TextIO
) -> None:
    """Fail if the broker exits on its own; warn as it nears `max_memory`, restart it past it."""
    warned = False
    while broker.is_running:
        await anyio.sleep(_WATCH_INTERVAL_S)
        held = broker.memory_bytes() if max_memory else None
        if held is None or held < _WARN_SHARE * max_memory:
            continue
        if held < max_memory:
            if not warned:
                out.write(
                    f"memory: the broker holds {_size_text(held)} of records; at"
                    f" {_size_text(max_memory)} (--max-memory) it restarts empty\n"
                )
                out.flush()
            warned = True
            continue
        out.write(
            f"memory: the broker holds {_size_text(held)}, over --max-memory"
            f" {_size_text(max_memory)}: restarting it empty (records, committed offsets and"
            " groups are dropped; clients reconnect)\n"
        )
        out.flush()
        await broker.restart()
        await ensure_topics({"bootstrap_servers": broker.bootstrap_servers}, specs)
        out.write(f"memory: restarted empty on {broker.bootstrap_servers}, topics recreated\n")
        out.flush()
        warned = False
    raise BrokerError(f"the embedded broker exited on its own; see {broker.log_path}")


def memory_size(text: str) -> int:
    """Bytes from `512MiB`, `2GiB` or `0` (the `--max-memory` argument)."""
    number, unit = text, "B"
    for suffix in _UNITS:
        if text.endswith(suffix):
            number, unit = text.removesuffix(suffix), suffix
    if not number.isdigit() or (unit == "B" and number != "0"):
        raise argparse.ArgumentTypeError(
            f"`--max-memory` must be a size such as 512MiB or 2GiB, or 0, got {text!r}"
        )
    return int(number) * _UNITS.get(unit, 1)


def _size_text(size: float) -> str:
    return (
        f"{size / _UNITS['GiB']:.1f} GiB"
        if size >= _UNITS["GiB"]
        else f"{size / _UNITS['MiB']:.0f} MiB"
    )


def start_hint(servers: Sequence[str]) -> str:
    """ "; nothing listens on <address>: start a broker with `stream-ctx broker`", when every
    bootstrap address is on this machine and none answers; "" otherwise (a remote cluster)."""
    addresses = [server.rpartition(":") for server in servers]
    if not addresses or any(host not in _LOCAL_HOSTS for host, _, _ in addresses):
        return ""
    for host, _, port in addresses:
        try:
            with socket.create_connection((host.strip("[]"), int(port)), _PROBE_TIMEOUT_S):
                return ""
        except (OSError, ValueError):
            continue
    return (
        f"; nothing listens on {', '.join(servers)}: start a local broker with"
        " `stream-ctx broker` (in another terminal, with the same --config)"
    )


def add_to(commands: Commands) -> None:
    """`stream-ctx broker [--config FILE] [--port PORT] [--partitions N]`."""
    command = add_command(
        commands,
        "broker",
        parents=[log_options()],
        summary="run the embedded broker alone, with the config's topics, until Ctrl-C",
    )
    command.add_argument("--config", type=Path, help="TOML config file (topic names)")
    command.add_argument(
        "--port",
        type=int,
        help="127.0.0.1 port; default: the port of kafka.bootstrap_servers (localhost:9092"
        " unless configured, so the other commands find it); 0: any free one",
    )
    command.add_argument(
        "--partitions", type=int, default=4, help="partitions of the input topics (default 4)"
    )
    command.add_argument(
        "--max-memory",
        type=memory_size,
        default=memory_size(DEFAULT_MAX_MEMORY),
        help="restart the broker empty when it holds more than this (it keeps every record in"
        f" memory); 512MiB, 2GiB, or 0 for never (default {DEFAULT_MAX_MEMORY})",
    )
    command.set_defaults(handler=_broker)


def _broker(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    port = args.port if args.port is not None else _local_port(settings.kafka.servers[0])
    run = partial(
        run_broker,
        settings,
        port=port,
        partitions=args.partitions,
        out=sys.stdout,
        max_memory=args.max_memory,
    )
    run_async(run)
    return 0


def _local_port(server: str) -> int:
    """The port of a bootstrap address on this machine, where `broker` is to listen."""
    host, _, port = server.rpartition(":")
    if host not in ("localhost", "127.0.0.1") or not port.isdigit():
        raise ConfigError(
            f"`kafka.bootstrap_servers` starts with {server!r}, not localhost:<port> or"
            " 127.0.0.1:<port>; give `stream-ctx broker --port`"
        )
    return int(port)
