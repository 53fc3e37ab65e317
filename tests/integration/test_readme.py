"""Every ```sh command and ```python snippet of README.md and of the docs pages runs as written,
in document order.

A page runs in a session of its own (its background blocks are stopped at its end), except the
pages of SESSIONS, which run one after another in one session: the client guide uses the broker
and processor the local-loop guide starts.

An HTML comment on the line before a block says how: `<!-- readme-test: background ready="RE"
done="RE" -->` starts a one-command block and waits for RE in its output (`done`: before it is
stopped with SIGINT at the end, when it must exit 0); `needs-broker` checks that a broker
started by an earlier block is up; `skip (reason)` leaves a block out. Every command gets
STREAM_CTX_KAFKA_BOOTSTRAP_SERVERS for a free port, so the README's `stream-ctx broker` listens
there. Nothing here reads bundle text: it checks exit statuses and the commands' own lines.
"""

from __future__ import annotations

import os
import re
import selectors
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SESSIONS = (("docs/guides/local-loop.md", "docs/guides/client.md"),)
# A foreground block: replay, schema, produce, the client snippet (which waits up to 30 s).
BLOCK_TIMEOUT_S = 120.0
# A background block's ready line: the broker starts in a second, `run` joins its group in ~3 s.
READY_TIMEOUT_S = 60.0
# Graceful stops: `run` drains and commits, the broker takes ~2 s.
STOP_TIMEOUT_S = 40.0
# Skipping is the exception: each one needs a reason, and there may be only this many (today:
# the install, the test suite twice, Docker, the docs server and the screenshots).
MAX_SKIPPED = 8
_FENCE = re.compile(r"^(`{3,})(\w*)\s*$")
_MARKER = re.compile(r"^<!-- readme-test: ([\w-]+)(.*?) -->$")
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Block:
    """One fenced block of a page and the marker before it, if any."""

    page: str
    line: int
    language: str
    text: str
    marker: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)
    reason: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def readme_blocks(text: str, page: str = "README.md") -> list[Block]:
    """The fenced blocks in order; a fence closes only on its own length of backticks."""
    blocks, lines = [], text.splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, language, start = opening.group(1), opening.group(2), index
        index += 1
        body = []
        while index < len(lines) and lines[index].strip() != fence:
            body.append(lines[index])
            index += 1
        index += 1
        marker = _MARKER.match(lines[start - 1].strip()) if start else None
        rest = marker.group(2).strip() if marker else ""
        blocks.append(
            Block(
                page=page,
                line=start + 1,
                language=language,
                text="\n".join(body) + "\n",
                marker=marker.group(1) if marker else None,
                attributes=dict(_ATTRIBUTE.findall(rest)),
                reason=rest.strip("()") if marker and marker.group(1) == "skip" else "",
            )
        )
    return blocks


