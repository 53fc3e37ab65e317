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

__all__ = ("add_to", "run_broker", "start_hint")
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
# A refused connection answers at once; this only bounds a host that drops packets.
_PROBE_TIMEOUT_S = 1.0
# How often a broker that died on its own is noticed; it answers Ctrl-C at once regardless.
_LIVENESS_INTERVAL_S = 0.5


async def run_broker(settings: Settings, *, port: int, partitions: int, out: TextIO) -> None:
    """Start the broker on `port` (0: a free one), create the topics, wait for SIGINT/SIGTERM."""
    async with embedded_broker(port=port or None) as broker:
        inputs = {topic: partitions for topic in settings.kafka.input_topics}
        specs = [TopicSpec(name=topic, partitions=partitions) for topic in inputs]
        specs += topics_to_create(settings, inputs)
        await ensure_topics({"bootstrap_servers": broker.bootstrap_servers}, specs)
        out.write(
            f"embedded broker (in memory: everything is lost when it stops) on"
            f" {broker.bootstrap_servers}\n"
            f"topics: {', '.join(spec.name for spec in specs)}\n"
            f"bootstrap: {broker.bootstrap_servers}\n"
            "Ctrl-C stops it\n"
        )
        out.flush()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_fail_if_it_exits, broker)
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    out.write(f"{signal.Signals(signum).name}: stopping the broker\n")
                    out.flush()
                    break
            tasks.cancel_scope.cancel()


async def _fail_if_it_exits(broker: EmbeddedBroker) -> None:
    while broker.is_running:  # noqa: ASYNC110 - a child process's exit sets no event
        await anyio.sleep(_LIVENESS_INTERVAL_S)
    raise BrokerError(f"the embedded broker exited on its own; see {broker.log_path}")


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
    command.set_defaults(handler=_broker)


def _broker(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    port = args.port if args.port is not None else _local_port(settings.kafka.servers[0])
    run = partial(run_broker, settings, port=port, partitions=args.partitions, out=sys.stdout)
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
