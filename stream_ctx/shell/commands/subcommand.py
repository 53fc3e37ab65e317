"""Subcommands whose --help opens with their one-line description (what `stream-ctx --help`
lists for them), then usage and options."""

from __future__ import annotations

import argparse

__all__ = ("DescriptionFirstParser", "add_command")


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


def add_command(
    commands: argparse._SubParsersAction[DescriptionFirstParser],
    name: str,
    *,
    summary: str,
    **kwargs: object,
) -> argparse.ArgumentParser:
    """A subcommand whose --help opens with the line `stream-ctx --help` lists for it."""
    description = summary[0].upper() + summary[1:] + "."
    return commands.add_parser(name, help=summary, description=description, **kwargs)  # type: ignore[arg-type]
