"""What every subcommand shares: a --help that opens with its one-line description (what
`stream-ctx --help` lists for it), and how its coroutine is run."""

from __future__ import annotations

import argparse
import importlib.metadata
import signal
from collections.abc import Awaitable, Callable
from typing import TypeAlias, TypeVar

import anyio
import anyio.abc

from stream_ctx.core.text.engine import CoreUnavailableError, load_core
from stream_ctx.core.window.config import CoreChoice
from stream_ctx.errors import StreamCtxError

__all__ = (
    "Commands",
    "DescriptionFirstParser",
    "add_command",
    "cancel_on_signal",
    "core_note",
    "log_options",
    "missing_core_reason",
    "run_async",
    "version",
    "worker_count",
)

_T = TypeVar("_T")
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class DescriptionFirstParser(argparse.ArgumentParser):
    """A subcommand whose --help opens with its one-line description, then usage and options."""

    def format_help(self) -> str:
        # argparse's own format_help, with the description moved before the usage.
        formatter = self._get_formatter()
        formatter.add_text(self.description)
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        for group in self._action_groups:
            formatter.start_section(group.title)
            formatter.add_text(group.description)
            formatter.add_arguments(group._group_actions)
            formatter.end_section()
        formatter.add_text(self.epilog)
        return formatter.format_help()


Commands: TypeAlias = "argparse._SubParsersAction[DescriptionFirstParser]"
"""Where each subcommand module adds its parser."""


def add_command(
    commands: Commands,
    name: str,
    *,
    summary: str,
    **kwargs: object,
) -> argparse.ArgumentParser:
    """A subcommand whose --help opens with the line `stream-ctx --help` lists for it."""
    description = summary[0].upper() + summary[1:] + "."
    return commands.add_parser(name, help=summary, description=description, **kwargs)  # type: ignore[arg-type]


def log_options() -> argparse.ArgumentParser:
    """`--log-json` and `--log-level`, a parent parser for the subcommands that log."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--log-json", action="store_true", help="one JSON object per log line")
    options.add_argument("--log-level", choices=_LEVELS, default="INFO", help="default: INFO")
    return options


def run_async(function: Callable[[], Awaitable[_T]]) -> _T:
    """Run a coroutine; a task group's lone StreamCtxError is raised as itself."""
    try:
        return anyio.run(function, backend="asyncio")
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1 and isinstance(group.exceptions[0], StreamCtxError):
            raise group.exceptions[0] from None
        raise


async def cancel_on_signal(
    scope: anyio.CancelScope,
    interrupted: anyio.Event | None = None,
    *,
    task_status: anyio.abc.TaskStatus[None],
) -> None:
    """At the first SIGINT or SIGTERM (Ctrl-C reaches the whole process group) cancel `scope`,
    and set `interrupted` if given."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for _ in signals:
            scope.cancel()
            if interrupted is not None:
                interrupted.set()
            return


def version() -> str:
    """The installed stream-ctx's version."""
    return importlib.metadata.version("stream-ctx")


def core_note(choice: CoreChoice = "auto") -> str:
    """Which core `choice` runs in this install, as `--version` and the start line say it;
    CoreUnavailableError when the compiled one is asked for and not built."""
    return f"{load_core(choice).name} core"


def missing_core_reason() -> str | None:
    """Why the compiled core does not run here (said once, at start), or None when it does."""
    try:
        load_core("compiled")
    except CoreUnavailableError as error:
        return str(error)
    return None


def worker_count(text: str) -> int:
    """`--workers`: an integer >= 1."""
    count = int(text)
    if count < 1:
        raise argparse.ArgumentTypeError(f"--workers must be an integer >= 1, got {text!r}")
    return count
