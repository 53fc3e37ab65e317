"""`stream-ctx serve`'s MCP server with the SDK's own client, over streamable HTTP and stdio."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import ResourceUpdatedNotification, TextContent

import stream_ctx
from stream_ctx.shell.commands.cli import main
from stream_ctx.shell.kafka.embedded import EmbeddedBroker
from stream_ctx.shell.serve.agent import context_uri
from stream_ctx.shell.serve.service import serving
from tests.integration.serve_stack import Stack, start_stack

# A finalize is answered in milliseconds once the processor joined; its first join takes ~6 s.
REQUEST_TIMEOUT_S = 30.0
TEST_TIMEOUT_S = 90.0
TOKEN_A, TOKEN_B = "token-of-tenant-a-0001", "token-of-tenant-b-0002"
_ROOT = Path(__file__).resolve().parents[2]
TENANTS = {
    "a": {"token": TOKEN_A, "prefixes": ["a:"]},
    "b": {"token": TOKEN_B, "prefixes": ["b:"]},
}


@pytest.fixture(scope="module")
async def stack(broker: EmbeddedBroker, request: pytest.FixtureRequest) -> AsyncIterator[Stack]:
    names = iter(range(1000))

    def unique(role: str) -> str:
        return f"serve-mcp.{role}.{next(names)}.{id(request)}"

    running = await start_stack(broker, unique)
    yield running
    await running.stop()


def _texts(content: Sequence[object]) -> list[str]:
    return [block.text for block in content if isinstance(block, TextContent)]


async def test_get_context_returns_the_text_with_the_guide_once_and_stats(stack: Stack) -> None:
    cid = "mcp-conv-1"
    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve(cid)
        settings = stack.serve_settings(finalize_timeout_s=REQUEST_TIMEOUT_S)
        async with serving(settings) as running, Client(f"{running.base_url}/mcp") as client:
            tools = await client.list_tools()
            assert [t.name for t in tools.tools] == ["get_context"]
            first = await client.call_tool(
                "get_context", {"conversation_id": cid, "max_tokens": 400}
            )
            second = await client.call_tool("get_context", {"conversation_id": cid})
            bad = await client.call_tool("get_context", {"conversation_id": cid, "max_tokens": 0})
            empty = await client.call_tool("get_context", {"conversation_id": ""})
            read = await client.read_resource(context_uri(cid))
    assert not first.is_error, first
    guide, context = _texts(first.content)
    assert guide == stream_ctx.READING_GUIDE
    assert "passage 0 of turn 0" in context
    assert _texts(second.content) == [context]
    assert bad.is_error
    assert _texts(bad.content)[0].endswith("`max_tokens`: Expected `int` >= 1, got 0")
    assert empty.is_error
    assert _texts(empty.content)[0].endswith(
        "`conversation_id`: Expected `str` of length >= 1, got ''"
    )
    assert first.structured_content is not None
    assert first.structured_content["tokens_bundle"] > 0
    assert first.structured_content["cache_breakpoint"] == {"chars": 0, "tokens": 0, "meets": []}
    assert second.structured_content is not None
    assert second.structured_content["cache_breakpoint"]["chars"] == len(context)
    assert first.structured_content["conversation_tokens_sent"] > 0
    assert [c.text for c in read.contents] == [context]  # type: ignore[union-attr]


async def test_subscriber_hears_resources_updated_when_a_new_bundle_lands(stack: Stack) -> None:
    cid = "mcp-conv-2"
    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve(cid)
        settings = stack.serve_settings(finalize_timeout_s=REQUEST_TIMEOUT_S)
        async with (
            serving(settings) as running,
            Client(f"{running.base_url}/mcp") as client,
            client.listen(resource_subscriptions=[context_uri(cid)]) as subscription,
            httpx.AsyncClient(base_url=running.base_url, timeout=REQUEST_TIMEOUT_S) as http,
        ):
            posted = await http.post(f"/v1/conversations/{cid}/finalize")
            assert posted.status_code == 200, posted.text
            event = await anext(aiter(subscription))
    assert event == ResourceUpdated(uri=context_uri(cid))


async def test_stdio_transport_serves_the_same_tool_and_resource(
    stack: Stack, tmp_path: Path
) -> None:
    cid = "mcp-conv-3"
    kafka = stack.settings.kafka
    config = tmp_path / "serve.toml"
    config.write_text(
        "[kafka]\n"
        f'bootstrap_servers = "{kafka.servers[0]}"\n'
        f'input_topics = ["{kafka.input_topics[0]}"]\n'
        f'output_topic = "{kafka.output_topic}"\n'
        "[serve]\n"
        f"finalize_timeout_s = {REQUEST_TIMEOUT_S}\n",
        encoding="utf-8",
    )
    command = StdioServerParameters(
        command=sys.executable,
        args=["-m", "stream_ctx.shell.commands.cli", "serve", "--stdio", "--config", str(config)],
    )
    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve(cid)
        async with Client(command) as client:
            called = await client.call_tool("get_context", {"conversation_id": cid})
            read = await client.read_resource(context_uri(cid))
    assert not called.is_error, called
    guide, context = _texts(called.content)
    assert guide == stream_ctx.READING_GUIDE
    assert [c.text for c in read.contents] == [context]  # type: ignore[union-attr]


@asynccontextmanager
async def _as(base_url: str, token: str) -> AsyncIterator[Client]:
    """An MCP client over streamable HTTP sending `token` as its bearer token."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=REQUEST_TIMEOUT_S) as http:
        transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
        async with Client(transport, cache=None) as client:
            yield client


