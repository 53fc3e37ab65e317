"""`stream-ctx demo --serve`: the printed curl line works as printed, and so does the MCP
endpoint, until Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import anyio
from mcp import Client
from mcp_types import CallToolResult, TextContent

from tests.integration.test_demo_interrupt import read_until

# The broker, the processor's group join, a small sample, then serve's rebuild.
READY_TIMEOUT_S = 90.0
# One GET of a held bundle, or one finalize answered by the running processor.
REQUEST_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 20.0
_TRY = re.compile(r"^try:   (?P<command>curl .*)$", re.MULTILINE)
_MCP = re.compile(r"MCP \(streamable HTTP\) on (?P<url>http://\S+/mcp)$", re.MULTILINE)
_CID = re.compile(r"/v1/conversations/(?P<cid>[^/]+)/bundle")


async def _get_context(url: str, conversation_id: str) -> CallToolResult:
    with anyio.fail_after(REQUEST_TIMEOUT_S):
        async with Client(url) as client:
            return await client.call_tool("get_context", {"conversation_id": conversation_id})


def test_demo_serve_prints_a_curl_line_and_an_mcp_endpoint_that_work() -> None:
    demo = ["demo", "--serve", "--serve-port", "0", "--conversations", "2"]
    process = subprocess.Popen(
        [sys.executable, "-m", "stream_ctx.shell.commands.cli", *demo],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        output = read_until(process, r"^Ctrl-C to stop$", READY_TIMEOUT_S)
        tried, endpoint = _TRY.search(output), _MCP.search(output)
        assert tried is not None and endpoint is not None, output
        context = subprocess.run(
            ["bash", "-c", tried.group("command")],
            capture_output=True,
            text=True,
            timeout=REQUEST_TIMEOUT_S,
            check=True,
        ).stdout
        cid = _CID.search(tried.group("command"))
        assert cid is not None
        called = anyio.run(_get_context, endpoint.group("url"), cid["cid"])
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=EXIT_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert context.startswith("§1 ")
    texts = [c.text for c in called.content if isinstance(c, TextContent)]
    assert not called.is_error and texts[-1].startswith("§1 "), texts
    assert process.returncode == 0, stderr.decode(errors="replace")
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")
