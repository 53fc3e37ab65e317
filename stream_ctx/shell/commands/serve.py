"""`stream-ctx serve`: the latest bundles of the output topic for agents, over an HTTP API and
MCP (the service itself is stream_ctx.shell.serve)."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from stream_ctx.settings import load_settings
from stream_ctx.shell.commands.subcommand import Commands, add_command, log_options, run_async

__all__ = ("add_to",)


def add_to(commands: Commands) -> None:
    """`stream-ctx serve [--config FILE] [--host HOST] [--port PORT] [--stdio]`."""
    command = add_command(
        commands,
        "serve",
        parents=[log_options()],
        summary="serve the latest bundles to agents over an HTTP API and MCP",
    )
    command.add_argument("--config", type=Path, help="TOML config file ([kafka], [serve])")
    command.add_argument("--host", help="overrides serve.host")
    command.add_argument("--port", type=int, help="overrides serve.port")
    command.add_argument(
        "--stdio", action="store_true", help="speak MCP on stdin/stdout (for hosts that launch it)"
    )
    command.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    # Here, not at the top: the MCP server's import costs every other command a second.
    from stream_ctx.shell.serve.service import run_serve

    overrides = {f"serve.{k}": getattr(args, k) for k in ("host", "port") if getattr(args, k)}
    settings = load_settings(args.config, overrides=overrides)
    run_async(partial(run_serve, settings, stdio=args.stdio))
    return 0