async def test_tenant_sees_only_its_prefixes_in_tools_resources_and_subscriptions(
    stack: Stack,
) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve("b:conv")
        await stack.retrieve("a:conv")
        settings = stack.serve_settings(finalize_timeout_s=REQUEST_TIMEOUT_S, tenants=TENANTS)
        async with (
            serving(settings) as running,
            _as(running.base_url, TOKEN_A) as a,
            _as(running.base_url, TOKEN_B) as b,
            a.listen(
                resource_subscriptions=[context_uri("b:conv"), context_uri("a:conv")]
            ) as seen_by_a,
            b.listen(resource_subscriptions=[context_uri("b:conv")]) as seen_by_b,
            httpx.AsyncClient(base_url=running.base_url, timeout=REQUEST_TIMEOUT_S) as http,
        ):
            denied = await a.call_tool("get_context", {"conversation_id": "b:conv"})
            absent = await a.call_tool("get_context", {"conversation_id": "b:nobody"})
            reads = []
            for client, cid in ((a, "b:conv"), (b, "b:nobody")):
                with pytest.raises(MCPError) as raised:
                    await client.read_resource(context_uri(cid))
                reads.append(str(raised.value).replace(cid, "<id>"))
            for cid, token in (("b:conv", TOKEN_B), ("a:conv", TOKEN_A)):
                posted = await http.post(
                    f"/v1/conversations/{cid}/finalize",
                    headers={"Authorization": f"Bearer {token}"},
                )
                assert posted.status_code == 200, posted.text
            # Bundles fan out in order: had A heard of b:conv, that would come first.
            heard_by_b = await anext(aiter(seen_by_b))
            heard_by_a = await anext(aiter(seen_by_a))
    assert denied.is_error and absent.is_error
    assert _texts(denied.content) == [
        t.replace("b:nobody", "b:conv") for t in _texts(absent.content)
    ]
    assert reads[0] == reads[1]
    assert heard_by_b == ResourceUpdated(uri=context_uri("b:conv"))
    assert heard_by_a == ResourceUpdated(uri=context_uri("a:conv"))


async def test_legacy_host_on_an_earlier_protocol_subscribes_and_is_notified(stack: Stack) -> None:
    cid = "mcp-conv-legacy"
    updates: list[str] = []
    notified = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            updates.append(message.params.uri)
            notified.set()

    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve(cid)
        settings = stack.serve_settings(finalize_timeout_s=REQUEST_TIMEOUT_S)
        async with (
            serving(settings) as running,
            Client(f"{running.base_url}/mcp", mode="legacy", message_handler=on_message) as client,
        ):
            assert client.server_capabilities.resources is not None
            assert client.server_capabilities.resources.subscribe
            with pytest.warns(MCPDeprecationWarning, match="resources/subscribe"):
                await client.subscribe_resource(context_uri(cid))
            called = await client.call_tool("get_context", {"conversation_id": cid})
            await notified.wait()
    assert not called.is_error, called
    assert updates[0] == context_uri(cid)