@dataclass
class Background:
    """A running background block and everything it printed so far."""

    block: Block
    process: subprocess.Popen[bytes]
    output: str = ""

    def wait_for(self, pattern: str, timeout_s: float) -> None:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while not re.search(pattern, self.output, re.MULTILINE):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    pytest.fail(f"{self.block.where}: no {pattern!r} in {self.output!r}")
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    code = self.process.wait()
                    pytest.fail(f"{self.block.where}: exited {code}: {self.output!r}")
                self.output += chunk.decode(errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            rest, _ = self.process.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            rest, _ = self.process.communicate(timeout=STOP_TIMEOUT_S)
        self.output += rest.decode(errors="replace")
        return self.process.returncode


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


@pytest.fixture
def environment() -> Iterator[dict[str, str]]:
    """The caller's environment without its STREAM_CTX_ variables, the venv first on PATH."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_CTX_")}
    port = _free_port()
    clean["STREAM_CTX_KAFKA_BOOTSTRAP_SERVERS"] = f"127.0.0.1:{port}"
    # A group's first join takes about half the session timeout; the default is 10 s.
    clean["STREAM_CTX_KAFKA_SESSION_TIMEOUT_MS"] = "6000"
    clean["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{clean.get('PATH', '')}"
    yield clean


def _run(block: Block, environment: dict[str, str], tmp_path: Path) -> None:
    if block.language == "python":
        script = tmp_path / f"snippet_{Path(block.page).stem}_{block.line}.py"
        script.write_text(block.text, encoding="utf-8")
        command = [sys.executable, str(script)]
    else:
        command = ["bash", "-euo", "pipefail", "-c", block.text]
    done = subprocess.run(
        command,
        cwd=REPO,
        env=environment,
        capture_output=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, (
        f"{block.where} exited {done.returncode}:\n{block.text}\n"
        f"{done.stderr.decode(errors='replace')[-3000:]}"
    )


def _runnable(page: str) -> list[Block]:
    text = (REPO / page).read_text(encoding="utf-8")
    return [b for b in readme_blocks(text, page) if b.language in ("sh", "python")]


def _sessions() -> list[tuple[str, ...]]:
    """README.md, then every docs page that shows a command, grouped as SESSIONS says."""
    grouped = {page for session in SESSIONS for page in session}
    pages = [str(p.relative_to(REPO)) for p in sorted((REPO / "docs").rglob("*.md"))]
    alone = [(p,) for p in ["README.md", *pages] if p not in grouped and _runnable(p)]
    return [*alone, *SESSIONS]


def test_readme_blocks_are_parsed_with_their_markers() -> None:
    runnable = [b for session in _sessions() for page in session for b in _runnable(page)]
    skipped = [b for b in runnable if b.marker == "skip"]
    assert len(_runnable("README.md")) >= 6
    assert {b.marker for b in runnable} <= {None, "skip", "background", "needs-broker"}
    assert all(b.reason for b in skipped), [b.where for b in skipped if not b.reason]
    assert len(skipped) <= MAX_SKIPPED, [b.where for b in skipped]
    assert any(b.marker == "background" and "stream-ctx broker" in b.text for b in runnable)


@pytest.mark.parametrize("session", _sessions(), ids=lambda pages: "+".join(pages))
def test_readme_commands_and_snippets_run_as_written(
    session: tuple[str, ...], environment: dict[str, str], tmp_path: Path
) -> None:
    port = int(environment["STREAM_CTX_KAFKA_BOOTSTRAP_SERVERS"].rpartition(":")[2])
    blocks = [block for page in session for block in _runnable(page)]
    running: list[Background] = []
    try:
        for block in blocks:
            if block.marker == "skip":
                continue
            if block.marker == "needs-broker":
                assert _answers(port), f"{block.where} needs a broker started above it"
            if block.marker == "background":
                (command_line,) = block.text.strip().splitlines()
                process = subprocess.Popen(
                    shlex.split(command_line),
                    cwd=REPO,
                    env=environment,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
                running.append(Background(block, process))
                if "ready" in block.attributes:
                    running[-1].wait_for(block.attributes["ready"], READY_TIMEOUT_S)
                continue
            _run(block, environment, tmp_path)
        for background in running:
            if "done" in background.block.attributes:
                background.wait_for(background.block.attributes["done"], READY_TIMEOUT_S)
    finally:
        statuses = [(b.block.where, b.stop(), b.output) for b in reversed(running)]
    for where, status, output in statuses:
        assert status == 0, f"{where} exited {status} on SIGINT: {output[-3000:]}"


def test_readme_demo_prints_every_bundle(environment: dict[str, str]) -> None:
    blocks = readme_blocks(README.read_text())
    (quick_start,) = [b for b in blocks if "stream-ctx demo" in b.text and "pip install" in b.text]
    demo = shlex.split(quick_start.text.rpartition("&&")[2])
    done = subprocess.run(
        demo, cwd=REPO, env=environment, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr
    found = re.search(r"^(\d+)/(\d+) bundles", done.stdout, re.MULTILINE)
    assert found, done.stdout[-2000:]
    assert found.group(1) == found.group(2)
    sent = re.search(r"from (\d+)/(\d+) events sent", done.stdout)
    assert sent, done.stdout[-2000:]
    assert sent.group(1) == sent.group(2), "the demo stopped before its last events were sent"
