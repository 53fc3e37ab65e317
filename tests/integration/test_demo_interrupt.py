"""Ctrl-C on `stream-ctx demo`: SIGINT to the whole process group, as a terminal sends it."""

from __future__ import annotations

import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time

import pytest

# Starting the broker, loading the tokenizer and joining the group, then the first bundle.
FIRST_BUNDLE_TIMEOUT_S = 60.0
# The drain, leaving the group and Tansu's own ~1.7 s shutdown; past this it hangs.
EXIT_TIMEOUT_S = 15.0
_PROCESSOR = re.compile(r"processor running against 127\.0\.0\.1:(\d+)")


def read_until(process: subprocess.Popen[bytes], pattern: str, timeout_s: float) -> str:
    """Stdout so far, once it matches `pattern` (fails after `timeout_s`)."""
    assert process.stdout is not None
    output, deadline = "", time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        for _ in range(100_000):  # reads of up to 64 KiB: far more than a demo prints
            if re.search(pattern, output, re.MULTILINE):
                return output
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                break
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                break
            output += chunk.decode(errors="replace")
    pytest.fail(f"no {pattern!r} in {output!r}")


def test_ctrl_c_on_demo_prints_interrupted_and_the_summary_so_far_and_exits() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "stream_ctx.shell.commands.cli", "demo", "--conversations", "200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a group of its own, like a shell job
    )
    try:
        before = read_until(process, r"^\[\s*1/\d+\]", FIRST_BUNDLE_TIMEOUT_S)
        os.killpg(process.pid, signal.SIGINT)
        sent = time.monotonic()
        rest, stderr = process.communicate(timeout=EXIT_TIMEOUT_S)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    output = before + rest.decode(errors="replace")
    print(f"demo exited {took:.2f} s after SIGINT")
    assert process.returncode == 130, (output, stderr)
    assert "\ninterrupted: stopping the processor, then the broker\n" in output
    summary = re.search(
        r"^(\d+)/(\d+) bundles from \d+/\d+ events sent; tokens", output, re.MULTILINE
    )
    assert summary is not None, output
    assert 1 <= int(summary.group(1)) < int(summary.group(2))
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")
    match = _PROCESSOR.search(output)
    assert match is not None, output
    with pytest.raises(OSError):  # the embedded broker is gone too
        socket.create_connection(("127.0.0.1", int(match.group(1))), timeout=2).close()