async def test_unknown_or_ended_conversations_are_tool_errors_and_unicode_ids_work(
    stack: Stack,
) -> None:
    unicode_id, ended = 'Gespräch "λ/ж" 会話 💬 100%', "mcp-ended"
    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve(unicode_id)
        await stack.retrieve(ended)
        settings = stack.serve_settings(finalize_timeout_s=REQUEST_TIMEOUT_S)
        async with serving(settings) as running, Client(f"{running.base_url}/mcp") as client:
            unknown = await client.call_tool("get_context", {"conversation_id": "nope"})
            good = await client.call_tool("get_context", {"conversation_id": ended})
            await stack.end(ended)
            after_end = await client.call_tool("get_context", {"conversation_id": ended})
            read_ended = await client.read_resource(context_uri(ended))
            called = await client.call_tool("get_context", {"conversation_id": unicode_id})
            read = await client.read_resource(context_uri(unicode_id))
            assert running.view.store.latest("nope") is None
    assert unknown.is_error
    assert _texts(unknown.content)[0].endswith(
        ": finalize refused: conversation 'nope' has no events; send a retrieval to start it"
    )
    assert after_end.is_error
    assert "conversation 'mcp-ended' has ended" in _texts(after_end.content)[0]
    # The last good context stays the one read.
    assert [c.text for c in read_ended.contents] == _texts(good.content)[-1:]  # type: ignore[union-attr]
    assert not called.is_error, called
    context = _texts(called.content)[-1]
    assert f"on {unicode_id}" in context
    assert [c.text for c in read.contents] == [context]  # type: ignore[union-attr]


async def test_every_tool_parameter_is_described_and_delta_says_when(stack: Stack) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with serving(stack.serve_settings()) as running:
            async with Client(f"{running.base_url}/mcp") as client:
                (tool,) = (await client.list_tools()).tools
    properties = tool.input_schema["properties"]
    assert set(properties) == {"conversation_id", "max_tokens", "mode", "order", "include_guide"}
    for name, schema in properties.items():
        assert len(schema.get("description", "")) > 40, name
    assert "'delta'" in properties["mode"]["description"]
    assert "Use mode 'delta' when" in (tool.description or "")


async def test_host_configs_as_documented_launch_serve_for_an_mcp_client(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The repository's `.mcp.json` (relative paths, started at its root) and the entry
    `serve --mcp-config` prints (absolute paths, started anywhere), as a host launches them."""
    root = _ROOT
    assert main(["serve", "--config", str(root / "configs/stream-ctx.toml"), "--mcp-config"]) == 0
    printed = json.loads(capsys.readouterr().out)["mcpServers"]["stream-ctx"]
    project = json.loads((root / ".mcp.json").read_text())["mcpServers"]["stream-ctx"]
    kafka = stack.settings.kafka
    # The test broker's address and topics; a host passes the rest of its environment as is.
    environ = {
        "PATH": "/usr/bin:/bin",
        "STREAM_CTX_KAFKA_BOOTSTRAP_SERVERS": kafka.servers[0],
        "STREAM_CTX_KAFKA_INPUT_TOPICS": ",".join(kafka.input_topics),
        "STREAM_CTX_KAFKA_OUTPUT_TOPIC": kafka.output_topic,
        "STREAM_CTX_KAFKA_DLQ_TOPIC": kafka.dlq_topic,
    }
    cid = "mcp-host-config"
    answers = []
    with anyio.fail_after(TEST_TIMEOUT_S):
        await stack.retrieve(cid)
        for entry, cwd in ((project, root), (printed, tmp_path)):
            command = StdioServerParameters(
                command=entry["command"], args=entry["args"], env=environ, cwd=cwd
            )
            async with Client(command) as client:
                answers.append(await client.call_tool("get_context", {"conversation_id": cid}))
    assert Path(printed["command"]).is_absolute()
    for called in answers:
        assert not called.is_error, called
        assert "passage 1 of turn 0" in _texts(called.content)[-1]
