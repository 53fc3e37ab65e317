"""Where a benchmark page's figures came from: the machine, the Python and the commit."""

from __future__ import annotations

import platform
import subprocess


def machine() -> str:
    """One line naming the machine, the interpreter and the commit the figures ran at."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    python = f"{platform.python_implementation()} {platform.python_version()}"
    return f"{platform.machine()}, {python}, commit {commit or 'unknown'}"
