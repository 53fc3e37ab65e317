"""`stream-ctx serve`: the latest bundles of the output topic for agents, over an HTTP API and
MCP (the service itself is stream_ctx.shell.serve)."""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from pathlib import Path

from stream_ctx.settings import load_settings
from stream_ctx.shell.commands.subcommand import Commands, add_command, log_options, run_async

__all__ = ("add_to", "host_config")


def add_to(commands: Commands) -> None:
    """`stream-ctx serve [--config FILE] [--host HOST] [--port PORT] [--stdio | --mcp-config]`."""
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
    command.add_argument(
        "--mcp-config",
        action="store_true",
        help="print the `mcpServers` entry that launches this serve over stdio, with absolute"
        " paths, for an MCP host's config (Claude Desktop, Claude Code, .mcp.json); then exit",
    )
    command.set_defaults(handler=_serve)


def host_config(config: Path | None) -> dict[str, object]:
    """The `mcpServers` JSON launching `serve --stdio` with this installation and `config`:
    absolute paths, since a host starts it from a directory of its own with its own PATH."""
    script = Path(sys.executable).absolute().parent / "stream-ctx"
    if script.is_file():
        command, args = str(script), ["serve", "--stdio"]
    else:  # not installed with its script: the interpreter runs the command line module
        command, args = sys.executable, ["-m", "stream_ctx.shell.commands.cli", "serve", "--stdio"]
    if config is not None:
        args += ["--config", str(config.absolute())]
    return {"mcpServers": {"stream-ctx": {"command": command, "args": args}}}


def _serve(args: argparse.Namespace) -> int:
    if args.mcp_config:
        load_settings(args.config)  # a config that would not start serve is refused now
        print(json.dumps(host_config(args.config), indent=2))
        return 0
    # Here, not at the top: the MCP server's import costs every other command a second.
    from stream_ctx.shell.serve.service import run_serve

    overrides = {f"serve.{k}": getattr(args, k) for k in ("host", "port") if getattr(args, k)}
    settings = load_settings(args.config, overrides=overrides)
    run_async(partial(run_serve, settings, stdio=args.stdio))
    return 0
